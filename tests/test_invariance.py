"""The invariance family (banana_tests/test_invariance.py) on a user's own metrics, end to end:
a metric whose score depends on the batch fails exactly its batch case; a deterministic
per-image metric passes every case on the same crops; each case's record, its cached outcome (a
changed metric is checked again) and its place in baselines and `report`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from banana_tests.cli import main
from banana_tests.verdicts.baseline import dump_baseline, load_baseline
from banana_tests.verdicts.invariance import InvarianceKey
from banana_tests.verdicts.outcome import Outcome
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

INVARIANCE_MODULE = "from banana_tests.test_invariance import test_score_is_invariant  # noqa: F401\n"


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


def test_a_per_image_metric_passes_every_invariance_case(users: pytest.Pytester) -> None:
    result = run(users, "Brightness")

    assert_outcomes(result, passed=5)
    found = cases(users)
    assert sorted(found) == [f"test_score_is_invariant[brightness-{kind}]" for kind in CHECKS]
    for _, props in found.values():
        assert float(props["change"]) <= float(props["tolerance"])


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


def test_a_baseline_expects_a_known_invariance_failure_and_fails_a_new_one(users: pytest.Pytester) -> None:
    """run -> report --write-baseline -> pytest --baseline, as for every other kind of case; the
    report's summary.md has the invariance table."""
    first = run(users, "BatchMean")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    path = users.path
    assert (
        main(
            [
                "report",
                str(path / "j.xml"),
                "--out",
                str(path / "r"),
                "--write-baseline",
                str(path / "b.json"),
            ]
        )
        == 0
    )
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


def test_the_invariance_table_has_a_row_per_metric_and_a_column_per_check() -> None:
    from banana_tests.reports.invariance_table import InvarianceOutcome, invariance_markdown

    outcomes = [
        InvarianceOutcome(InvarianceKey("piqe", "shift"), Outcome.FAILED, 7.25, 6.7),
        InvarianceOutcome(InvarianceKey("niqe", "shift"), Outcome.PASSED, 0.174, 0.3),
        InvarianceOutcome(InvarianceKey("niqe", "batch"), Outcome.PASSED, 0.0, 1e-6),
        InvarianceOutcome(
            InvarianceKey("niqe", "rotate"), Outcome.PASSED, 0.5, 1.0
        ),  # a newer version's check
        InvarianceOutcome(InvarianceKey("piqe", "batch"), Outcome.SKIPPED),
    ]
    assert invariance_markdown(outcomes).splitlines()[2:] == [
        "| metric | batch | shift | rotate |",
        "|---|---|---|---|",
        "| niqe | pass 0 ≤ 1e-06 | pass 0.174 ≤ 0.3 | pass 0.5 ≤ 1 |",
        "| piqe | skipped | FAIL 7.25 > 6.7 | - |",
    ]
    assert invariance_markdown([]) == ""
