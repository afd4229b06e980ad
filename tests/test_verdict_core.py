"""Exact checks of the verdict core (verdicts, matrix cells and labels), written to kill the
mutants tests/mutation.py makes: every branch, boundary and string a verdict depends on."""

from __future__ import annotations

import csv
import dataclasses
import io
import math
import statistics
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from xml.sax.saxutils import quoteattr

import pytest
from syrupy.assertion import SnapshotAssertion

from banana_tests.cases import CaseKey, CaseKind
from banana_tests.families.control import PARAMS, ControlKey
from banana_tests.families.degradation import Verdict
from banana_tests.families.trend import TrendKey, TrendTally
from banana_tests.families.trend.trends import trend_series
from banana_tests.reports.junit import (
    MAX_ATTRIBUTE,
    JUnitError,
    read_junit,
)
from banana_tests.reports.junit_testcase import legacy_record
from banana_tests.reports.sourced import OtherOutcome, Sourced
from banana_tests.trajectories.imagefolder import read_imagefolder
from banana_tests.trajectories.records import check_sha256
from banana_tests.verdicts.baseline import BaselineError, dump_baseline, load_baseline
from banana_tests.verdicts.gaps import Gap, StrictOutcome, gap, run_mean
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome, OutcomeCounts
from banana_tests.verdicts.record import CaseRecord, RecordError
from banana_tests.verdicts.verdict import VERDICT_LINE, fail_verdict
from metrics_under_test.spec import Scale
from tests.conftest import parse_matrix, write_set

KEY = CaseKey("piqe", "alpha", 5)


def test_a_verdict_message_shows_both_scores_both_normalised_scores_and_delta() -> None:
    v = Verdict(KEY, 1, Gap(20.0, 10.0, 80.0, 90.0, 3))
    assert v.message() == (
        "piqe did not detect the degradation of alpha at step 5: Δ5 = +10.000 ≥ 0 (the mean of 3 run(s)); "
        "step   1: raw 20.0000 → normalised 80.00, step   5: raw 10.0000 → normalised 90.00"
    )
    assert v.summary() == "Δ5 = +10.000 ≥ 0"
    per_run = Verdict(CaseKey("piqe", "alpha", 5, run=2), 1, Gap(20.0, 10.0, 80.0, 90.0, 1))
    assert "(run 2)" in per_run.message()
    assert Verdict(CaseKey("piqe", "alpha", 5, run=0), 1, Gap(1, 1, 1, 1, 1)).message().count("(run 0)") == 1


def test_verdict_properties_keep_every_digit() -> None:
    v = Verdict(KEY, 1, Gap(0.1, 0.2, 1 / 3, 2 / 3, 2))
    assert v.properties() == {
        "delta": repr(2 / 3 - 1 / 3),
        "score_reference": "0.1",
        "score_step": "0.2",
        "norm_reference": repr(1 / 3),
        "norm_step": repr(2 / 3),
        "runs": "2",
    }


@pytest.mark.parametrize(("norm_step", "detected"), [(49.0, True), (50.0, False), (51.0, False)])
def test_detected_only_below_the_reference(norm_step: float, detected: bool) -> None:
    g = Gap(1.0, 2.0, 50.0, norm_step, 1)
    assert g.delta == norm_step - 50.0
    assert g.detected is detected
    assert Verdict(KEY, 1, g).detected is detected


def test_normalise_exactly() -> None:
    assert Scale(10.0, 30.0, False).normalise(15.0) == 25.0
    assert Scale(10.0, 30.0, True).normalise(15.0) == 75.0
    assert Scale(10.0, 30.0, True).normalise(40.0) == -50.0  # not clipped
    assert Scale(10.0, 30.0, False).flipped() == Scale(10.0, 30.0, True)


@pytest.mark.parametrize(("low", "high"), [(1.0, 1.0), (2.0, 1.0), (math.nan, 1.0), (0.0, math.inf)])
def test_a_scale_needs_a_finite_range_with_high_above_low(low: float, high: float) -> None:
    with pytest.raises(ValueError, match=r"typical range must be finite with high > low"):
        Scale(low, high, True)


def test_gap_averages_raw_scores_then_normalises() -> None:
    g = gap(Scale(0.0, 100.0, True), [10.0, 30.0], [40.0, 60.0])
    assert g == Gap(20.0, 50.0, 80.0, 50.0, 2, (90.0, 70.0), (60.0, 40.0))  # and each run's own
    assert g.run_deltas == (-30.0, -30.0)
    assert g.delta == -30.0 and g.detected
    assert run_mean([1.0, 2.0, 6.0]) == 3.0
    with pytest.raises(ValueError, match="no scores to average"):
        run_mean([])
    with pytest.raises(ValueError, match="reference has 1 runs but step has 2"):
        gap(Scale(0.0, 1.0, True), [1.0], [1.0, 2.0])


def test_a_cell_from_a_record_reads_every_field() -> None:
    props = {
        "metric": "piqe",
        "seed_image": "alpha",
        "step": "5",
        "delta": "-1.5",
        "score_reference": "2.5",
        "score_step": "4",
        "reference_step": "1",
        "runs": "3",
    }
    record = CaseRecord.of(CaseKind.DELTA, props)
    assert record.cell(Outcome.PASSED, "msg") == Cell(KEY, Outcome.PASSED, -1.5, 2.5, 4.0, 1, 3, "msg")
    bare = CaseRecord.of(CaseKind.DELTA, {"metric": "piqe", "seed_image": "alpha", "step": "5", "delta": ""})
    assert bare.cell(Outcome.SKIPPED) == Cell(KEY, Outcome.SKIPPED)
    with pytest.raises(TypeError, match="a cell's outcome is an Outcome, not 'failed'"):
        record.cell("failed")  # type: ignore[arg-type]  # a string, as the matrix took them before


@pytest.mark.parametrize(
    ("outcome", "delta", "verdict"),
    [
        (Outcome.ERROR, None, Outcome.ERROR),
        (Outcome.SKIPPED, None, Outcome.SKIPPED),
        (Outcome.FAILED, -0.5, Outcome.PASSED),  # e.g. xfail under a baseline: the Δ decides
        (Outcome.PASSED, 0.0, Outcome.FAILED),  # Δ = 0 is a miss
        (Outcome.PASSED, 0.5, Outcome.FAILED),
        (Outcome.FAILED, math.nan, Outcome.FAILED),  # a nan Δ never passes
    ],
)
def test_as_verdict_follows_the_delta(outcome: Outcome, delta: float | None, verdict: Outcome) -> None:
    assert Cell(KEY, outcome, delta).as_verdict().outcome is verdict


@pytest.mark.parametrize(
    ("counts", "label"),
    [
        (OutcomeCounts(), ""),
        (OutcomeCounts(Counter({Outcome.PASSED: 2, Outcome.FAILED: 1})), "1/3"),
        (OutcomeCounts(Counter({Outcome.PASSED: 3})), "0/3"),
        (OutcomeCounts(Counter({Outcome.FAILED: 1, Outcome.SKIPPED: 4})), "1/1"),
        (OutcomeCounts(Counter({Outcome.SKIPPED: 2})), "s"),
        (OutcomeCounts(Counter({Outcome.ERROR: 2})), "E2"),
        (OutcomeCounts(Counter({Outcome.SKIPPED: 1, Outcome.ERROR: 1})), "s E1"),
        (OutcomeCounts(Counter({Outcome.PASSED: 1, Outcome.FAILED: 2, Outcome.ERROR: 3})), "2/3 E3"),
        (OutcomeCounts(Counter({Outcome.FAILED: 1, Outcome.UNRESOLVED: 2})), "1/1 U2"),
        (OutcomeCounts(Counter({Outcome.INVALID: 3, Outcome.ERROR: 1})), "I3 E1"),
        (OutcomeCounts(Counter({Outcome.PASSED: 1, Outcome.UNRESOLVED: 1, Outcome.INVALID: 1})), "0/1 U1 I1"),
    ],
)
def test_outcome_labels(counts: OutcomeCounts, label: str) -> None:
    assert counts.label() == label


def test_outcome_counts_add() -> None:
    c = OutcomeCounts()
    for outcome in ("passed", "failed", "failed", "skipped", "error", "error", "error"):
        c.add(Outcome(outcome))
    assert c == OutcomeCounts(
        Counter({Outcome.PASSED: 1, Outcome.FAILED: 2, Outcome.SKIPPED: 1, Outcome.ERROR: 3})
    )


def small_matrix() -> Matrix:
    cells = [
        Cell(CaseKey("piqe", "beta", 20), Outcome.FAILED, 1.0),
        Cell(CaseKey("piqe", "alpha", 5), Outcome.PASSED, -1.0),
        Cell(CaseKey("piqe", "alpha", 10), Outcome.FAILED, 2.0),
        Cell(CaseKey("brisque", "alpha", 5), Outcome.ERROR),
        Cell(CaseKey("brisque", "beta", 5), Outcome.SKIPPED),
        Cell(CaseKey("a_much_longer_metric_name", "a_long_seed_image_name", 5), Outcome.PASSED, -1.0),
    ]
    return Matrix.of(cells)


def test_a_matrix_lists_its_metrics_seed_images_and_steps_sorted() -> None:
    m = small_matrix()
    assert m.metrics == ["a_much_longer_metric_name", "brisque", "piqe"]
    assert m.seed_images == ["a_long_seed_image_name", "alpha", "beta"]
    assert m.steps == [5, 10, 20]
    assert m.counts("piqe", "alpha") == OutcomeCounts(Counter({Outcome.PASSED: 1, Outcome.FAILED: 1}))
    assert m.counts("piqe") == OutcomeCounts(Counter({Outcome.PASSED: 1, Outcome.FAILED: 2}))
    assert m.counts("brisque") == OutcomeCounts(Counter({Outcome.SKIPPED: 1, Outcome.ERROR: 1}))
    assert m.counts("piqe", "gamma") == OutcomeCounts()


def test_a_later_cell_replaces_the_earlier_and_is_returned() -> None:
    m = Matrix()
    first, second = Cell(KEY, Outcome.PASSED, -1.0), Cell(KEY, Outcome.FAILED, 1.0)
    assert m.add(first) is None
    assert m.add(second) is first
    assert m.cells == {KEY: second}
    assert Matrix.of([first, second]).cells == {KEY: second}


def test_render_gives_every_label_in_its_column() -> None:
    m = small_matrix()
    lines = m.render()
    cells = parse_matrix("\n".join(["== banana-tests failure matrix ==", *lines]))
    assert cells == {
        ("a_long_seed_image_name", "a_much_longer_metric_name"): "0/1",
        ("a_long_seed_image_name", "brisque"): "",
        ("a_long_seed_image_name", "piqe"): "",
        ("alpha", "a_much_longer_metric_name"): "",
        ("alpha", "brisque"): "E1",
        ("alpha", "piqe"): "1/2",
        ("beta", "a_much_longer_metric_name"): "",
        ("beta", "brisque"): "s",
        ("beta", "piqe"): "1/1",
        ("total", "a_much_longer_metric_name"): "0/1",
        ("total", "brisque"): "s E1",
        ("total", "piqe"): "2/3",
    }
    widths = {len(line) for line in lines if line.strip()}
    assert len(widths) == 1  # aligned columns
    assert lines[1].startswith("a_long_seed_image_name ")
    assert Matrix().render() == []


def test_render_pads_short_names_to_the_minimum_widths(snapshot: SnapshotAssertion) -> None:
    lines = Matrix.of([Cell(CaseKey("m", "s", 5), Outcome.FAILED, 1.0)]).render()
    assert {len(line) for line in lines} == {10 + 1 + 7}  # labels 10 wide, a column 7 wide
    assert lines == snapshot


# ---- baselines: control ids, entry order, the written text, refused files ----


def test_a_control_id_splits_at_the_last_dash() -> None:
    record = legacy_record("test_detects_control_degradation[wadiqam-nr-gaussian_noise]", {})
    assert record is not None and record.key == ControlKey("wadiqam-nr", "gaussian_noise")
    assert record.key.test_id == "wadiqam-nr-gaussian_noise"
    assert PARAMS == ("control_metric", "distortion")


@pytest.mark.parametrize("bad", ["jpeg", "-jpeg", "piqe-", ""])
def test_a_control_id_needs_a_metric_and_a_distortion(bad: str) -> None:
    with pytest.raises(RecordError, match="not a control case id"):
        legacy_record(f"test_detects_control_degradation[{bad}]", {})


def test_keys_are_frozen_values() -> None:
    for value, field in (
        (ControlKey("piqe", "jpeg"), "metric"),
        (Scale(0.0, 1.0, True), "low"),
        (Gap(1.0, 2.0, 3.0, 4.0, 1), "runs"),
        (Verdict(KEY, 1, Gap(1.0, 2.0, 3.0, 4.0, 1)), "reference_step"),
        (Cell(KEY, Outcome.PASSED), "outcome"),
    ):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)
    assert ControlKey("a", "b") < ControlKey("a", "c") < ControlKey("b", "a")  # order=True


def test_a_written_baseline_is_sorted_text_one_entry_a_line(tmp_path: Path) -> None:
    keys = [
        ControlKey("piqe", "jpeg"),
        TrendKey("piqe", "zeta"),  # sorts after the controls by name: trends still come first
        CaseKey("piqe", "beta", 5, run=1),
        CaseKey("piqe", "beta", 5),
        CaseKey("piqe", "alpha", 20),
        CaseKey("piqe", "alpha", 5),
        ControlKey("brisque", "gaussian_blur"),
        ControlKey("piqe", "gaussian_blur"),
        TrendKey("piqe", "alpha"),
        CaseKey("piqe", "beta", 5, run=0),
    ]
    path = tmp_path / "b.json"
    dump_baseline(keys, path)
    assert path.read_text() == (
        "{\n"
        '  "format": "banana-tests-baseline/2",\n'
        '  "failures": [\n'
        '    {"kind": "control", "metric": "brisque", "distortion": "gaussian_blur"},\n'
        '    {"metric": "piqe", "seed_image": "alpha", "step": 5},\n'
        '    {"metric": "piqe", "seed_image": "alpha", "step": 20},\n'
        '    {"metric": "piqe", "seed_image": "beta", "step": 5},\n'
        '    {"metric": "piqe", "seed_image": "beta", "step": 5, "run": 0},\n'
        '    {"metric": "piqe", "seed_image": "beta", "step": 5, "run": 1},\n'
        '    {"kind": "trend", "metric": "piqe", "seed_image": "alpha"},\n'
        '    {"kind": "trend", "metric": "piqe", "seed_image": "zeta"},\n'
        '    {"kind": "control", "metric": "piqe", "distortion": "gaussian_blur"},\n'
        '    {"kind": "control", "metric": "piqe", "distortion": "jpeg"}\n'
        "  ]\n"
        "}\n"
    )
    assert load_baseline(path) == frozenset(keys)
    dump_baseline([], path)
    assert path.read_text() == '{\n  "format": "banana-tests-baseline/2",\n  "failures": []\n}\n'
    assert load_baseline(path) == frozenset()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '{"format": "banana-tests-baseline/2", "failures": {}}',
            "'failures' is not a list; a baseline holds",
        ),
        (
            '{"format": "banana-tests-baseline/2", "x": 1, "y": 2}',
            "unknown key(s) 'x', 'y'; a baseline holds only ['failures', 'format']",
        ),
        (
            '{"format": "banana-tests-baseline/2", "failures": '
            '[{"metric": "m", "seed_image": "s", "step": 5, "a": 1, "b": 2}]}',
            "unknown key(s) 'a', 'b'",
        ),
        ('{"format": "banana-tests-baseline/3", "failures": []}', "not a banana-tests-baseline/2 file"),
        ("[]", "not a banana-tests-baseline/2 file"),
    ],
)
def test_a_refused_baseline_says_what_is_wrong(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(body)
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


# ---- how a verdict fails: a traceback only when asked for ----


@pytest.mark.parametrize(
    ("tbstyle", "fulltrace", "traceback"),
    [("auto", False, False), ("long", False, True), ("short", True, True), ("long", True, True)],
)
def test_a_verdict_fails_with_a_traceback_only_under_tb_long_or_fulltrace(
    tbstyle: str, fulltrace: bool, traceback: bool
) -> None:
    """Through pytest's public `pytest.fail`: no private pytest class is subclassed."""
    config = SimpleNamespace(option=SimpleNamespace(tbstyle=tbstyle, fulltrace=fulltrace))
    with pytest.raises(pytest.fail.Exception) as caught:
        fail_verdict("the message", "Δ5 = +1.000 ≥ 0", config)  # type: ignore[arg-type]
    assert type(caught.value) is pytest.fail.Exception
    assert caught.value.pytrace is traceback
    if traceback:  # a normal failure, with the whole line as its text
        assert (str(caught.value), getattr(caught.value, "__notes__", [])) == ("the message", [])
    else:  # the figure and the line as its text (JUnit's failure text holds both)
        assert str(caught.value) == "Δ5 = +1.000 ≥ 0\nthe message"
        assert getattr(caught.value, "__notes__", []) == []
    assert getattr(caught.value, VERDICT_LINE) == "the message"  # a miss under every --tb


# ---- the matrix legend, folding, row cap and trend summary ----


def test_the_legend_says_what_a_cell_counts() -> None:
    per_step = Matrix.of(
        [Cell(KEY, Outcome.FAILED, 1.0), Cell(CaseKey("piqe", "alpha", 10), Outcome.PASSED, -1.0)]
    )
    assert per_step.legend() == [
        "cell: failing cases (Δ ≥ 0, missed) / cases with a verdict, over 2 step(s) of one seed image",
        "normalised scores are higher-is-better, so Δ < 0 is detected; s = all skipped;",
        "E<n> = cases with errors, shown beside the failures",
    ]
    per_run = Matrix.of([Cell(CaseKey("piqe", "alpha", 5, run=r), Outcome.PASSED, -1.0) for r in (0, 1, 2)])
    assert per_run.legend()[0].endswith("over 3 run(s) × 1 step(s) of one seed image")


def capped() -> Matrix:
    """Four seed images; s3 misses on every metric, the others on one each."""
    metrics = ("metric_aa", "metric_bb", "metric_cc")
    cells = [
        Cell(
            CaseKey(m, s, 5),
            Outcome.FAILED if s == "s3" or (s, m) in {("s0", "metric_aa")} else Outcome.PASSED,
            0.0,
        )
        for s in ("s0", "s1", "s2", "s3")
        for m in metrics
    ]
    return Matrix.of(cells)


def test_wide_matrices_fold_and_long_ones_show_the_worst_rows() -> None:
    assert capped().render(width=32, max_rows=3) == [
        "           metric_aa metric_bb",
        "s0               1/1       0/1",
        "s3               1/1       1/1",
        "total            2/4       1/4",
        "",
        "           metric_cc",
        "s0               0/1",
        "s3               1/1",
        "total            1/4",
        "… 2 more seed images (0 with failures): in the totals and the report",
    ]
    whole = capped().render(width=100, max_rows=4)  # exactly max_rows: nothing hidden, one block
    assert [line.split()[0] for line in whole[1:]] == ["s0", "s1", "s2", "s3", "total"]
    assert whole[0] == "           metric_aa metric_bb metric_cc"


def test_the_trend_summary_line_per_metric(snapshot: SnapshotAssertion) -> None:
    t = TrendTally()
    for metric, outcome, spearman, first in (
        ("piqe", "passed", -0.5, 5),
        ("piqe", "failed", 0.25, None),
        ("piqe", "passed", -1.0, 10),
        ("piqe", "skipped", None, None),
        ("piqe", "error", None, None),
        ("ab", "error", None, None),
        ("niqe", "failed", None, None),
        ("nima", "passed", -0.75, 20),
    ):
        t.add(metric, Outcome(outcome), spearman, first)
    lines = t.lines()
    assert [line.split()[0] for line in lines] == ["ab", "nima", "niqe", "piqe"]
    # piqe: 2 of its 3 verdicts fall, the skipped and error cases counted apart
    assert "on 2/3 seed images" in lines[3] and lines[3].endswith("(1 skipped, 1 errors)")
    assert lines == snapshot
    assert TrendTally().lines() == []


# ---- trajectories: what a torn line still shows, and the sha256 check's value ----


def test_a_torn_line_keeps_the_identity_its_text_shows_whole(tmp_path: Path) -> None:
    root = write_set(tmp_path / "data", seeds=("alpha",), runs=(0,), steps=(1, 5))
    meta = root / "metadata.jsonl"
    torn = '{"file_name": "x.png", "seed_image": "alpha", "variant": "mirror", "run": 3, "step": 7, "sha'
    meta.write_text(meta.read_text() + torn + "\n")
    [problem] = read_imagefolder(root).problems
    assert (problem.seed_image, problem.variant, problem.run, problem.step) == ("alpha", "mirror", 3, 7)
    assert problem.where.endswith("metadata.jsonl:3")


def test_a_good_sha256_is_returned_as_given() -> None:
    digest = "Ab" * 32
    assert check_sha256(digest) == digest
    assert check_sha256(None) is None


def test_the_default_data_set_is_the_shipped_embedded_set() -> None:
    from banana_tests.data import EMBEDDED

    from banana_tests.core.settings import settings_from_args

    assert (EMBEDDED / "metadata.jsonl").is_file()
    assert settings_from_args([]).embedded
    assert not settings_from_args([f"--dataset={EMBEDDED.parent}"]).embedded


# ---- reading JUnit XML back ----


def control_xml(path: Path, message: str) -> Path:
    from tests.test_junit import case, junit

    child = f"<failure message={quoteattr(message)} />"
    return junit(path, case("piqe", "-", 0, child, name="test_detects_control_degradation[piqe-jpeg]"))


@pytest.mark.parametrize(
    ("message", "outcome"),
    [
        ("Failed: normalised 1.00 ≥ 0.50", "failed"),
        ("VerdictFailure: piqe scored ...", "failed"),
        ("banana_tests.verdicts.verdict.VerdictFailure: piqe scored ...", "failed"),
        ("AssertionError: assert ...", "failed"),
        ("RuntimeError: the metric broke", "error"),  # a failure that is no verdict
    ],
)
def test_only_a_verdicts_failure_is_a_failed_control(tmp_path: Path, message: str, outcome: str) -> None:
    reading = read_junit([control_xml(tmp_path / "j.xml", message)])
    assert reading.others == {ControlKey("piqe", "jpeg"): outcome}


def test_case_properties_are_not_run_metadata(tmp_path: Path) -> None:
    """In a file of schema 1 the run's facts were case properties; nothing else on a case is."""
    from tests.test_junit import case, junit

    props = {"run": "0", "score_reference": "1.0", "score_step": "2.0", "delta": "1.0", "editor": "emulate"}
    props |= {"norm_reference": "1", "norm_step": "2", "runs": "1", "score_cached": "false"}
    xml = junit(tmp_path / "j.xml", case("piqe", "alpha", 5, "<failure message='AssertionError' />", **props))
    metadata = read_junit([xml]).metadata
    assert metadata == {"date": ["2026-01-01 10:00:00+00:00"], "variant": ["replicate"]}


def test_the_input_caps_are_inclusive(tmp_path: Path) -> None:
    from tests.test_junit import case, junit

    xml = junit(tmp_path / "j.xml", case("piqe", "alpha", 5, delta="-1.0", message="x" * 10))
    size = xml.stat().st_size
    assert read_junit([xml], max_mb=size / 2**20).matrix.cells  # exactly at the cap: read
    with pytest.raises(JUnitError, match="over the"):
        read_junit([xml], max_mb=(size - 1) / 2**20)
    at_cap = junit(tmp_path / "cap.xml", case("piqe", "alpha", 5, delta="-1.0", note="y" * MAX_ATTRIBUTE))
    assert read_junit([at_cap]).matrix.cells
    over = junit(
        tmp_path / "over.xml", case("piqe", "alpha", 5, delta="-1.0", note="y" * (MAX_ATTRIBUTE + 1))
    )
    with pytest.raises(JUnitError, match="over the 1,048,576 the suite ever writes"):
        read_junit([over])


def test_a_file_without_a_timestamp_is_older_than_one_with(tmp_path: Path) -> None:
    from tests.test_junit import case, junit

    stamped = junit(tmp_path / "a.xml", case("piqe", "alpha", 5, delta="-1.0"))
    bare = junit(
        tmp_path / "b.xml",
        case("piqe", "alpha", 5, "<failure message='AssertionError' />", delta="1.0"),
        timestamp=None,
    )
    for order in ([stamped, bare], [bare, stamped]):
        assert read_junit(order).matrix.cells[KEY].outcome == "passed"


def test_read_records_are_frozen(tmp_path: Path) -> None:
    from tests.test_junit import case, junit

    xml = junit(tmp_path / "a.xml", case("piqe", "alpha", 5, delta="-1.0"))
    copy = tmp_path / "b.xml"
    copy.write_bytes(xml.read_bytes())
    reading = read_junit([xml, copy])
    [replacement] = reading.replaced
    other = Sourced(OtherOutcome(ControlKey("piqe", "jpeg"), Outcome.FAILED), xml, datetime.now(UTC), (0, 0))
    for value in (replacement, replacement.kept, replacement.dropped, other, other.value):
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.__setattr__(dataclasses.fields(value)[0].name, None)


def test_an_error_cell_reads_from_a_record() -> None:
    props = {"metric": "piqe", "seed_image": "alpha", "step": "5"}
    assert CaseRecord.of(CaseKind.DELTA, props).cell(Outcome.ERROR).outcome == Outcome.ERROR


def test_a_legend_over_mixed_cases_counts_only_real_runs() -> None:
    mixed = Matrix.of([Cell(CaseKey("piqe", "alpha", 5, run=r), Outcome.PASSED, -1.0) for r in (None, 0, 1)])
    assert mixed.legend()[0].endswith("over 2 run(s) × 1 step(s) of one seed image")


def test_render_defaults_fold_at_100_columns_and_cap_at_40_rows() -> None:
    """Seven 12-character metric names: six fit in 100 columns (first column 10), the seventh folds."""
    names = [f"metric_{i:05d}" for i in range(7)]
    lines = Matrix.of([Cell(CaseKey(m, "s", 5), Outcome.PASSED, -1.0) for m in names]).render()
    assert lines.count("") == 1 and len(lines[0]) == 10 + 6 * 13

    def seeds(n: int) -> Matrix:
        return Matrix.of([Cell(CaseKey("piqe", f"s{i:02d}", 5), Outcome.PASSED, -1.0) for i in range(n)])

    assert not seeds(40).render()[-1].startswith("…")
    assert seeds(41).render()[-1] == "… 2 more seed images (0 with failures): in the totals and the report"


@pytest.mark.parametrize("width", [5, 28])
def test_a_narrow_render_puts_one_metric_in_each_block(width: int) -> None:
    lines = capped().render(width=width, max_rows=10)
    headers = [line.strip() for i, line in enumerate(lines) if i == 0 or lines[i - 1] == ""]
    assert headers == ["metric_aa", "metric_bb", "metric_cc"]


def test_what_a_junit_file_counts_as_a_case(tmp_path: Path) -> None:
    from tests.test_junit import case, junit

    series = "[[1,60.0,59.0,61.0],[5,50.0,49.0,51.0]]"
    xml = junit(
        tmp_path / "j.xml",
        # schema 1: on `banana_case` under another name, the properties it always recorded suffice
        case("piqe", "alpha", 5, delta="-1.0", reference_step="1", name="renamed_by_ci"),
        case("piqe", "delta", 5, delta="-1.0", name="test_other"),  # no reference_step: another test
        case("piqe", "beta", 5, delta="-1.0", kind="snapshot"),  # another kind: not a Δ case
        case("piqe", "gamma", 0, name="t", kind="trend", reference_step="1", trend_series=series),
    )
    reading = read_junit([xml])
    assert list(reading.matrix.cells) == [KEY]
    assert [(t.metric, t.seed_image, t.rows) for t in trend_series(reading.family_cases[CaseKind.TREND])] == [
        ("piqe", "gamma", ((1, 60.0, 59.0, 61.0), (5, 50.0, 49.0, 51.0)))
    ]
    assert reading.others == {TrendKey("piqe", "gamma"): "passed"}
    with pytest.raises(JUnitError, match="no JUnit XML files given"):
        read_junit([])


def test_suite_properties_are_run_metadata_and_unstamped_files_say_so(tmp_path: Path) -> None:
    from tests.test_junit import case

    body = '<testsuite name="pytest"><properties><property name="host" value="ci-1"/></properties>'
    body += case("piqe", "alpha", 5, delta="-1.0") + "</testsuite>"
    xml, copy = tmp_path / "j.xml", tmp_path / "copy.xml"
    xml.write_text(f"<testsuites>{body}</testsuites>")
    copy.write_text(f"<testsuites>{body}</testsuites>")
    reading = read_junit([xml, copy])
    assert reading.metadata["host"] == ["ci-1"]
    assert f"{xml} (no timestamp)" in reading.replaced[0].describe()


def test_an_oversized_file_is_named_with_its_size(tmp_path: Path) -> None:
    xml = tmp_path / "big.xml"
    xml.write_bytes(b" " * (3 * 2**20 + 2**19))
    with pytest.raises(JUnitError, match=r"big\.xml: 3\.5 MiB is over the 2 MiB limit"):
        read_junit([xml], max_mb=2)


def test_verdict_records_each_runs_scores_and_the_strict_verdict() -> None:
    g = gap(Scale(0.0, 100.0, False), [10.0, 10.0, 10.0], [8.0, 11.0, 9.0])  # Δs -2, +1, -1
    props = Verdict(KEY, 1, g).properties()
    assert (props["run_norm_references"], props["run_norm_steps"]) == ("10 10 10", "8 11 9")
    assert g.run_deltas == (-2.0, 1.0, -1.0) and g.spread.interval == (-2.0, 1.0)
    assert g.spread.stdev == statistics.stdev([-2.0, 1.0, -1.0])
    assert "strict" not in props and Verdict(KEY, 1, g).detected  # the run mean, -2/3, decides
    strict = Verdict(KEY, 1, g, strict=True)
    assert (strict.detected, strict.unresolved, strict.properties()["strict"]) == (True, True, "unresolved")


def test_a_strict_verdict_says_each_runs_delta_and_their_range() -> None:
    """--banana-strict-runs: the summary, the one line and an unresolved cell's skip reason carry
    every run's Δ and the range they span; the mean's line names the runs it averaged."""
    missed = Verdict(KEY, 1, gap(Scale(0.0, 100.0, False), [10.0] * 3, [12.0, 11.0, 13.0]), strict=True)
    runs = "runs Δ +2.00, +1.00, +3.00 in [+1.00, +3.00]"
    assert missed.runs_text() == runs and not missed.detected
    assert missed.summary() == f"Δ5 ≥ 0 in every run ({runs})"
    assert f"Δ5 = +2.000 ≥ 0 (the mean of 3 run(s); {runs}); " in missed.message()
    mean = Verdict(KEY, 1, gap(Scale(0.0, 100.0, False), [10.0] * 3, [12.0, 11.0, 13.0]))
    assert "(the mean of 3 run(s)); " in mean.message() and "runs Δ" not in mean.message()
    split = Verdict(KEY, 1, gap(Scale(0.0, 100.0, False), [10.0] * 3, [8.0, 11.0, 9.0]), strict=True)
    reason = split.unresolved_reason()
    assert reason.startswith("unresolved: piqe on alpha at step 5") and split.unresolved
    assert "runs Δ -2.00, +1.00, -1.00 in [-2.00, +1.00]" in reason


def test_a_cells_strict_verdict_is_typed() -> None:
    assert Cell(KEY, Outcome.PASSED, -1.0, strict=StrictOutcome.UNRESOLVED).strict is StrictOutcome.UNRESOLVED
    with pytest.raises(TypeError, match="a cell's strict verdict is a StrictOutcome, not 'unresolved'"):
        Cell(KEY, Outcome.PASSED, -1.0, strict="unresolved")  # type: ignore[arg-type]


def test_strict_and_unchanged_records_reach_matrix_csv_as_their_outcomes() -> None:
    """A JUnit record's `strict` figure in the words docs/reports.md lists, and an unchanged
    step's PSNR, become the outcomes matrix.csv's readers filter on."""
    from banana_tests.reports.tables import matrix_csv

    def record(seed: str, **figures: str) -> Cell:
        props = {"metric": "piqe", "seed_image": seed, "step": "5", "delta": "-0.5", **figures}
        return CaseRecord.of(CaseKind.DELTA, props).cell(Outcome.PASSED).as_verdict()

    matrix = Matrix.of(
        [
            record("a", strict="detected"),
            record("b", strict="missed"),  # its run mean, -0.5, would pass
            record("c", strict="unresolved"),
            record("d", psnr="inf inf"),  # no run's step changed
        ]
    )
    rows = csv.DictReader(io.StringIO(matrix_csv(matrix)))
    assert {r["seed_image"]: r["outcome"] for r in rows} == {
        "a": "passed",
        "b": "failed",
        "c": "unresolved",
        "d": "invalid",
    }
