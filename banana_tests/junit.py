"""Read JUnit XML written by the suite back into the one failure matrix.

CI splits the suite into shards, runs it under xdist and reruns it, so a report merges many
files. A case seen twice keeps its newest result (the testsuite `timestamp`, then file order),
and every replacement is returned so the caller can say so.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from banana_tests.cases import CaseKey, strip_xdist_group
from banana_tests.matrix import Cell, Matrix
from banana_tests.reports.trends import TrendSeries

CASE_PREFIX = "test_detects_degradation["
# Properties that vary per case; every other testcase property is run metadata (variant, ...).
CASE_PROPERTIES = frozenset(
    {"metric", "seed_image", "step", "run", "delta", "score_reference", "score_step"}
    | {"norm_reference", "norm_step", "runs", "score_cached"}
)
_OLDEST = datetime.min.replace(tzinfo=UTC)


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


@dataclass
class Reading:
    """The merged matrix, the replacements made, the run metadata found in the files, and the
    series of any trend cases (`--trend`), newest per (metric, seed image)."""

    matrix: Matrix
    replaced: list[Replacement] = field(default_factory=list)
    metadata: dict[str, list[str]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    trends: list[TrendSeries] = field(default_factory=list)


def read_junit(paths: Sequence[Path]) -> Reading:
    """Merge the suite's cases from `paths`; newest wins, ties go to the later file."""
    if not paths:
        raise JUnitError("no JUnit XML files given")
    sourced: list[Sourced] = []
    trends: list[SourcedTrend] = []
    metadata: dict[str, set[str]] = {}
    for index, path in enumerate(paths):
        before = len(sourced)
        for item, props in _read_file(Path(path), index):
            if isinstance(item, SourcedTrend):
                trends.append(item)
                continue
            sourced.append(item)
            for name, value in props.items():
                metadata.setdefault(name, set()).add(value)
        if len(sourced) == before:
            raise JUnitError(
                f"{path}: JUnit XML without banana-tests cases (no {CASE_PREFIX}...] testcase "
                "and no testcase with a 'metric' property)"
            )
    sourced.sort(key=lambda s: (s.timestamp, s.order))
    reading = Reading(Matrix(), metadata={k: sorted(v) for k, v in sorted(metadata.items())})
    reading.files = [Path(p) for p in paths]
    newest = {(t.series.metric, t.series.seed_image): t.series for t in sorted(trends, key=_when)}
    reading.trends = [newest[k] for k in sorted(newest)]
    latest: dict[CaseKey, Sourced] = {}
    for item in sourced:
        reading.matrix.add(item.cell)
        old = latest.get(item.cell.key)
        if old is not None:
            reading.replaced.append(Replacement(item, old))
        latest[item.cell.key] = item
    return reading


def _when(item: SourcedTrend) -> tuple[datetime, tuple[int, int]]:
    return item.timestamp, item.order


def _read_file(path: Path, index: int) -> Iterator[tuple[Sourced | SourcedTrend, dict[str, str]]]:
    """Each suite case in one file, with the file's run metadata: suite and non-case properties.
    Trend cases come with no metadata (their Δ cases carry it)."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:
        raise JUnitError(f"{path}: not a readable JUnit XML file ({exc})") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise JUnitError(f"{path}: not JUnit XML (root element <{root.tag}>, expected <testsuites>)")
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    position = 0
    for suite in suites:
        stamp = _timestamp(path, suite.get("timestamp"))
        suite_props = _properties(suite)
        for case in suite.findall("testcase"):
            name = strip_xdist_group(case.get("name", ""))
            props = _properties(case)
            if props.get("kind") == "trend" and "trend_series" in props:
                try:
                    series = TrendSeries.from_properties(props)
                except (KeyError, ValueError) as exc:
                    raise JUnitError(f"{path}: trend testcase {name!r}: {exc}") from exc
                yield SourcedTrend(series, stamp, (index, position)), {}
                position += 1
                continue
            if (not name.startswith(CASE_PREFIX) and "metric" not in props) or "kind" in props:
                continue  # not a Δ case: another test, or a trend case (kind=trend)
            outcome, message = _outcome(case)
            try:
                cell = Cell.from_properties(outcome, props, message)
            except (KeyError, ValueError) as exc:
                raise JUnitError(
                    f"{path}: testcase {name!r} lacks the suite's properties ({exc}); "
                    "was it written by banana-tests with junit_family xunit1 or xunit2?"
                ) from exc
            cell = cell.as_verdict()  # xfail (<skipped>) or strict XPASS (<failure>) under a baseline
            meta = {**suite_props, **{k: v for k, v in props.items() if k not in CASE_PROPERTIES}}
            yield Sourced(cell, path, stamp, (index, position)), meta
            position += 1


def _properties(node: ET.Element) -> dict[str, str]:
    found = node.find("properties")
    if found is None:
        return {}
    return {p.get("name", ""): p.get("value", "") for p in found.findall("property")}


def _outcome(case: ET.Element) -> tuple[str, str]:
    """passed/failed/skipped/error from the testcase's children, with the message if any."""
    for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        node = case.find(tag)
        if node is not None:
            return outcome, node.get("message", "") or (node.text or "")
    return "passed", ""


def _timestamp(path: Path, text: str | None) -> datetime:
    if not text:
        return _OLDEST
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError as exc:
        raise JUnitError(f"{path}: testsuite timestamp {text!r} is not ISO 8601") from exc
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
