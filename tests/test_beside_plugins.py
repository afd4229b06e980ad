"""The suite beside the plugins CI users run: the same verdicts with them in use, and never an INTERNALERROR.

pytest-rerunfailures (`--reruns 2`, often in a CI's addopts) reports each retried attempt with
the outcome "rerun"; the live matrix took it for a verdict and stopped the run with
`INTERNALERROR ValueError: unknown outcome 'rerun'`, serial and under `-n 2`.
pytest-randomly (random order), pytest-timeout, pytest-cov, `--lf` and `--ff` are in use in
the same runs. Each run is compared case by case, outcome and Δ, with a plain run.
"""

from __future__ import annotations

import pytest

from tests.conftest import junit_cases, parse_matrix

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

# Known by construction (tests/known_metrics.py): NOISE detects every step, REVERSED none.
METRICS = "--metric=known_metrics:noise_level,known_metrics:noise_level_reversed"
# "-p randomly": tests/conftest.py keeps pytest-randomly out of the other suite runs the tests make
PLUGINS = (
    "--reruns",
    "2",
    "--timeout=300",
    "--cov=known_metrics",
    "--cov-report=",
    "-p",
    "randomly",
    "--randomly-seed=7",
)


@pytest.mark.parametrize(
    "extra",
    [PLUGINS, (*PLUGINS, "-n", "2"), ("--lf",), ("--ff",), ("--lf", "-n", "2")],
    ids=["serial", "xdist", "last-failed", "failed-first", "last-failed-xdist"],
)
def test_plugins_in_use_give_the_same_verdicts(suite: pytest.Pytester, extra: tuple[str, ...]) -> None:
    plain = suite.runpytest_subprocess("--dataset=data", METRICS, "-p", "no:randomly", "--junitxml=plain.xml")
    result = suite.runpytest_subprocess("--dataset=data", METRICS, *extra, "--junitxml=with.xml")

    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert result.ret == plain.ret == pytest.ExitCode.TESTS_FAILED
    expected = {
        name: (outcome, props["delta"])
        for name, (outcome, props) in junit_cases(suite.path / "plain.xml").items()
    }
    got = {
        name: (outcome, props["delta"])
        for name, (outcome, props) in junit_cases(suite.path / "with.xml").items()
    }
    assert len(expected) == 12
    if "--lf" in extra:  # only the cases that failed, each with its verdict
        expected = {name: verdict for name, verdict in expected.items() if "reversed" in name}
    assert got == expected
    matrix = parse_matrix(result.stdout.str())
    assert matrix[("total", "noise_level_reversed")] == "6/6"
    if "--lf" not in extra:
        assert matrix == parse_matrix(plain.stdout.str())
