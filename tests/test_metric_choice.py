"""pytest's own ways of parametrizing `banana_metric` (docs/trial.md "Choosing metrics").

Each test writes a user's conftest and test module beside a small trajectory set and runs pytest
in a subprocess with two metrics selected; the user's choice is the second one alone. Before
banana_tests.session.case_fixtures, the hook and the fixture's params were a collection error
(`duplicate parametrization of 'banana_metric'`) and an override without params ran its own
metric under every id.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

NOISE, REVERSED = "known_metrics:noise_level", "known_metrics:noise_level_reversed"
SELECTION = f"--metric={NOISE},{REVERSED}"
CHECKS_ITS_METRIC = """
def test_a(banana_metric, request):
    assert banana_metric.name == request.node.callspec.params["banana_metric"]
"""

MARKER = (
    "",
    "import pytest\n\n@pytest.mark.parametrize('banana_metric', ['noise_level_reversed'], indirect=True)",
)
HOOK = (
    """
def pytest_generate_tests(metafunc):
    if "banana_metric" in metafunc.fixturenames:
        metafunc.parametrize("banana_metric", ["noise_level_reversed"], indirect=True)
""",
    "",
)
FIXTURE_PARAMS = (
    """
import pytest

@pytest.fixture(scope="session", params=["noise_level_reversed"])
def banana_metric(banana_metric):
    return banana_metric
""",
    "",
)


@pytest.mark.parametrize(
    ("conftest", "decorator"), [MARKER, HOOK, FIXTURE_PARAMS], ids=["marker", "hook", "params"]
)
def test_each_way_of_choosing_runs_the_chosen_metric_alone(
    suite: pytest.Pytester, conftest: str, decorator: str
) -> None:
    suite.makeconftest(conftest)
    suite.makepyfile(test_own=decorator + CHECKS_ITS_METRIC)
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data", SELECTION, "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert [line.split(" ")[0] for line in result.outlines if " PASSED" in line] == [
        "test_own.py::test_a[noise_level_reversed]"
    ]


def test_a_hook_choosing_after_its_own_parameter_keeps_both(suite: pytest.Pytester) -> None:
    """The plugin's default is withdrawn though another parametrization came between."""
    suite.makeconftest(
        """
def pytest_generate_tests(metafunc):
    if "banana_metric" in metafunc.fixturenames:
        metafunc.parametrize("shift", (s for s in (1, 2)))
        metafunc.parametrize("banana_metric", ["noise_level_reversed"], indirect=True)
"""
    )
    suite.makepyfile(
        test_own="def test_a(banana_metric, shift):\n    assert banana_metric.name.endswith('reversed')\n"
    )
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data", SELECTION, "-v", "-p", "no:randomly")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert [line.split(" ")[0] for line in result.outlines if " PASSED" in line] == [
        "test_own.py::test_a[1-noise_level_reversed]",
        "test_own.py::test_a[2-noise_level_reversed]",
    ]


@pytest.mark.parametrize(
    "returns", ["banana_metric", "banana_metrics[request.param]"], ids=["the-plugins", "request-param"]
)
def test_an_override_without_params_gets_each_selected_metric(suite: pytest.Pytester, returns: str) -> None:
    suite.makeconftest(
        f"""
import pytest

@pytest.fixture(scope="session")
def banana_metric(request, banana_metric, banana_metrics):
    return {returns}
"""
    )
    suite.makepyfile(test_own=CHECKS_ITS_METRIC)
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data", SELECTION, "-v")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=2)


def test_an_override_that_ignores_the_metric_errors_where_it_is_wrong(suite: pytest.Pytester) -> None:
    suite.makeconftest(
        """
import pytest

@pytest.fixture(scope="session")
def banana_metric(banana_metrics):
    return banana_metrics["noise_level"]
"""
    )
    suite.makepyfile(test_own="def test_a(banana_metric):\n    pass\n")
    result = suite.runpytest_subprocess("test_own.py", "--dataset=data", SELECTION, "-v")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "banana_metric: test_own.py::test_a[[]noise_level_reversed[]] is parametrized with"
            " 'noise_level_reversed' but your banana_metric fixture returned the Scorer for 'noise_level'."
            "*@pytest.mark.parametrize('banana_metric', [[]...[]], indirect=True)*docs/trial.md)"
        ]
    )
    assert result.stdout.str().count("is parametrized with") == 1
