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
from typing import BinaryIO

from banana_tests.cases import CaseKey, CaseKind, Field, id_of_testcase
from banana_tests.families.family import Case
from banana_tests.reports.junit_testcase import LEGACY_DELTA_PREFIX, JUnitError, outcome_of, testcase_items
from banana_tests.reports.merge_checks import PLAN_PROPERTIES, Ledger
from banana_tests.reports.sourced import OLDEST, OtherOutcome, Read, Replacement, Sourced
from banana_tests.safe_files import NotReadable, open_regular
from banana_tests.verdicts.baseline import Other
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome

MAX_INPUT_MB = 64
"""Default cap on one file's size: about 51,000 failing or 65,000 passing cases (the suite writes ~1.3 and
~1.0 KB a case; benchmarks/bench_scale.py); raise it (`--max-input-mb`) for bigger single files."""
MAX_ATTRIBUTE = 1 << 20
"""Cap on one attribute value (property value, message): the suite writes at most a few KiB."""


@dataclass
class Reading:
    """The merged matrix, the replacements made, the run metadata found in the files, each
    registered family's cases (oldest first, for its section), the newest outcome of each case
    outside the matrix, for baselines, and the newest control outcomes."""

    matrix: Matrix
    replaced: list[Replacement] = field(default_factory=list)
    metadata: dict[str, list[str]] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    repeated: list[Path] = field(default_factory=list)  # files given more than once, read once
    family_cases: dict[CaseKind, list[Case]] = field(default_factory=dict)
    others: dict[Other, Outcome] = field(default_factory=dict)
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
    read: list[Sourced[Read]] = []
    metadata: dict[str, set[str]] = {}
    files, repeated = _distinct(paths)
    ledger = Ledger()
    for index, path in enumerate(files):
        found: dict[bool, list[tuple[Sourced[Read], dict[str, str]]]] = {True: [], False: []}  # by legacy
        for item, props, legacy in _read_file(path, index, max_mb, ledger):
            found[legacy].append((item, props))
        # A file with records is this version's: a legacy-looking testcase in it is another test.
        for item, props in found[False] or found[True]:
            read.append(item)
            for name, value in props.items():
                metadata.setdefault(name, set()).add(value)
        if not (found[False] or found[True] or path in ledger.with_plan):  # a shard dealt nothing has a plan
            raise JUnitError(
                f"{path}: JUnit XML without banana-tests cases (no testcase carries a "
                f"{Field.RECORD!s} property, nor one of an earlier version's such as "
                f"{LEGACY_DELTA_PREFIX}...])"
            )
    read.sort(key=lambda item: item.when)  # oldest first: each kind below keeps this order
    sourced = [c for c in (item.of(Cell) for item in read) if c is not None]
    dates = {item.timestamp for item in sourced if item.timestamp != OLDEST}
    if dates:  # the newest run's start, from its testsuite timestamp
        metadata["date"] = {max(dates).isoformat(sep=" ", timespec="seconds")}
    reading = Reading(Matrix(), metadata={k: sorted(v) for k, v in sorted(metadata.items())})
    reading.files, reading.repeated, reading.ledger = files, repeated, ledger
    for case in (item.value for item in read if isinstance(item.value, Case)):
        reading.family_cases.setdefault(case.key.kind, []).append(case)
    newest_others = {o.key: o for o in (item.value for item in read) if isinstance(o, OtherOutcome)}
    reading.others = {k: o.outcome for k, o in newest_others.items()}
    latest: dict[CaseKey, Sourced[Cell]] = {}
    for cell in sourced:
        reading.matrix.add(cell.value)
        old = latest.get(cell.value.key)
        if old is not None:
            reading.replaced.append(Replacement(cell, old))
        latest[cell.value.key] = cell
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


def _read_file(
    path: Path, index: int, max_mb: float, ledger: Ledger
) -> Iterator[tuple[Sourced[Read], dict[str, str], bool]]:
    """Each suite case in one file, with the run metadata it carries (the testsuite's properties
    but the plan; in schema 1 also the run facts of the cases that held them) and whether schema
    1's rules found it. Every testcase's outcome and each testsuite's plan go to `ledger`. The
    file is parsed incrementally, each testcase dropped once read, so memory follows the cases,
    not the XML."""
    try:
        size = path.stat().st_size
    except FileNotFoundError as exc:
        raise JUnitError(
            f"{path}: no such file (a run writes none when it is killed, its process ends before "
            "pytest finishes, or it has no --junitxml)"
        ) from exc
    except OSError as exc:
        raise JUnitError(f"{path}: cannot read this file ({exc})") from exc
    if size > max_mb * 2**20:
        raise JUnitError(
            f"{path}: {size / 2**20:.1f} MiB is over the {max_mb:g} MiB limit for one JUnit XML file;"
            " if it really is one suite run, raise the limit with --max-input-mb"
        )
    try:
        with open_regular(path, int(max_mb * 2**20)) as handle:  # a FIFO or device: refused, not read
            yield from _parse(path, handle, index, ledger)
    except NotReadable as exc:
        raise JUnitError(f"{path}: cannot read this file ({exc})") from exc


def _parse(
    path: Path, handle: BinaryIO, index: int, ledger: Ledger
) -> Iterator[tuple[Sourced[Read], dict[str, str], bool]]:
    stack: list[ET.Element] = []
    stamp, position = OLDEST, 0
    suite_props: dict[str, str] = {}
    planned = False
    try:
        for event, node in ET.iterparse(handle, events=("start", "end")):
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
                planned = ledger.plan(listed, path) or planned
                suite_props = {k: v for k, v in listed if k not in PLAN_PROPERTIES}
                ledger.facts.setdefault(path, {}).update(suite_props)
            elif node.tag == "testcase":
                case_id = id_of_testcase(node.get("classname", ""), node.get("name", ""))
                ledger.saw(case_id, outcome_of(node)[0], path)
                found, legacy = testcase_items(path, node, suite_props, stamp, (index, position))
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


def _timestamp(path: Path, text: str | None) -> datetime:
    if not text:
        return OLDEST
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError as exc:
        raise JUnitError(f"{path}: testsuite timestamp {text!r} is not ISO 8601") from exc
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)
