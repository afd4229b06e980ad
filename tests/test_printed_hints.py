"""Every hint the suite prints runs as printed (issue 40, item 6): on 3466396 the default metrics
without their files said "was named with --metric" (they were not) and suggested
`--weights-dir DIR`, which the suite itself refuses ("write path options with '='")."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import suite_folder, unavailable, weights_mirror

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

MIRROR = weights_mirror()  # read before suite_folder clears $BANANA_WEIGHTS_DIR


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5))


def test_the_default_metrics_without_their_files_print_hints_that_run(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess("--dataset=data", "--steps=5")  # no --metric: brisque, niqe, piqe

    assert result.parseoutcomes()["errors"] == 4  # piqe has its verdicts
    output = result.stdout.str()
    assert "named with --metric" not in output
    errors = [line for line in result.stdout.lines if " is on trial but cannot load: " in line]
    assert {line.split()[0] for line in errors} == {"brisque", "niqe"} and len(errors) == 4
    hints = {hint for line in errors for hint in re.findall(r"--[\w-]+=[\w./-]+", line)}
    assert hints == {"--weights-dir=FOLDER", "--metric=offline"}, errors

    chosen = suite.runpytest_subprocess("--dataset=data", "--steps=5", "--metric=offline")  # as printed
    assert not {"errors", "error"} & chosen.parseoutcomes().keys(), chosen.stdout.str()[-2000:]
    assert "brisque" not in chosen.stdout.str()

    if MIRROR is None:
        unavailable("no pyiqa weights mirror")
    given = suite.runpytest_subprocess(
        "--dataset=data", "--steps=5", "--weights-dir=FOLDER".replace("FOLDER", str(MIRROR))
    )
    outcomes = given.parseoutcomes()
    assert not {"errors", "error"} & outcomes.keys() and outcomes.get("passed"), given.stdout.str()[-2000:]


SNAPSHOT_MODULE = (
    "from banana_tests.families.snapshot.test_snapshots import "
    "pytest_generate_tests, test_scores_match_snapshot"
    "  # noqa: F401\n"
)


def test_the_snapshot_hint_of_an_artifact_run_records_that_runs_snapshot(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 50: on a fresh project `--artifact=...` ended its snapshot case with a hint that
    left `--artifact` out; run as printed it recorded the embedded set's snapshot and the
    artifact run failed again."""
    suite = suite_folder(pytester, monkeypatch, SNAPSHOT_MODULE, seeds=("alpha",), runs=(0,), steps=(1, 5))
    monkeypatch.setenv("BANANA_CACHE_DIR", str(suite.path / "images"))  # the trial sets are built here
    args = ("--banana-artifact=static", "--metric=laplacian_variance", "--no-cache")

    fresh = suite.runpytest_subprocess(*args)
    fresh.assert_outcomes(skipped=1)  # nothing recorded yet: nothing to compare
    (hint,) = {
        line.split("record one with ", 1)[1] for line in fresh.stdout.lines if "record one with " in line
    }
    printed = shlex.split(hint)
    assert printed[0] == "pytest" and "--banana-artifact=static" in printed, hint

    suite.runpytest_subprocess(*printed[1:]).assert_outcomes(passed=1)  # as printed
    recorded = list((suite.path / "__snapshots__").rglob("*laplacian_variance*.json"))
    assert len(recorded) == 1 and "static" in str(recorded[0].relative_to(suite.path)), recorded
    suite.runpytest_subprocess(*args).assert_outcomes(passed=1)  # the hint did what it said
