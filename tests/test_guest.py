"""banana-tests as a guest: installed beside another project, it changes nothing in that project's runs.

The foreign project below is the common ML repository: a conftest that adds `--device`,
`--dataset`, `--steps`, ... and `--metric` of its own, and tests that record JUnit properties
named `metric`, `seed_image` and `step`, as ours do. With banana-tests installed its tests must
pass unchanged, under xdist's own scheduler, with torch's threads as the project set them, and
no banana-tests output. Its cost against `-p no:banana_tests` is measured by
benchmarks/bench_guest.py (5,940 cases); here each hook is shown to build nothing.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import junit_cases

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

pytest.importorskip("xdist")

OWN_OPTIONS = ("device", "dataset", "steps", "runs", "baseline", "cache-dir", "where", "variant", "metric")

CONFTEST = f"""
import gc
import json
import os
import sys

import pytest

OWN_OPTIONS = {OWN_OPTIONS!r}
SYS_PATH = list(sys.path)
COLLECTOR = gc.get_threshold()


def pytest_addoption(parser):
    group = parser.getgroup("the project's own")
    for name in OWN_OPTIONS:
        group.addoption(f"--{{name}}", default=f"own-{{name}}")


@pytest.fixture
def own_options(pytestconfig):
    return {{name: pytestconfig.getoption(name.replace("-", "_")) for name in OWN_OPTIONS}}


@pytest.fixture
def guest_state(pytestconfig):
    \"\"\"What banana-tests built in this process: nothing, in a run that is not its own.\"\"\"
    from banana_tests.session.run_state import SELECTED, SETTINGS
    from banana_tests.session.ownership import STATE

    plugins = pytestconfig.pluginmanager
    keys = {{"SETTINGS": SETTINGS, "SELECTED": SELECTED, "STATE": STATE}}
    return {{
        "stash": [name for name, key in keys.items() if key in pytestconfig.stash],
        "plugins": sorted(
            name for name, plugin in plugins.list_name_plugin() if name and name.startswith("banana-tests-")
        ),
        "heavy": sorted({{"torch", "pyiqa", "datasets", "banana_tests.session.reporter"}} & set(sys.modules)),
        "sys_path_changed": sys.path != SYS_PATH,
        "collector_tuned": gc.get_threshold() != COLLECTOR or gc.get_freeze_count() > 0,
        "weights_env": os.environ.get("BANANA_WEIGHTS_DIR"),
    }}
"""

TESTS = """
import json
import os

import pytest


def test_own_options_are_the_projects(own_options, pytestconfig):
    given = json.loads(os.environ["GIVEN"])
    assert own_options == {name: given.get(name, f"own-{name}") for name in own_options}


def test_the_guest_built_nothing(guest_state):
    assert guest_state == {
        "stash": [],
        "plugins": [],
        "heavy": [],
        "sys_path_changed": False,
        "collector_tuned": False,
        "weights_env": "rel/weights",
    }


def test_torch_threads_are_the_projects():
    import torch

    out = os.path.join(os.environ["THREADS_DIR"], os.environ.get("PYTEST_XDIST_WORKER", "main"))
    with open(out, "w") as file:
        file.write(str(torch.get_num_threads()))


@pytest.mark.parametrize("step", [5, 10, 20])
@pytest.mark.parametrize("seed_image", ["alpha", "beta"])
def test_records_like_a_suite_case(record_property, seed_image, step):
    for name, value in {"metric": "brisque", "seed_image": seed_image, "step": step, "delta": 1.0}.items():
        record_property(name, value)
"""


def printed_by_us(result: pytest.RunResult) -> list[str]:
    """Lines of the run's output from banana-tests: pytest's own list of plugins aside."""
    lines = [*result.outlines, *result.errlines]
    return [line for line in lines if "banana" in line and not line.startswith("plugins:")]


@pytest.fixture
def foreign(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_project=TESTS)
    pytester.makeini("[pytest]\njunit_family = xunit1\n")
    monkeypatch.setenv("GIVEN", "{}")
    monkeypatch.setenv("BANANA_WEIGHTS_DIR", "rel/weights")  # ours to resolve in our runs only
    monkeypatch.setenv("THREADS_DIR", str(pytester.path))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # tests/conftest.py sets it: torch chooses here
    return pytester


def test_the_projects_own_options_keep_their_meaning(
    foreign: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, pytest did not start: `ValueError: option dest 'device' already used`."""
    given = {"device": "cuda:1", "dataset": "imagenet", "steps": "1000", "metric": "fid", "cache-dir": "c"}
    monkeypatch.setenv("GIVEN", json.dumps(given))
    result = foreign.runpytest_subprocess(*(f"--{k}={v}" for k, v in given.items()), "-p", "no:randomly")
    result.assert_outcomes(passed=9)
    assert printed_by_us(result) == []  # no header, no matrix, no note


def test_the_projects_xdist_run_is_unchanged(
    foreign: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same outcomes and JUnit as with the plugin disabled; xdist's own scheduler; the
    threads torch chose itself."""
    runs = {}
    for label, args in {"guest": ("-n", "2"), "without": ("-n", "2", "-p", "no:banana_tests")}.items():
        threads = foreign.path / f"threads-{label}"
        threads.mkdir()
        monkeypatch.setenv("THREADS_DIR", str(threads))
        result = foreign.runpytest_subprocess(*args, "-v", "-p", "no:randomly", f"--junitxml={label}.xml")
        result.assert_outcomes(passed=9)
        assert printed_by_us(result) == []
        # what torch chose in each worker that ran the thread test (which worker does is xdist's call)
        chosen = sorted(p.read_text() for p in threads.iterdir())
        runs[label] = (junit_cases(foreign.path / f"{label}.xml"), result.stdout.str(), chosen)
    assert runs["guest"][0] == runs["without"][0]
    assert re.search(r"scheduling tests via LoadScheduling", runs["guest"][1]), runs["guest"][1]
    assert runs["guest"][2] == runs["without"][2] != []


def test_banana_options_still_work_there(foreign: pytest.Pytester) -> None:
    """`--banana-*` is always ours; the project's short names stay the project's."""
    foreign.makepyfile(
        test_ours="def test_ours(pytestconfig):\n"
        "    assert pytestconfig.getoption('banana_metric') == 'piqe'\n"
        "    assert pytestconfig.getoption('metric') == 'own-metric'\n"
    )
    result = foreign.runpytest_subprocess("--banana-metric=piqe", "-p", "no:randomly", "test_ours.py")
    result.assert_outcomes(passed=1)
    help_text = foreign.runpytest_subprocess("--help").stdout.str()
    assert "--banana-metric=NAMES" in help_text and "--banana-device=" in help_text
    assert "= --banana-metric" not in help_text  # the short alias is not registered: --metric is theirs
    assert "= --banana-trend" in help_text  # a free short name is


def test_the_projects_tests_and_the_suite_run_together(foreign: pytest.Pytester) -> None:
    """`pytest tests --banana-suite`: the project's own `tests/` folder (a name site-packages may
    also hold as a package) and the installed suite, every test of both collected once."""
    own = foreign.mkpydir("tests")
    (own / "test_mine.py").write_text("def test_mine():\n    pass\n")
    alone = foreign.runpytest_subprocess(
        "--banana-metric=piqe", "--collect-only", "-q", "--pyargs", "banana_tests"
    )
    together = foreign.runpytest_subprocess(
        "tests", "--banana-suite", "--banana-metric=piqe", "--collect-only", "-q", "-p", "no:randomly"
    )
    suite = [line for line in alone.outlines if "::" in line]
    both = [line for line in together.outlines if "::" in line]
    assert suite and sorted(both) == sorted([*suite, "tests/test_mine.py::test_mine"])


def test_no_alias_inside_another_plugins_namespace(pytester: pytest.Pytester) -> None:
    """`--snapshot-dir` and `--snapshot-rtol` were aliases in syrupy's `--snapshot-*`: the day
    syrupy added either, the flag would have configured syrupy instead. Only `--banana-` now."""
    from banana_tests.core.suite_options import suite_options
    from banana_tests.session.ownership import FOREIGN_NAMESPACES

    ours = {o.short for o in suite_options()}
    assert {"--snapshot-dir", "--snapshot-rtol"} <= ours
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    aliases = set(re.findall(r"^\s+(--[\w-]+)(?:=\S+)?\s+= --banana-", help_text, re.MULTILINE))
    assert "--trend" in aliases  # a free short name is an alias
    assert not {a for a in aliases if a.startswith(FOREIGN_NAMESPACES)}, aliases
    assert "--banana-snapshot-dir=DIR" in help_text and "--banana-snapshot-rtol=RTOL" in help_text
    unknown = pytester.runpytest_subprocess("--snapshot-rtol=0.2", "--co")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    unknown.stderr.fnmatch_lines(["*unrecognized arguments: --snapshot-rtol=0.2*"])
