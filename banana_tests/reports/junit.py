"""Read JUnit XML written by the suite back into the one failure matrix.

CI splits the suite into shards, runs it under xdist and reruns it, so a report merges many
files. A case seen twice keeps its newest result (the testsuite `timestamp`, then file order),
and every replacement is returned so the caller can say so; a file given twice is read once.

A testcase is the suite's when it carries a case record (banana_tests.verdicts.record), and the
run's facts are the testsuite's properties. A file without any record is of record schema 1
(written before `banana_record` existed): its cases are read by that schema's rules (`legacy_record`),
to the same records, and its run facts carried forward from the cases that held them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from banana_tests.cases import CaseKey, CaseKind, Field, strip_xdist_group
from banana_tests.reports.completeness import PLAN_PROPERTIES, Ledger, id_of_testcase
from banana_tests.reports.control_table import ControlOutcome
from banana_tests.reports.invariance_table import InvarianceOutcome
from banana_tests.reports.search_table import SearchOutcome
from banana_tests.reports.trends import TrendSeries
from banana_tests.verdicts.baseline import ControlKey, Other
from banana_tests.verdicts.matrix import Cell, Matrix
from banana_tests.verdicts.outcome import Outcome
from banana_tests.verdicts.record import CaseRecord, RecordError

LEGACY_PREFIXES = {
    "test_detects_degradation[": CaseKind.DELTA,
    "test_trend_detects_degradation[": CaseKind.TREND,
    "test_detects_control_degradation[": CaseKind.CONTROL,
}
"""Schema 1: the shipped test functions, whose names told their cases apart."""
LEGACY_DELTA = frozenset({Field.METRIC, Field.SEED_IMAGE, Field.STEP, Field.REFERENCE_STEP})
"""Schema 1: a Δ case on `banana_case` under another test function's name recorded all of these."""
RUN_PROPERTIES = frozenset({"variant", "dataset", "versions", "libraries", "device", "command"})
"""The run's facts: testsuite properties; in schema 1, on the first case of each process (a trend
case may be that one) or on every case in older files."""
MAX_INPUT_MB = 64
"""Default cap on one file's size: about 51,000 failing or 65,000 passing cases (the suite writes ~1.3 and
~1.0 KB a case; benchmarks/bench_scale.py); raise it (`--max-input-mb`) for bigger single files."""
MAX_ATTRIBUTE = 1 << 20
"""Cap on one attribute value (property value, message): the suite writes at most a few KiB."""
_OLDEST = datetime.min.replace(tzinfo=UTC)
VERDICT_FAILURES = (
    "Failed",
    "VerdictFailure",
    "banana_tests.verdicts.verdict.VerdictFailure",
    "AssertionError",
)
"""How a verdict's failure message starts: `pytest.fail` (fail_verdict), or as earlier versions
wrote it: their VerdictFailure (the full name under --tb=long) or a plain assertion."""


class JUnitError(ValueError):
    """A file that is not JUnit XML, or not JUnit XML written by the suite."""


@dataclass(frozen=True)
class Sourced:
    """A cell with where it came from: the file, its suite's timestamp and its place in the input."""

    cell: Cell
    path: Path
    timestamp: datetime
    order: tuple[int, int]

    @property
    def label(self) -> str:
        stamp = "no timestamp" if self.timestamp == _OLDEST else self.timestamp.isoformat()
        return f"{self.path} ({stamp})"


@dataclass(frozen=True)
class Replacement:
    """A case read twice: `kept` is the newer result, `dropped` the one it replaced."""

    kept: Sourced
    dropped: Sourced

    @property
    def same_result(self) -> bool:
        """The same cell from a run with the same start: one run read twice, nothing replaced."""
        return self.kept.cell == self.dropped.cell and self.kept.timestamp == self.dropped.timestamp

    def describe(self) -> str:
        k, d = self.kept, self.dropped
        return (
            f"{k.cell.key.test_id}: kept {k.cell.outcome} from {k.label}, "
            f"replaced {d.cell.outcome} from {d.label}"
        )


@dataclass(frozen=True)
class SourcedTrend:
    """A trend case's series, ordered like `Sourced` so the newest of a repeated trend wins."""

    series: TrendSeries
    timestamp: datetime
    order: tuple[int, int]


@dataclass(frozen=True)
class SourcedOther:
    """The outcome of a case outside the matrix (a trend, control or invariance case), ordered
    like `Sourced`."""

    key: Other
    outcome: Outcome
    timestamp: datetime
    order: tuple[int, int]
    message: str = ""


@dataclass(frozen=True)
class SourcedInvariance:
    """An invariance case's outcome with its figures, ordered like `Sourced`."""

    outcome: InvarianceOutcome
    timestamp: datetime
    order: tuple[int, int]


@dataclass(frozen=True)
class SourcedSearch:
    """A search case's outcome with its figures, ordered like `Sourced`."""

    outcome: SearchOutcome
    timestamp: datetime
    order: tuple[int, int]


Item = Sourced | SourcedTrend | SourcedOther | SourcedInvariance | SourcedSearch


@dataclass
class Reading:
    """The merged matrix, the replacements made, the run metadata found in the files, the
    series of any trend cases (`--trend`), newest per (metric, seed image), the newest outcome
    of each trend, control and invariance case, for baselines, and the newest invariance
    outcomes with their figures, by metric and check."""

    matrix: Matrix
    replaced: list[Replacement] = field(default_factory=list)
    metadata: dict[str, list[str]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    repeated: list[Path] = field(default_factory=list)  # files given more than once, read once
    trends: list[TrendSeries] = field(default_factory=list)
    others: dict[Other, Outcome] = field(default_factory=dict)
    invariance: list[InvarianceOutcome] = field(default_factory=list)
    controls: list[ControlOutcome] = field(default_factory=list)
    searches: list[SearchOutcome] = field(default_factory=list)  # newest per metric
    ledger: Ledger = field(default_factory=Ledger)  # the runs' plans against the testcases read

    def failing_others(self) -> list[Other]:
        """Trend, control and invariance cases that failed (under a baseline: xfailed or still
        failing)."""
        return [k for k, outcome in self.others.items() if outcome is Outcome.FAILED]


def read_junit(paths: Sequence[Path], max_mb: float = MAX_INPUT_MB) -> Reading:
    """Merge the suite's cases from `paths`; newest wins, ties go to the later file. Every file
    is read before anything is returned, and one over `max_mb` MiB is refused unread. A file
    given more than once is read once."""
    if not paths:
        raise JUnitError("no JUnit XML files given")
    sourced: list[Sourced] = []
    trends: list[SourcedTrend] = []
    others: list[SourcedOther] = []
    invariance: list[SourcedInvariance] = []
    searches: list[SourcedSearch] = []
    metadata: dict[str, set[str]] = {}
    files, repeated = _distinct(paths)
    ledger = Ledger()
    for index, path in enumerate(files):
        found: dict[bool, list[tuple[Item, dict[str, str]]]] = {True: [], False: []}  # by legacy
        for item, props, legacy in _read_file(path, index, max_mb, ledger):
            found[legacy].append((item, props))
        # A file with records is this version's: a legacy-looking testcase in it is another test.
        for item, props in found[False] or found[True]:
            if isinstance(item, SourcedTrend):
                trends.append(item)
            elif isinstance(item, SourcedOther):
                others.append(item)
            elif isinstance(item, SourcedInvariance):
                invariance.append(item)
            elif isinstance(item, SourcedSearch):
                searches.append(item)
            else:
                sourced.append(item)
            for name, value in props.items():
                metadata.setdefault(name, set()).add(value)
        if not (found[False] or found[True] or path in ledger.with_plan):  # a shard dealt nothing has a plan
            raise JUnitError(
                f"{path}: JUnit XML without banana-tests cases (no testcase carries a "
                f"{Field.RECORD!s} property, nor one of an earlier version's: "
                f"{', '.join(p + '...]' for p in LEGACY_PREFIXES)})"
            )
    sourced.sort(key=_when)
    dates = {item.timestamp for item in sourced if item.timestamp != _OLDEST}
    if dates:  # the newest run's start, from its testsuite timestamp
        metadata["date"] = {max(dates).isoformat(sep=" ", timespec="seconds")}
    reading = Reading(Matrix(), metadata={k: sorted(v) for k, v in sorted(metadata.items())})
    reading.files, reading.repeated, reading.ledger = files, repeated, ledger
    newest = {(t.series.metric, t.series.seed_image): t.series for t in sorted(trends, key=_when)}
    reading.trends = [newest[k] for k in sorted(newest)]
    newest_others = {o.key: o for o in sorted(others, key=_when)}
    reading.others = {k: o.outcome for k, o in newest_others.items()}
    controls = {k: o for k, o in newest_others.items() if isinstance(k, ControlKey)}
    reading.controls = [
        ControlOutcome.of(k, controls[k].outcome, controls[k].message) for k in sorted(controls)
    ]
    checked = {i.outcome.key: i.outcome for i in sorted(invariance, key=_when)}
    reading.invariance = [checked[k] for k in sorted(checked)]
    searched = {s.outcome.key: s.outcome for s in sorted(searches, key=_when)}
    reading.searches = [searched[k] for k in sorted(searched)]
    latest: dict[CaseKey, Sourced] = {}
    for item in sourced:
        reading.matrix.add(item.cell)
        old = latest.get(item.cell.key)
        if old is not None:
            reading.replaced.append(Replacement(item, old))
        latest[item.cell.key] = item
    return reading


def _distinct(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Each file once, in the order first given, and the files given more than once."""
    first: dict[Path, Path] = {}
    repeated: list[Path] = []
    for path in map(Path, paths):
        same = first.setdefault(path.resolve(), path)
        if same is not path and same not in repeated:
            repeated.append(same)
    return list(first.values()), repeated


def describe_replacements(replaced: Sequence[Replacement]) -> list[str]:
    """One line per case whose result changed, and one per pair of files for the cases a file
    repeats with the same result from the same run (a copy of a file given beside it)."""
    same: dict[tuple[Path, Path], int] = {}
    lines = []
    for r in replaced:
        if r.same_result:
            pair = (r.kept.path, r.dropped.path)
            same[pair] = same.get(pair, 0) + 1
        else:
            lines.append(r.describe())
    for (kept, dropped), count in same.items():
        lines.append(f"{count} case(s) of {dropped} are repeated in {kept} with the same results")
    return lines


def _when(item: Item) -> tuple[datetime, tuple[int, int]]:
    return item.timestamp, item.order


def _read_file(
    path: Path, index: int, max_mb: float, ledger: Ledger
) -> Iterator[tuple[Item, dict[str, str], bool]]:
    """Each suite case in one file, with the run metadata it carries (the testsuite's properties
    but the plan; in schema 1 also the run facts of the cases that held them) and whether schema
    1's rules found it. Every testcase's outcome and each testsuite's plan go to `ledger`. The
    file is parsed incrementally, each testcase dropped once read, so memory follows the cases,
    not the XML."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise JUnitError(f"{path}: cannot read this file ({exc})") from exc
    if size > max_mb * 2**20:
        raise JUnitError(
            f"{path}: {size / 2**20:.1f} MiB is over the {max_mb:g} MiB limit for one JUnit XML file;"
            " if it really is one suite run, raise the limit with --max-input-mb"
        )
    stack: list[ET.Element] = []
    stamp, position = _OLDEST, 0
    suite_props: dict[str, str] = {}
    planned = False
    try:
        for event, node in ET.iterparse(path, events=("start", "end")):
            if event == "start":
                if not stack and node.tag not in ("testsuites", "testsuite"):
                    raise JUnitError(
                        f"{path}: not JUnit XML (root element <{node.tag}>, expected <testsuites>)"
                    )
                _check_attributes(path, node)
                if node.tag == "testsuite":
                    stamp, suite_props = _timestamp(path, node.get("timestamp")), {}
                stack.append(node)
                continue
            stack.pop()
            parent = stack[-1] if stack else None
            if node.tag == "properties" and parent is not None and parent.tag == "testsuite":
                listed = [(p.get("name", ""), p.get("value", "")) for p in node.findall("property")]
                planned = ledger.plan(listed) or planned
                suite_props = {k: v for k, v in listed if k not in PLAN_PROPERTIES}
                ledger.facts.setdefault(path, {}).update(suite_props)
            elif node.tag == "testcase":
                case_id = id_of_testcase(node.get("classname", ""), node.get("name", ""))
                ledger.saw(case_id, _outcome(node)[0], path)
                found, legacy = _case(path, node, suite_props, stamp, (index, position))
                for item, meta in found:
                    yield item, meta, legacy
                    position += 1
                if parent is not None:
                    del parent[-1]  # read: free it
    except ET.ParseError as exc:
        raise JUnitError(f"{path}: not a readable JUnit XML file ({exc})") from exc
    except OSError as exc:
        raise JUnitError(f"{path}: cannot read this file ({exc})") from exc
    (ledger.with_plan if planned else ledger.planless).append(path)


def _check_attributes(path: Path, node: ET.Element) -> None:
    for name, value in node.attrib.items():
        if len(value) > MAX_ATTRIBUTE:
            where = node.get("name") or node.tag
            raise JUnitError(
                f"{path}: attribute {name!r} of <{node.tag}> {where!r} holds {len(value):,} characters,"
                f" over the {MAX_ATTRIBUTE:,} the suite ever writes; not a banana-tests JUnit XML file"
            )


def _case(
    path: Path, case: ET.Element, suite_props: dict[str, str], stamp: datetime, order: tuple[int, int]
) -> tuple[list[tuple[Item, dict[str, str]]], bool]:
    """One testcase as suite cases with their run metadata (a measured trend gives its series
    and its outcome; none for another test), and whether it was read by schema 1's rules."""
    name = strip_xdist_group(case.get("name", ""))
    props = _properties(case)
    try:
        record = CaseRecord.read(props)
        legacy = record is None
        if record is None:
            record = legacy_record(name, props)
    except RecordError as exc:
        raise JUnitError(f"{path}: testcase {name!r}: {exc}") from exc
    if record is None:
        return [], False  # another test
    # Schema 1 carried the run's facts on cases; this version writes them on the testsuite.
    meta = (
        {**suite_props, **{k: v for k, v in props.items() if k in RUN_PROPERTIES}} if legacy else suite_props
    )
    outcome, message = _outcome(case)
    if isinstance(record.key, CaseKey):
        # xfail (<skipped>) or strict XPASS (<failure>) under a baseline: the Δ decides
        return [(Sourced(record.cell(outcome, message).as_verdict(), path, stamp, order), meta)], legacy
    # The gate expects only a failed assertion (the verdict): any other failure is no verdict.
    verdict = Outcome.ERROR if outcome is Outcome.FAILED and not _asserted(case) else outcome
    found: list[tuple[Item, dict[str, str]]] = [
        (SourcedOther(record.key, verdict, stamp, order, message), meta)
    ]
    if Field.TREND_SERIES in record.figures:
        try:
            series = TrendSeries.from_properties(dict(record.properties()))
        except (KeyError, ValueError) as exc:
            raise JUnitError(f"{path}: trend testcase {name!r}: {exc}") from exc
        found.append((SourcedTrend(series, stamp, order), {}))
    if record.kind is CaseKind.INVARIANCE:
        found.append((SourcedInvariance(InvarianceOutcome.of(record, verdict), stamp, order), {}))
    if record.kind is CaseKind.SEARCH:
        found.append((SourcedSearch(SearchOutcome.of(record, verdict), stamp, order), {}))
    return found, legacy


def legacy_record(name: str, props: dict[str, str]) -> CaseRecord | None:
    """A testcase as record schema 1 told its cases apart: a trend by its
    `kind` property, a control case by its test's name (it recorded no properties), a Δ case by
    its test's name or, on `banana_case` in a user's test, by the properties it always recorded."""
    if props.get("kind") == CaseKind.TREND.value:
        return CaseRecord.of(CaseKind.TREND, props)
    kind = next((k for prefix, k in LEGACY_PREFIXES.items() if name.startswith(prefix)), None)
    if kind is CaseKind.CONTROL:
        try:
            key = ControlKey.from_test_id(name[name.index("[") + 1 : -1])
        except ValueError as exc:
            raise RecordError(str(exc)) from exc
        return CaseRecord(key)
    if "kind" in props or not (kind is CaseKind.DELTA or props.keys() >= LEGACY_DELTA):
        return None
    return CaseRecord.of(CaseKind.DELTA, props)


def _properties(node: ET.Element) -> dict[str, str]:
    found = node.find("properties")
    if found is None:
        return {}
    return {p.get("name", ""): p.get("value", "") for p in found.findall("property")}


def _outcome(case: ET.Element) -> tuple[Outcome, str]:
    """passed/failed/skipped/error from the testcase's children, with the message if any. Under
    a baseline an xfail is a failure still there, and a strict XPASS a case that now passes."""
    for tag, outcome in (("failure", Outcome.FAILED), ("error", Outcome.ERROR), ("skipped", Outcome.SKIPPED)):
        node = case.find(tag)
        if node is not None:
            message = node.get("message", "") or (node.text or "")
            if tag == "skipped" and node.get("type") == "pytest.xfail":
                return Outcome.FAILED, message
            if tag == "failure" and message.startswith("[XPASS(strict)]"):
                return Outcome.PASSED, message
            return outcome, message
    return Outcome.PASSED, ""


def _asserted(case: ET.Element) -> bool:
    """The case failed on its assertion, or xfailed (which a baseline allows only for that)."""
    failure, skipped = case.find("failure"), case.find("skipped")
    if skipped is not None:
        return skipped.get("type") == "pytest.xfail"
    return failure is not None and failure.get("message", "").startswith(VERDICT_FAILURES)


def _timestamp(path: Path, text: str | None) -> datetime:
    if not text:
        return _OLDEST
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError as exc:
        raise JUnitError(f"{path}: testsuite timestamp {text!r} is not ISO 8601") from exc
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
