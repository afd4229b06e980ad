from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from xml.sax.saxutils import quoteattr

import pytest

from banana_tests.cases import CaseKey, CaseKind
from banana_tests.families.control import ControlKey
from banana_tests.families.family import Case
from banana_tests.families.trend import TrendKey
from banana_tests.families.trend.trends import trend_series
from banana_tests.reports import junit_testcase
from banana_tests.reports.junit import MAX_ATTRIBUTE, JUnitError, read_junit
from banana_tests.reports.merge_checks import AGREED
from banana_tests.reports.sourced import OLDEST, OtherOutcome, describe_replacements
from banana_tests.verdicts.matrix import Cell
from metrics_under_test.own_code import distribution_versions


def case(
    metric: str,
    seed: str,
    step: int,
    child: str = "",
    name: str | None = None,
    variant: str | None = "replicate",
    record: str | None = None,
    **props: str,
) -> str:
    """A testcase as the suite's plugin writes it (xunit1 shape), with its properties. Without
    `record` in the layout of banana-tests up to f958bf8 (schema 1), where `variant` None leaves
    the run's facts out, as on every case of a process but its first; with `record` (e.g.
    "delta/2") as this version writes it, `banana_record` first."""
    allprops = {"metric": metric, "seed_image": seed, "step": str(step), **props}
    if record is not None:
        allprops = {"banana_record": record, **allprops}
    if variant is not None:
        allprops["variant"] = variant
    body = "".join(f"<property name={quoteattr(k)} value={quoteattr(v)} />" for k, v in allprops.items())
    name = name or f"test_detects_degradation[{metric}-{seed}-step{step}]"
    head = f'<testcase classname="banana_tests.test_degradation" name="{name}">'
    return f"{head}<properties>{body}</properties>{child}</testcase>"


def junit(
    path: Path, *cases: str, timestamp: str | None = "2026-01-01T10:00:00+00:00", bare: bool = False
) -> Path:
    """A JUnit file; `bare` gives the xunit2-style root <testsuite> without <testsuites>."""
    stamp = f' timestamp="{timestamp}"' if timestamp else ""
    suite = f'<testsuite name="pytest"{stamp}>{"".join(cases)}</testsuite>'
    path.write_text(
        f'<?xml version="1.0" encoding="utf-8"?>{suite if bare else f"<testsuites>{suite}</testsuites>"}'
    )
    return path


def test_newest_result_wins_whatever_the_file_order(tmp_path: Path) -> None:
    failing = case("piqe", "alpha", 5, "<failure message='missed' />", delta="1.5")
    passing = case("piqe", "alpha", 5, delta="-2.0")
    newer = junit(tmp_path / "rerun.xml", passing, timestamp="2026-01-02T09:00:00+00:00")
    older = junit(tmp_path / "first.xml", failing, case("piqe", "beta", 5, delta="-1.0"))
    reading = read_junit([newer, older])
    key = CaseKey("piqe", "alpha", 5)
    assert reading.matrix.cells[key].outcome == "passed"
    assert reading.matrix.cells[key].delta == -2.0
    assert len(reading.matrix.cells) == 2
    [replaced] = reading.replaced
    assert (replaced.kept.path, replaced.dropped.path) == (newer, older)
    assert "piqe-alpha-step5: kept passed from" in replaced.describe()
    assert "rerun.xml" in replaced.describe() and "replaced failed from" in replaced.describe()


def test_same_timestamp_goes_to_the_later_file(tmp_path: Path) -> None:
    a = junit(tmp_path / "a.xml", case("piqe", "alpha", 5, delta="-2.0"))
    b = junit(tmp_path / "b.xml", case("piqe", "alpha", 5, "<failure />", delta="3.0"))
    assert read_junit([a, b]).matrix.cells[CaseKey("piqe", "alpha", 5)].outcome == "failed"
    assert read_junit([b, a]).matrix.cells[CaseKey("piqe", "alpha", 5)].outcome == "passed"


def test_outcomes_come_from_the_testcase_children(tmp_path: Path) -> None:
    path = junit(
        tmp_path / "x.xml",
        case("musiq", "alpha", 5, "<skipped message='no weights' />"),
        case("piqe", "alpha", 5, "<error message='failed on setup' />"),
        case("piqe", "alpha", 10, "<skipped type='pytest.xfail' message='known' />", delta="0.5"),
        case("piqe", "alpha", 20, "<failure message='m' />", delta="0.0"),
        bare=True,
    )
    cells = read_junit([path]).matrix.cells
    outcomes = {k.test_id: c.outcome for k, c in cells.items()}
    assert outcomes == {
        "musiq-alpha-step5": "skipped",
        "piqe-alpha-step5": "error",
        "piqe-alpha-step10": "failed",  # a baseline's xfail keeps its verdict, as in the terminal
        "piqe-alpha-step20": "failed",
    }
    assert cells[CaseKey("musiq", "alpha", 5)].message == "no weights"


def test_other_tests_trend_cases_and_xdist_suffixes(tmp_path: Path) -> None:
    other = '<testcase classname="tests.test_x" name="test_something" />'
    trend = case("piqe", "alpha", 0, kind="trend", name="test_trend[piqe-alpha]")
    grouped = case("piqe", "alpha", 5, delta="-1.0", name="test_detects_degradation[piqe-alpha-step5]@piqe")
    reading = read_junit([junit(tmp_path / "x.xml", other, trend, grouped)])
    assert list(reading.matrix.cells) == [CaseKey("piqe", "alpha", 5)]
    assert reading.metadata == {"date": ["2026-01-01 10:00:00+00:00"], "variant": ["replicate"]}


def test_the_run_facts_come_from_whichever_case_recorded_them(tmp_path: Path) -> None:
    """The first case of each process records the run's facts; it may be a trend case."""
    facts = {"dataset": "/data/set", "versions": "banana-tests 0.1.0", "device": "cpu", "command": "pytest"}
    facts["libraries"] = "numpy 2.1.0"  # every run fact schema 1 carried on a case
    trend = case(
        "piqe",
        "alpha",
        0,
        kind="trend",
        name="test_trend[piqe-alpha]",
        variant="nano",
        **facts,
        spearman="-1",
    )
    quiet = case("piqe", "alpha", 5, variant=None, delta="-1.0")  # a later case: no facts
    reading = read_junit([junit(tmp_path / "x.xml", trend, quiet)])
    assert list(reading.matrix.cells) == [CaseKey("piqe", "alpha", 5)]
    assert reading.metadata == {
        "command": ["pytest"],
        "dataset": ["/data/set"],
        "date": ["2026-01-01 10:00:00+00:00"],
        "device": ["cpu"],
        "libraries": ["numpy 2.1.0"],
        "variant": ["nano"],
        "versions": ["banana-tests 0.1.0"],
    }  # neither the trend's kind nor its series (spearman, ...): they are no run facts


def test_within_one_file_the_later_result_wins(tmp_path: Path) -> None:
    """A merged file holds the shards' suites in turn; with no timestamp to tell them apart, the
    later one in the file wins, for Δ cells, trend series and trend outcomes alike."""
    first = case("piqe", "alpha", 5, "<failure message='VerdictFailure: missed' />", delta="1.5") + case(
        "piqe",
        "alpha",
        0,
        kind="trend",
        name="test_trend[piqe-alpha]",
        reference_step="0",
        trend_series="[[0, 1, 1, 1], [5, 1, 1, 1]]",
    )
    second = case("piqe", "alpha", 5, delta="-2.0") + case(
        "piqe",
        "alpha",
        0,
        "<failure message='VerdictFailure: flat' />",
        kind="trend",
        name="test_trend[piqe-alpha]",
        reference_step="0",
        trend_series="[[0, 1, 1, 1], [5, 0.5, 0.4, 0.6]]",
    )
    path = tmp_path / "merged.xml"
    path.write_text(f"<testsuites><testsuite>{first}</testsuite><testsuite>{second}</testsuite></testsuites>")
    reading = read_junit([path])
    cell = reading.matrix.cells[CaseKey("piqe", "alpha", 5)]
    assert (cell.outcome, cell.delta) == ("passed", -2.0)
    [replaced] = reading.replaced
    assert (replaced.kept.value.outcome, replaced.dropped.value.outcome) == ("passed", "failed")
    assert reading.others == {TrendKey("piqe", "alpha"): "failed"}
    [series] = trend_series(reading.family_cases[CaseKind.TREND])
    assert (series.metric, series.rows) == ("piqe", ((0, 1.0, 1.0, 1.0), (5, 0.5, 0.4, 0.6)))


def test_each_testcase_is_freed_once_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory follows the cases, not the XML: the parser reads ahead a chunk at a time, and the
    reader drops a testcase from the tree for each one it has read, so the tree never holds the
    file and ends empty."""
    parse = ET.iterparse
    held: list[int] = []  # testcases in the tree when each one ends
    suites: list[ET.Element] = []

    def watched(source: Path, events: tuple[str, ...]) -> Iterator[tuple[str, ET.Element]]:
        for event, node in parse(source, events=events):
            if event == "start" and node.tag == "testsuite":
                suites.append(node)
            if event == "end" and node.tag == "testcase":
                held.append(sum(child.tag == "testcase" for child in suites[-1]))
            yield event, node

    monkeypatch.setattr(ET, "iterparse", watched)
    path = junit(tmp_path / "x.xml", *(case("piqe", f"s{i}", 5, delta="-1.0") for i in range(1000)))
    assert len(read_junit([path]).matrix.cells) == 1000
    assert len(held) == 1000 and max(held) < 250, max(held)
    assert [len(suite) for suite in suites] == [0]


def test_runs_are_kept_apart(tmp_path: Path) -> None:
    path = junit(
        tmp_path / "x.xml",
        case("piqe", "a", 5, run="0", delta="-1"),
        case("piqe", "a", 5, run="1", delta="2"),
    )
    reading = read_junit([path])
    assert {k.run: c.outcome for k, c in reading.matrix.cells.items()} == {0: "passed", 1: "failed"}
    assert not reading.replaced


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("metric,seed_image\npiqe,alpha\n", "not a readable JUnit XML file"),
        ("<html><body>hi</body></html>", r"not JUnit XML \(root element <html>"),
        (
            "<testsuites><testsuite><testcase name='test_x' /></testsuite></testsuites>",
            "without banana-tests cases",
        ),
        (
            "<testsuites><testsuite><testcase name='test_detects_degradation[piqe-a-step5]' />"
            "</testsuite></testsuites>",
            "a delta record without its 'metric' property",
        ),
        ("<testsuite timestamp='yesterday'><testcase name='t' /></testsuite>", "timestamp 'yesterday'"),
    ],
)
def test_bad_files_are_named(tmp_path: Path, text: str, match: str) -> None:
    good = junit(tmp_path / "good.xml", case("piqe", "alpha", 5, delta="-1.0"))
    bad = tmp_path / "bad-input.xml"
    bad.write_text(text)
    with pytest.raises(JUnitError, match=match) as info:
        read_junit([good, bad])
    assert str(info.value).startswith(str(bad))


def control(metric: str, distortion: str, child: str = "") -> str:
    """A control testcase as pytest writes it: no properties, the case in its name."""
    name = f"test_detects_control_degradation[{metric}-{distortion}]"
    return f'<testcase classname="banana_tests.test_control" name="{name}">{child}</testcase>'


def test_every_kind_of_case_read_names_its_file_and_is_typed_by_what_it_holds(tmp_path: Path) -> None:
    """One `Sourced[T]` for cells and cases outside the matrix alike: each says the file it came from."""
    path = tmp_path / "x.xml"
    read = [
        item
        for text in (case("piqe", "alpha", 5, delta="-1.0"), control("piqe", "jpeg"))
        for item, _ in junit_testcase.testcase_items(path, ET.fromstring(text), {}, OLDEST, (0, 0))[0]
    ]
    assert [item.path for item in read] == [path, path, path]
    cell, other, family_case = read  # a control case is an outcome for baselines and its family's case
    assert cell.of(Cell) is cell and cell.of(OtherOutcome) is None
    assert other.of(OtherOutcome) is other and other.value.key == ControlKey("piqe", "jpeg")
    assert family_case.of(Case) is family_case and family_case.value.key == ControlKey("piqe", "jpeg")
    assert other.label == f"{path} (no timestamp)"


def test_trend_and_control_outcomes_are_read_for_baselines(tmp_path: Path) -> None:
    asserted = "<failure message='AssertionError: piqe did not rank jpeg ...' />"
    reading = read_junit(
        [
            junit(
                tmp_path / "x.xml",
                case("piqe", "alpha", 5, delta="-1.0"),
                control("paq-2-piq", "gaussian_noise", asserted),
                control("piqe", "jpeg", "<skipped type='pytest.xfail' message='fails in baseline b.json' />"),
                control(
                    "piqe", "gaussian_blur", "<failure message='[XPASS(strict)] fails in baseline b.json' />"
                ),
                control("niqe", "jpeg", "<failure message='niqe was named with --metric but cannot load' />"),
                case(
                    "piqe",
                    "alpha",
                    0,
                    asserted,
                    kind="trend",
                    name="test_trend_detects_degradation[piqe-alpha]",
                ),
                case("piqe", "beta", 0, kind="trend", name="test_trend_detects_degradation[piqe-beta]"),
            )
        ]
    )
    assert reading.others == {
        ControlKey("paq-2-piq", "gaussian_noise"): "failed",
        ControlKey("piqe", "jpeg"): "failed",  # a baseline's xfail: the failure is still there
        ControlKey("piqe", "gaussian_blur"): "passed",  # a strict XPASS: fixed
        ControlKey("niqe", "jpeg"): "error",  # no verdict: a baseline cannot expect it
        TrendKey("piqe", "alpha"): "failed",
        TrendKey("piqe", "beta"): "passed",
    }
    assert set(reading.failing_others()) == {
        ControlKey("paq-2-piq", "gaussian_noise"),
        ControlKey("piqe", "jpeg"),
        TrendKey("piqe", "alpha"),
    }
    assert list(reading.matrix.cells) == [CaseKey("piqe", "alpha", 5)]


def test_a_nan_delta_in_a_failure_stays_a_failure(tmp_path: Path) -> None:
    path = junit(tmp_path / "x.xml", case("piqe", "alpha", 5, "<failure message='m' />", delta="nan"))
    cell = read_junit([path]).matrix.cells[CaseKey("piqe", "alpha", 5)]
    assert cell.outcome == "failed" and cell.delta is not None and math.isnan(cell.delta)


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path: Path) -> None:
    path = junit(tmp_path / "big.xml", *(case("piqe", f"s{i}", 5, delta="-1.0") for i in range(3000)))
    size_mb = path.stat().st_size / 2**20
    with pytest.raises(JUnitError, match=r"big\.xml: .* MiB is over the 0\.5 MiB limit .*--max-input-mb"):
        read_junit([path], max_mb=0.5)
    assert size_mb > 0.5
    assert len(read_junit([path], max_mb=size_mb * 1.01).matrix.cells) == 3000


def test_an_attribute_longer_than_the_suite_writes_is_refused(tmp_path: Path) -> None:
    path = junit(tmp_path / "x.xml", case("piqe", "alpha", 5, delta="-1.0", note="x" * (MAX_ATTRIBUTE + 1)))
    with pytest.raises(JUnitError, match=r"x\.xml: attribute 'value' of <property> 'note' holds 1,048,577"):
        read_junit([path])


# ---- the case record (schema 2), and files written before it (schema 1: f958bf8) ----

LEGACY = Path(__file__).resolve().parent / "junit_f958bf8"
"""JUnit files written by banana-tests f958bf8: `mean.xml` by the suite's Δ, trend and control
cases (`--trend`, two seed images, LEGACY_ARGS), `per_run.xml` by `--aggregate=per-run`."""
LEGACY_METRIC = """
from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric


@metric("sharpness_lower", lower_better=True, score_range=(0.0, 2000.0), cost="fast")
def sharpness_lower(images):
    return laplacian_variance(images)
"""
LEGACY_ARGS = (
    "--metric=laplacian_variance,lc_metrics:sharpness_lower",
    "--trend",
    "-k",
    "(astronaut or brick or control) and not snapshot",
)


def suite_facts(*facts: tuple[str, str]) -> str:
    return (
        "<properties>"
        + "".join(f"<property name={quoteattr(k)} value={quoteattr(v)} />" for k, v in facts)
        + "</properties>"
    )


def test_a_case_is_recognised_by_its_record_not_by_names(tmp_path: Path) -> None:
    """A renamed test function keeps its cases; in a file of this version, a testcase without a
    record is another test's, whatever its name and properties."""
    ours = case("piqe", "alpha", 5, record="delta/2", name="test_renamed[piqe-alpha-step5]", delta="-1.0")
    lookalike = case("m", "s", 7, name="test_detects_degradation[m-s-step7]", reference_step="1", delta="3.0")
    reading = read_junit([junit(tmp_path / "x.xml", ours, lookalike)])
    assert list(reading.matrix.cells) == [CaseKey("piqe", "alpha", 5)]


def test_a_foreign_test_recording_metric_seed_image_and_step_is_not_a_case(tmp_path: Path) -> None:
    foreign = case("m", "s", 7, name="test_pass[3]", delta="1.0", variant=None)
    with pytest.raises(JUnitError, match="without banana-tests cases"):
        read_junit([junit(tmp_path / "x.xml", foreign)])


def test_the_run_facts_are_the_testsuite_properties(tmp_path: Path) -> None:
    """Written once by the process that writes the file; a case's other properties are no facts."""
    facts = suite_facts(("variant", "nano"), ("command", "pytest -n 2"))
    body = case("piqe", "alpha", 5, record="delta/2", variant="stray", delta="-1.0", device="x")
    xml = tmp_path / "x.xml"
    xml.write_text(f'<testsuites><testsuite name="pytest">{facts}{body}</testsuite></testsuites>')
    assert read_junit([xml]).metadata == {"command": ["pytest -n 2"], "variant": ["nano"]}


@pytest.mark.parametrize(
    ("tag", "match"),
    [
        ("delta/3", r"written by a newer banana-tests \(record schema 3; this one reads up to 2\)"),
        (
            "snapshot/2",
            r"banana_record 'snapshot/2': unknown kind 'snapshot' \(delta, trend, control, invariance, "
            r"search\)",
        ),
        ("delta", r"banana_record 'delta' is not <kind>/<schema version>"),
    ],
)
def test_a_record_this_version_cannot_read_is_named(tmp_path: Path, tag: str, match: str) -> None:
    xml = junit(tmp_path / "x.xml", case("piqe", "alpha", 5, record=tag, delta="-1.0"))
    with pytest.raises(
        JUnitError, match=rf"x\.xml: testcase 'test_detects_degradation\[piqe-alpha-step5\]': {match}"
    ):
        read_junit([xml])


def test_the_same_file_given_twice_is_read_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from banana_tests.cli import main

    xml = junit(tmp_path / "x.xml", *(case("piqe", f"s{i:02d}", 5, delta="-1.0") for i in range(72)))
    reading = read_junit([xml, tmp_path / "." / "x.xml"])
    assert (reading.files, reading.repeated, reading.replaced) == ([xml], [xml], [])
    assert main(["report", str(xml), str(xml), f"--out={tmp_path / 'out'}"]) == 0
    assert capsys.readouterr().err.splitlines() == [f"{xml} is given more than once; it is read once"]


def test_a_copy_of_a_file_is_said_in_one_line(tmp_path: Path) -> None:
    xml = junit(tmp_path / "x.xml", *(case("piqe", f"s{i:02d}", 5, delta="-1.0") for i in range(72)))
    copy = tmp_path / "copy.xml"
    copy.write_bytes(xml.read_bytes())
    changed = junit(
        tmp_path / "later.xml", case("piqe", "s00", 5, "<failure />", delta="1.0"), timestamp=None
    )
    reading = read_junit([xml, copy, changed])
    assert reading.repeated == []  # a copy is another file, not the same one given twice
    assert len(reading.replaced) == 73
    assert describe_replacements(reading.replaced) == [
        f"piqe-s00-step5: kept passed from {xml} (2026-01-01T10:00:00+00:00), replaced failed from "
        f"{changed} (no timestamp)",
        f"72 case(s) of {xml} are repeated in {copy} with the same results",
    ]


def test_a_rerun_with_the_same_result_is_a_replacement_not_a_copy(tmp_path: Path) -> None:
    """A copy is the same cell from the same run's start; a later run agreeing is still named."""
    first = junit(tmp_path / "first.xml", case("piqe", "s00", 5, delta="-1.0"))
    later = "2026-01-02T09:00:00+00:00"
    rerun = junit(tmp_path / "rerun.xml", case("piqe", "s00", 5, delta="-1.0"), timestamp=later)
    assert describe_replacements(read_junit([first, rerun]).replaced) == [
        f"piqe-s00-step5: kept passed from {rerun} ({later}), replaced passed from {first} "
        "(2026-01-01T10:00:00+00:00)"
    ]


@pytest.mark.slow
def test_a_file_of_f958bf8_reads_to_the_cells_this_version_writes(pytester: pytest.Pytester) -> None:
    """The same cases run now: the same cells, trend series and control outcomes, and the run's
    facts, which f958bf8 carried on the first case of each process."""
    (pytester.path / "lc_metrics.py").write_text(LEGACY_METRIC)
    suite = Path(__file__).resolve().parent.parent / "banana_tests"
    result = pytester.runpytest_subprocess(
        str(suite), *LEGACY_ARGS, "-p", "no:randomly", "--junitxml=now.xml", "--banana-no-cache"
    )  # the rootdir is the project's here: a cache would land in the checkout
    assert result.ret == 1, result.stdout.str()  # laplacian_variance misses every step
    old, now = read_junit([LEGACY / "mean.xml"]), read_junit([pytester.path / "now.xml"])
    assert [(k, c.outcome, c.reference_step, c.runs) for k, c in old.matrix.cells.items()] == [
        (k, c.outcome, c.reference_step, c.runs) for k, c in now.matrix.cells.items()
    ]
    assert len(old.matrix.cells) == 12 and {c.outcome for c in old.matrix.cells.values()} == {
        "passed",
        "failed",
    }
    # The embedded set was rebuilt from the artifact families since f958bf8 (issue 39), so today's
    # Δs are of other images: the old file's Δs read exactly as it wrote them, today's are finite.
    deltas = [
        float(p.get("value", ""))
        for p in ET.parse(LEGACY / "mean.xml").iter("property")
        if p.get("name") == "delta"
    ]
    assert len(deltas) == 12
    assert sorted(c.delta for c in old.matrix.cells.values()) == sorted(deltas)
    assert all(math.isfinite(c.delta) for c in now.matrix.cells.values())
    assert old.others == now.others and len(old.others) == 10  # 6 control and 4 trend cases
    trends = [
        [(t.key, t.props["reference_step"]) for t in r.family_cases[CaseKind.TREND]] for r in (old, now)
    ]
    assert trends[0] == trends[1] and len(trends[0]) == 4
    facts = {"variant", "dataset", "versions", "device", "command", "date"}
    assert old.metadata.keys() == facts and now.metadata.keys() == facts | {"libraries"} | AGREED.keys()
    # what metrics_under_test.examples imports, and what that requires
    libraries = "; ".join(f"{n} {v}" for n, v in distribution_versions({"numpy", "torch"}).items())
    assert now.metadata["libraries"] == [libraries]
    assert [old.metadata[k] for k in ("variant", "device")] == [
        now.metadata[k] for k in ("variant", "device")
    ]


def test_a_per_run_file_of_f958bf8_reads_to_its_runs() -> None:
    reading = read_junit([LEGACY / "per_run.xml"])
    assert sorted(reading.matrix.cells) == [
        CaseKey("laplacian_variance", "astronaut", step, run) for step in (5, 10, 20) for run in (0, 1, 2)
    ]
    assert {(c.outcome, c.runs, c.reference_step) for c in reading.matrix.cells.values()} == {
        ("failed", 1, 1)
    }
    assert reading.metadata["variant"] == ["replicate"]
