"""The invariance family (banana_tests/families/invariance) on a user's own metrics, end to end:
a metric whose score depends on the batch fails exactly its batch case; a deterministic
per-image metric passes every case on the same crops; each case's record, its cached outcome (a
changed metric is checked again) and its place in baselines and `report`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from banana_tests.cli import main
from banana_tests.families.invariance import InvarianceKey
from banana_tests.reports.merge_checks import INCOMPLETE_EXIT
from banana_tests.verdicts.baseline import dump_baseline, load_baseline
from banana_tests.verdicts.matrix import Outcome
from tests.conftest import assert_outcomes, suite_folder

METRICS = """
import numpy as np


class BatchMean:
    '''Scores each image against the batch's mean brightness: alone, every image scores 0.'''

    name = "batch_mean"
    lower_better = False
    score_range = (-50.0, 50.0)
    cost = "fast"

    def __call__(self, images):
        means = [float(np.mean(img)) for img in images]
        centre = sum(means) / len(means)
        return [m - centre for m in means]


class Brightness:
    '''Each image on its own: mean grey level, one image at a time, in float64.'''

    name = "brightness"
    lower_better = False
    score_range = (0.0, 255.0)
    cost = "fast"

    def __call__(self, images):
        return [float(np.mean(img, dtype=np.float64)) for img in images]


class Strict(Brightness):
    '''Brightness with its own shift and resize tolerance: none.'''

    name = "strict"
    invariance_points = 0.0
"""

INVARIANCE_MODULE = (
    "from banana_tests.families.invariance.test_invariance import test_score_is_invariant  # noqa: F401\n"
)


CHECKS = ("batch", "png", "repeat", "resize", "shift")


def run(pytester: pytest.Pytester, metric: str, *options: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        f"--metric=usermetrics:{metric}",
        "--junitxml=j.xml",
        "-o",
        "junit_family=xunit1",
        "-p",
        "no:randomly",
        *options,
    )


@pytest.fixture
def users(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project with the invariance module and its own metrics module."""
    suite_folder(pytester, monkeypatch, module=INVARIANCE_MODULE, seeds=("alpha",), runs=(0,), steps=(1, 5))
    pytester.makepyfile(usermetrics=METRICS)
    return pytester


def cases(pytester: pytest.Pytester) -> dict[str, tuple[bool, dict[str, str]]]:
    out = {}
    for case in ET.parse(pytester.path / "j.xml").iter("testcase"):
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        out[case.get("name", "")] = (case.find("failure") is not None, props)
    return out


def changes(pytester: pytest.Pytester) -> dict[str, tuple[str, str]]:
    """Each case's measured change and whether it came from the score cache."""
    return {name: (props["change"], props["score_cached"]) for name, (_, props) in cases(pytester).items()}


def report_with_baseline(path: Path, *extra: str) -> int:
    """`banana-tests report j.xml --out=r --write-baseline=b.json` in `path`."""
    out, baseline = f"--out={path / 'r'}", f"--write-baseline={path / 'b.json'}"
    return main(["report", str(path / "j.xml"), out, baseline, *extra])


@pytest.mark.slow
def test_a_batch_dependent_metric_fails_the_batch_case_only(users: pytest.Pytester) -> None:
    result = run(users, "BatchMean")

    assert_outcomes(result, passed=4, failed=1)
    found = cases(users)
    failed = sorted(name for name, (fails, _) in found.items() if fails)
    assert failed == ["test_score_is_invariant[batch_mean-batch]"]
    _, props = found["test_score_is_invariant[batch_mean-batch]"]
    assert props["banana_record"] == "invariance/2"
    assert (props["metric"], props["invariance"]) == ("batch_mean", "batch")
    assert float(props["change"]) > float(props["tolerance"])
    result.stdout.fnmatch_lines(["*batch_mean is not batch-invariant: the largest change*over 4 crops*"])


@pytest.mark.slow
def test_a_per_image_metric_passes_every_invariance_case(users: pytest.Pytester) -> None:
    result = run(users, "Brightness")

    assert_outcomes(result, passed=5)
    found = cases(users)
    assert sorted(found) == [f"test_score_is_invariant[brightness-{kind}]" for kind in CHECKS]
    for _, props in found.values():
        assert float(props["change"]) <= float(props["tolerance"])


@pytest.mark.slow
def test_a_metric_declares_its_own_shift_and_resize_tolerance(users: pytest.Pytester) -> None:
    """`invariance_points` replaces the default 5 points of the shift and resize checks, which
    `brightness` passes; the same-pixel checks keep theirs."""
    result = run(users, "Strict")

    assert_outcomes(result, passed=3, failed=2)
    found = cases(users)
    for check in CHECKS:
        fails, props = found[f"test_score_is_invariant[strict-{check}]"]
        assert fails is (check in ("shift", "resize"))
        assert float(props["tolerance"]) == (0.0 if fails else 1e-3)
    result.stdout.fnmatch_lines(["*strict is not shift-invariant: *not within its tolerance 0"])


@pytest.mark.slow
def test_a_cached_outcome_is_measured_again_when_the_metric_changes(users: pytest.Pytester) -> None:
    """The second run answers every check from the score cache, with the first run's figures;
    an edit of the metric's code (BatchMean now scores each image alone) is a new identity, so its
    checks run again and the batch case passes; `--no-cache` measures everything."""
    cold = run(users, "BatchMean")
    assert_outcomes(cold, passed=4, failed=1)
    first = changes(users)
    assert {cached for _, cached in first.values()} == {"false"}

    warm = run(users, "BatchMean")
    assert_outcomes(warm, passed=4, failed=1)
    assert changes(users) == {name: (change, "true") for name, (change, _) in first.items()}

    source = users.path / "usermetrics.py"
    source.write_text(source.read_text().replace("centre = sum(means) / len(means)", "centre = 0.0"))
    edited = run(users, "BatchMean")
    assert_outcomes(edited, passed=5)
    assert {cached for _, cached in changes(users).values()} == {"false"}
    assert float(changes(users)["test_score_is_invariant[batch_mean-batch]"][0]) == 0.0

    fresh = run(users, "BatchMean", "--no-cache")
    assert_outcomes(fresh, passed=5)
    assert {cached for _, cached in changes(users).values()} == {"false"}


@pytest.mark.slow
def test_a_baseline_expects_a_known_invariance_failure_and_fails_a_new_one(users: pytest.Pytester) -> None:
    """run -> report --write-baseline -> pytest --baseline, as for every other kind of case; the
    report's summary.md has the invariance table."""
    first = run(users, "BatchMean")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    path = users.path
    assert report_with_baseline(path) == 0
    assert json.loads((path / "b.json").read_text())["failures"] == [
        {"kind": "invariance", "metric": "batch_mean", "check": "batch"}
    ]
    summary = (path / "r" / "summary.md").read_text()
    assert "| metric | batch | repeat | shift | resize | png |" in summary
    assert "| batch_mean | FAIL " in summary

    known = run(users, "BatchMean", "--baseline=b.json")
    assert_outcomes(known, xfailed=1, passed=4)
    assert known.ret == pytest.ExitCode.OK

    dump_baseline([InvarianceKey("batch_mean", "shift")], path / "other.json")
    new = run(users, "BatchMean", "--baseline=other.json")
    assert_outcomes(new, failed=1, passed=3, xpassed=1)  # the listed shift case passes: XPASS
    assert new.ret == pytest.ExitCode.TESTS_FAILED
    assert load_baseline(path / "other.json") == {InvarianceKey("batch_mean", "shift")}


def test_the_invariance_table_has_a_row_per_metric_and_a_column_per_check(
    snapshot: SnapshotAssertion,
) -> None:
    from banana_tests.families.invariance.invariance_table import InvarianceOutcome, invariance_markdown

    outcomes = [
        InvarianceOutcome(InvarianceKey("piqe", "shift"), Outcome.FAILED, 7.25, 6.7),
        InvarianceOutcome(InvarianceKey("niqe", "shift"), Outcome.PASSED, 0.174, 0.3),
        InvarianceOutcome(InvarianceKey("niqe", "batch"), Outcome.PASSED, 0.0, 1e-6),
        InvarianceOutcome(
            InvarianceKey("niqe", "rotate"), Outcome.PASSED, 0.5, 1.0
        ),  # a newer version's check
        InvarianceOutcome(InvarianceKey("piqe", "batch"), Outcome.SKIPPED),
    ]
    text = invariance_markdown(outcomes)
    header, _, *rows = text.splitlines()[2:]
    assert header == "| metric | batch | shift | rotate |"  # known checks in order, then a newer one
    assert [row.split(" | ")[0] for row in rows] == ["| niqe", "| piqe"]  # one row a metric, sorted
    assert text == snapshot
    assert invariance_markdown([]) == ""


TWO_BLOCKS = """
import numpy as np

BLOCK = 96
SIGN = 1.0


class TwoBlocks:
    '''A NIQE-like score over 96 px blocks: the blocks' feature covariance (numpy.cov) is NaN for a
    single block and numpy.linalg.pinv then raises LinAlgError, as a published NIQE does.'''

    name = "two_blocks"
    lower_better = True
    score_range = (0.0, 10.0)
    cost = "fast"

    def __call__(self, images):
        out = []
        for img in images:
            grey = img.mean(-1) / 255.0
            rows, cols = (s // BLOCK for s in grey.shape)
            blocks = [grey[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK]
                      for i in range(rows) for j in range(cols)]
            feats = np.array([[b.std(), np.abs(np.diff(b, axis=1)).mean(), np.abs(np.diff(b, axis=0)).mean()]
                              for b in blocks])
            d = feats.mean(0) - 0.05
            distance = float(np.sqrt(abs(d @ np.linalg.pinv(np.cov(feats.T) + np.eye(3)) @ d)))
            out.append(SIGN * (distance + 50 * float(np.abs(np.diff(grey, axis=1)).mean())))
        return out


class Declared(TwoBlocks):
    name = "declared"
    min_side = 192


class TooLarge(TwoBlocks):
    name = "too_large"
    min_side = 300
"""


@pytest.fixture
def blocks(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project with the invariance module and a metric that needs two 96 px blocks."""
    suite_folder(pytester, monkeypatch, module=INVARIANCE_MODULE, seeds=("alpha",), runs=(0,), steps=(1, 5))
    pytester.makepyfile(blockmetric=TWO_BLOCKS)
    return pytester


@pytest.mark.slow
def test_a_metric_that_declares_its_min_side_is_checked_on_crops_that_large(blocks: pytest.Pytester) -> None:
    result = blocks.runpytest_subprocess(
        "--metric=blockmetric:Declared", "--junitxml=j.xml", "-o", "junit_family=xunit1", "-p", "no:randomly"
    )

    assert_outcomes(result, passed=5)
    for _, props in cases(blocks).values():
        assert props["crop_side"] == "192" and float(props["change"]) <= float(props["tolerance"])


@pytest.mark.slow
def test_a_min_side_no_crop_reaches_fails_each_check_in_one_line(blocks: pytest.Pytester) -> None:
    result = blocks.runpytest_subprocess("--metric=blockmetric:TooLarge", "-p", "no:randomly")

    assert_outcomes(result, missed=5)
    result.stdout.fnmatch_lines(
        ["too_large cannot be checked for batch-invariance on crops of 300 px: its min_side 300 px is "
         "larger than the seed images allow (254 px)*"]
    )  # fmt: skip


@pytest.mark.slow
def test_a_metric_that_raises_on_the_crops_gates_green_after_a_baseline_and_red_when_its_scores_change(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: a published NIQE raised LinAlgError on every 96 px crop, each a 45-line
    traceback that JUnit called a failure, the report an error and the baseline left out, so the
    gate stayed red on an unchanged metric. Now each check fails in one line, the baseline keeps
    it, the gate goes green, and a change of the metric's scores turns it red."""
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5))
    source = pytester.makepyfile(blockmetric=TWO_BLOCKS)
    path = pytester.path

    def gate(*options: str) -> pytest.RunResult:
        return pytester.runpytest_subprocess(
            "--pyargs", "banana_tests", "--metric=blockmetric:TwoBlocks", "-p", "no:randomly",
            f"--rootdir={path}", f"--cache-dir={path / 'cache'}",
            "-k", "test_score_is_invariant or test_detects_degradation", *options,
        )  # fmt: skip

    first = gate("--junitxml=j.xml")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    out = first.stdout.str()
    for check in CHECKS:
        assert f"two_blocks cannot be checked for {check}-invariance on crops of 96 px: it raised " in out
    assert "LinAlgError: SVD did not converge" in out and "raise LinAlgError" not in out  # no traceback
    assert "image files cannot be scored" in out and "crop0.png (" not in out  # each path once
    assert report_with_baseline(path) == INCOMPLETE_EXIT  # -k left the controls out: partial
    assert report_with_baseline(path, "--allow-incomplete") == 0
    listed = load_baseline(path / "b.json")
    assert {InvarianceKey("two_blocks", check) for check in CHECKS} <= listed
    assert "| two_blocks | FAIL cannot run: LinAlgError |" in (path / "r" / "summary.md").read_text()

    assert gate("--baseline=b.json").ret == pytest.ExitCode.OK  # green on the unchanged metric

    source.write_text(source.read_text().replace("SIGN = 1.0", "SIGN = -1.0"))
    changed = gate("--baseline=b.json")
    assert changed.ret == pytest.ExitCode.TESTS_FAILED  # its scores changed: the Δ cases say so
    assert changed.parseoutcomes().get("missed", 0) > 0
