"""A run of part of the suite, named by its test paths or node ids, merged alone: `banana-tests
report` calls it partial and exits 3, as it does a run narrowed by `-k`, `--deselect` or `--lf`.

Each row runs the suite through pytest in a fresh process (serial and under `-n 2`, whose
workers send the controller their plan) on a tiny set with the known metrics, then `report`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from banana_tests.families.family_list import FAMILIES
from banana_tests.reports.merge_checks import INCOMPLETE_EXIT, PLANNED
from banana_tests.session.ownership import suite_modules
from tests.conftest import write_set
from tests.test_shards import PROJECT, TARGETS, cases_in, report, suite_property

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

DEGRADATION = "banana_tests/families/degradation/test_degradation.py"
INVARIANCE_CASE = (
    "banana_tests/families/invariance/test_invariance.py::test_score_is_invariant[noise_level-resize]"
)
# the suite modules a whole run without --trend and --search collects, but test_degradation
OPTIONAL = {f.module for f in FAMILIES if f.option is not None}  # collected only under their option
UNREACHED = len([p for p in suite_modules() if p not in OPTIONAL]) - 1


def run_suite(data: Path, xml: Path, *paths: str, status: int = 1) -> Path:
    """The suite's tests named by `paths` (relative to the project) in a fresh process; its JUnit
    XML. noise_level_reversed misses: exit 1."""
    cmd = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    cmd += [f"--dataset={data}", f"--metric={TARGETS}", f"--junitxml={xml}", "--no-cache"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == status, done.stdout + done.stderr
    return xml


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_set(tmp_path_factory.mktemp("parts") / "set", seeds=("alpha",), runs=(0,))


@pytest.fixture(scope="module")
def whole(data: Path) -> Path:
    return run_suite(data, data.parent / "whole.xml", "banana_tests")


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_run_of_one_test_file_merged_alone_is_partial(
    data: Path, whole: Path, tmp_path: Path, workers: tuple[str, ...]
) -> None:
    """`pytest banana_tests/families/degradation/test_degradation.py` leaves the control, invariance
    and snapshot modules out without any option: alone it is partial (exit 3), never "complete"."""
    part = run_suite(data, tmp_path / "part.xml", DEGRADATION, *workers)
    ran = cases_in(part)
    assert ran and sorted(ran) == sorted(suite_property(part, PLANNED))  # every planned case ran
    assert suite_property(part, "narrowed_by") == [f"the test paths {DEGRADATION}"]
    done = report(part, "--out", tmp_path / "out")
    assert done.returncode == INCOMPLETE_EXIT, done.stderr
    partial = [line for line in done.stderr.splitlines() if line.startswith("partial")]
    assert partial == [
        f"partial: every file comes from a run narrowed by the test paths {DEGRADATION} that did not "
        f"collect {UNREACHED} test file(s) ({part}): their cases are not known"
    ], done.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert f"partial, narrowed by the test paths {DEGRADATION}: {len(ran)} of {len(ran)} cases known" in page
    assert "complete:" not in page
    assert report(part, "--out", tmp_path / "allowed", "--allow-incomplete").returncode == 0
    merged = report(whole, part, "--out", tmp_path / "merged")  # beside the whole run: complete
    assert merged.returncode == 0, merged.stderr
    assert not [line for line in merged.stderr.splitlines() if line.startswith("partial")], merged.stderr
    assert (
        f"complete: {len(cases_in(whole))} of {len(cases_in(whole))} planned cases"
        in (tmp_path / "merged" / "report.html").read_text()
    )


def test_a_run_of_one_node_id_merged_alone_is_partial(data: Path, whole: Path, tmp_path: Path) -> None:
    """A node id leaves out its module's other cases (listed) and the other modules (counted)."""
    part = run_suite(data, tmp_path / "one.xml", INVARIANCE_CASE, status=0)
    assert len(cases_in(part)) == 1
    done = report(part, "--out", tmp_path / "out")
    assert done.returncode == INCOMPLETE_EXIT, done.stderr
    left = len([case for case in cases_in(whole) if "::test_score_is_invariant[" in case]) - 1
    head = f"partial: {left} case(s) left out by the test paths {INVARIANCE_CASE} are in none of the files:"
    assert head in done.stderr.splitlines(), done.stderr
    assert "complete:" not in (tmp_path / "out" / "report.html").read_text()
