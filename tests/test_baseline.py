"""Failure baselines: the file format, the paper's baseline, and gating a run with `--baseline`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from banana_tests.cases import CaseKey
from banana_tests.cli import main
from banana_tests.families.control import ControlKey
from banana_tests.families.invariance import InvarianceKey
from banana_tests.families.search import SearchKey
from banana_tests.families.trend import TrendKey
from banana_tests.reports.paper import FIXTURE, paper_cells
from banana_tests.verdicts.baseline import (
    BaselineError,
    Known,
    dump_baseline,
    load_baseline,
    write_baseline,
)
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome
from banana_tests.verdicts.record import CaseRecord
from metrics_under_test.registry import PAPER_METRICS
from tests.conftest import SUITE_MODULE, assert_outcomes, suite_folder

# The paper's published failure counts (Δ ≥ 0 out of 36 cells), by paper name.
PUBLISHED = {
    "ARNIQA": 21, "BRISQUE": 20, "CLIPIQA": 8, "CNNIQA": 32, "DBCNN": 24, "HyperIQA": 21, "ILNIQE": 14,
    "LIQE": 5, "MANIQA": 13, "MUSIQ": 8, "NIMA": 3, "NIQE": 6, "NRQM": 21, "PaQ-2-PiQ": 18, "PI": 11,
    "PIQE": 22, "Q-Align": 4, "QualiCLIP": 1, "TOPIQ NR": 8, "TReS": 21, "WaDIQaM": 28,
}  # fmt: skip


def test_write_baseline_keeps_only_failures_sorted_and_round_trips(tmp_path: Path) -> None:
    cells = [
        Cell(CaseKey("piqe", "beta", 5), Outcome.FAILED, delta=0.0),
        Cell(CaseKey("brisque", "alpha", 20, run=1), Outcome.FAILED, delta=2.5),
        Cell(CaseKey("brisque", "alpha", 10), Outcome.PASSED, delta=-1.0),
        Cell(CaseKey("brisque", "alpha", 5), Outcome.SKIPPED),
        Cell(CaseKey("niqe", "alpha", 5), Outcome.FAILED),  # no Δ: it never reached its verdict
    ]
    path = tmp_path / "b.json"
    write_baseline(Matrix.of(cells), path)
    entries = json.loads(path.read_text())["failures"]
    assert entries == [
        {"metric": "brisque", "seed_image": "alpha", "step": 20, "run": 1},
        {"metric": "piqe", "seed_image": "beta", "step": 5},
    ]
    assert load_baseline(path) == {CaseKey("piqe", "beta", 5), CaseKey("brisque", "alpha", 20, 1)}


def test_a_malformed_baseline_names_the_file_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"format": "banana-tests-baseline/1", "failures": [{"metric": "piqe", "step": 5}]}')
    with pytest.raises(BaselineError, match=r"b\.json: failure entry 0 .*seed_image"):
        load_baseline(path)
    path.write_text("[]")
    with pytest.raises(BaselineError, match="not a banana-tests-baseline/2 file"):
        load_baseline(path)


def test_paper_baseline_has_the_published_failure_counts() -> None:
    names = {p.pyiqa_name: p.paper_name for p in PAPER_METRICS}
    counts = Counter(names[k.metric] for k in load_baseline(FIXTURE))
    assert counts == PUBLISHED
    assert {k.step for k in load_baseline(FIXTURE) if isinstance(k, CaseKey)} == {5, 10, 20}
    assert all(isinstance(k, CaseKey) for k in load_baseline(FIXTURE))


def test_paper_baseline_is_the_figure5_sign_matrix() -> None:
    """Every published gap ≥ 0 is listed, nothing else; "-0.0" counts as 0, as the paper counts."""
    assert load_baseline(FIXTURE) == {c.key for c in paper_cells() if c.delta is not None and c.delta >= 0}
    assert CaseKey("paq2piq", "Fog", 5) in load_baseline(FIXTURE)  # printed "-0.0"
    assert CaseKey("brisque", "Dongpo", 5) in load_baseline(FIXTURE)  # Δ = 5.2 in Figure 4


@pytest.fixture
def gated(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A tiny set where, against step 5, step-1 cases fail (less noise scores better: Δ > 0) and
    step-20 cases (heavy noise) pass."""
    return suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5, 20))


def matrix_of(xml: Path) -> Matrix:
    cells = []
    for tc in ET.parse(xml).iter("testcase"):
        kids = {c.tag for c in tc}
        outcome = (
            Outcome.FAILED if "failure" in kids else Outcome.SKIPPED if "skipped" in kids else Outcome.PASSED
        )
        props = {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
        record = CaseRecord.read(props)
        assert record is not None, props
        cells.append(record.cell(outcome))
    return Matrix.of(cells)


ARGS = ("--dataset=data", "--metric=piqe", "--steps=1,20", "--reference-step=5")


@pytest.mark.slow
def test_baseline_gates_new_failures_and_fixed_cells(gated: pytest.Pytester) -> None:
    first = gated.runpytest_subprocess(*ARGS, "--junitxml=j.xml")
    assert_outcomes(first, missed=2, passed=2)
    matrix = matrix_of(gated.path / "j.xml")
    write_baseline(matrix, gated.path / "base.json")
    failing = load_baseline(gated.path / "base.json")
    passing = {k for k, c in matrix.cells.items() if c.outcome == "passed"}
    assert failing == {CaseKey("piqe", "alpha", 1), CaseKey("piqe", "beta", 1)}

    same = gated.runpytest_subprocess(*ARGS, "--baseline=base.json")
    same.assert_outcomes(xfailed=2, passed=2)
    assert same.ret == pytest.ExitCode.OK

    dump_baseline(failing - {CaseKey("piqe", "beta", 1)}, gated.path / "older.json")
    new = gated.runpytest_subprocess(*ARGS, "--baseline=older.json")
    assert_outcomes(new, xfailed=1, missed=1, passed=2)
    assert new.ret == pytest.ExitCode.TESTS_FAILED
    new.stdout.fnmatch_lines(
        ["*banana-tests: 1 failing verdicts*", "piqe did not detect the degradation of beta at step 1*"]
    )

    dump_baseline(failing | passing, gated.path / "stale.json")
    fixed = gated.runpytest_subprocess(*ARGS, "--baseline=stale.json")
    fixed.assert_outcomes(xfailed=2, xpassed=2)
    assert fixed.ret == pytest.ExitCode.OK
    named = [f"  XPASS test_detects_degradation[{k.test_id}]" for k in sorted(passing, key=str)]
    fixed.stdout.fnmatch_lines(["banana-tests: 2 xpassed: expected to fail by the baseline *stale.json*"])
    assert sorted(line for line in fixed.outlines if "  XPASS " in line) == sorted(named)
    workers = gated.runpytest_subprocess(*ARGS, "--baseline=stale.json", "-n", "2")
    workers.assert_outcomes(xfailed=2, xpassed=2)
    assert sorted(line for line in workers.outlines if "  XPASS " in line) == sorted(named)
    strict = gated.runpytest_subprocess(*ARGS, "--baseline=stale.json", "--strict-baseline")
    strict.assert_outcomes(xfailed=2, failed=2)
    assert strict.ret == pytest.ExitCode.TESTS_FAILED
    strict.stdout.fnmatch_lines(["*XPASS(strict)*fails in baseline stale.json*"])


@pytest.mark.slow
def test_an_unreadable_baseline_is_a_usage_error(gated: pytest.Pytester) -> None:
    result = gated.runpytest_subprocess(*ARGS, "--baseline=nope.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--baseline: baseline nope.json:*No such file*"])


def test_every_kind_of_case_round_trips_sorted_by_metric(tmp_path: Path) -> None:
    keys: set[Known] = {
        ControlKey("piqe", "jpeg"),
        CaseKey("piqe", "beta", 5),
        TrendKey("brisque", "alpha"),
        ControlKey("paq-2-piq", "gaussian_noise"),
        CaseKey("brisque", "alpha", 20, run=1),
    }
    path = tmp_path / "b.json"
    dump_baseline(keys, path)
    assert path.read_text().splitlines()[1:-2] == [
        '  "format": "banana-tests-baseline/2",',
        '  "failures": [',
        '    {"metric": "brisque", "seed_image": "alpha", "step": 20, "run": 1},',
        '    {"kind": "trend", "metric": "brisque", "seed_image": "alpha"},',
        '    {"kind": "control", "metric": "paq-2-piq", "distortion": "gaussian_noise"},',
        '    {"metric": "piqe", "seed_image": "beta", "step": 5},',
        '    {"kind": "control", "metric": "piqe", "distortion": "jpeg"}',
    ]
    assert load_baseline(path) == keys


def test_a_metrics_entries_run_cells_trends_controls_invariance_then_search(tmp_path: Path) -> None:
    """Each kind has its own rank within a metric, whatever order the set hands them over in, and
    every kind's entry names exactly its own keys, so each round-trips."""
    keys: set[Known] = {
        SearchKey("m"),
        InvarianceKey("m", "shift"),
        InvarianceKey("m", "batch"),  # before the control by name: the rank decides
        ControlKey("m", "jpeg"),
        TrendKey("m", "zeta"),
        CaseKey("m", "zeta", 5, run=0),
        CaseKey("m", "zeta", 5),
        SearchKey("a"),
        InvarianceKey("a", "batch"),
    }
    path = tmp_path / "b.json"
    dump_baseline(keys, path)
    assert path.read_text().splitlines()[3:-2] == [
        '    {"kind": "invariance", "metric": "a", "check": "batch"},',
        '    {"kind": "search", "metric": "a"},',
        '    {"metric": "m", "seed_image": "zeta", "step": 5},',
        '    {"metric": "m", "seed_image": "zeta", "step": 5, "run": 0},',
        '    {"kind": "trend", "metric": "m", "seed_image": "zeta"},',
        '    {"kind": "control", "metric": "m", "distortion": "jpeg"},',
        '    {"kind": "invariance", "metric": "m", "check": "batch"},',
        '    {"kind": "invariance", "metric": "m", "check": "shift"},',
        '    {"kind": "search", "metric": "m"}',
    ]
    assert load_baseline(path) == keys


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"kind": "invariance", "metric": "m"}, "'check'"),
        ({"kind": "invariance", "metric": "m", "check": "shift", "step": 5}, r"unknown key\(s\) 'step'"),
        ({"kind": "search", "metric": "m", "check": "shift"}, r"unknown key\(s\) 'check'"),
        ({"kind": "search"}, "'metric'"),
        ({"kind": "trend", "metric": "m"}, "'seed_image'"),
        ({"kind": "control", "metric": "m", "distortion": "jpeg", "run": 1}, r"unknown key\(s\) 'run'"),
    ],
)
def test_each_kind_takes_its_own_keys_only(tmp_path: Path, entry: dict[str, object], match: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"format": "banana-tests-baseline/2", "failures": [entry]}))
    with pytest.raises(BaselineError, match=r"failure entry 0 .*" + match):
        load_baseline(path)


def test_format_1_files_still_load(tmp_path: Path) -> None:
    path = tmp_path / "old.json"
    path.write_text(
        '{\n  "format": "banana-tests-baseline/1",\n  "failures": [\n'
        '    {"metric": "brisque", "seed_image": "brick", "step": 5},\n'
        '    {"metric": "niqe", "seed_image": "brick", "step": 10, "run": 2}\n  ]\n}\n'
    )
    assert load_baseline(path) == {CaseKey("brisque", "brick", 5), CaseKey("niqe", "brick", 10, 2)}


@pytest.mark.parametrize("fixture", sorted(FIXTURE.parent.glob("*.json")), ids=lambda p: p.name)
def test_the_committed_baselines_load(fixture: Path) -> None:
    assert load_baseline(fixture)


@pytest.mark.parametrize(
    ("failures", "match"),
    [
        (
            [{"metric": "piqe", "seed_image": "a", "step": 5, "stepp": 6}],
            r"entry 0 .*unknown key\(s\) 'stepp'",
        ),
        ([{"kind": "control", "metric": "piqe"}], r"entry 0 .*'distortion'"),
        ([{"kind": "snapshot", "metric": "piqe"}], r"entry 0 .*unknown kind 'snapshot'"),
        ([{"kind": "trend", "metric": "piqe", "seed_image": "a", "step": 5}], r"unknown key\(s\) 'step'"),
        (["piqe-a-step5"], "entry 0 'piqe-a-step5' is malformed"),
    ],
)
def test_entries_with_unknown_or_missing_keys_are_refused(
    tmp_path: Path, failures: list[object], match: str
) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"format": "banana-tests-baseline/2", "failures": failures}))
    with pytest.raises(BaselineError, match=match) as info:
        load_baseline(path)
    assert str(path) in str(info.value)


WHOLE_SUITE = (
    SUITE_MODULE
    + "from banana_tests.families.trend.test_trend import (  # noqa: F401\n"
    + "    banana_trend, test_trend_detects_degradation,\n)\n"
    + "from banana_tests.families.control.test_control import (  # noqa: F401\n"
    + "    pytest_generate_tests, test_detects_control_degradation,\n)\n"
    + "from banana_tests.families.invariance.test_invariance import test_score_is_invariant  # noqa: F401\n"
)


@pytest.mark.slow
def test_a_baseline_written_from_a_run_makes_that_run_pass(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented flow, run -> report --write-baseline -> pytest --baseline, on a cheap numpy
    metric that fails Δ, trend, control and invariance cases alike; refreshing from the gated run's JUnit
    gives the same baseline."""
    suite_folder(pytester, monkeypatch, WHOLE_SUITE, runs=(0,), steps=(1, 5, 20))
    args = ["--dataset=data", "--metric=laplacian_variance", "--steps=5,20", "--trend"]
    args += ["-o", "junit_family=xunit1", "-p", "no:cacheprovider"]
    first = pytester.runpytest_subprocess(*args, "--junitxml=j.xml")
    assert first.ret == pytest.ExitCode.TESTS_FAILED
    outcomes = first.parseoutcomes()
    failed = outcomes["missed"] + outcomes.get("failed", 0)  # verdicts, and the invariance checks
    path = pytester.path
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
    kinds = Counter(type(k).__name__ for k in load_baseline(path / "b.json"))
    assert kinds["CaseKey"] == 4 and kinds["TrendKey"] == 2  # noise looks sharper to it
    assert kinds["ControlKey"] >= 1  # gaussian noise, at least
    assert kinds["InvarianceKey"] == outcomes.get("failed", 0) >= 1  # a 5 % resize moves it
    assert sum(kinds.values()) == failed

    gated = pytester.runpytest_subprocess(*args, "--baseline=b.json", "--junitxml=j2.xml")
    assert gated.ret == pytest.ExitCode.OK
    assert gated.parseoutcomes()["xfailed"] == failed
    assert (
        main(
            [
                "report",
                str(path / "j2.xml"),
                "--out",
                str(path / "r2"),
                "--write-baseline",
                str(path / "b2.json"),
            ]
        )
        == 0
    )
    assert (path / "b2.json").read_bytes() == (path / "b.json").read_bytes()
