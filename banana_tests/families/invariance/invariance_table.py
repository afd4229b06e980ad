"""The invariance family's section: its outcomes per metric, read back from JUnit: one row a
metric, one column a check (batch, repeat, png, shift, resize), each cell the outcome with its
measured change against its tolerance, so a reader sees how far a metric is from failing, not only
whether it did. `report` puts the table in summary.md and report.html; the terminal has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.cases import Field
from banana_tests.families.family import Case, Page, Report
from banana_tests.families.invariance import Invariance, InvarianceKey
from banana_tests.table_text import table
from banana_tests.verdicts.matrix import VERDICTS, Outcome
from banana_tests.verdicts.record import CaseRecord


@dataclass(frozen=True)
class InvarianceOutcome:
    """One invariance case as a run left it: passed, failed (under a baseline: still failing),
    skipped or error, with its change and tolerance in normalised points when it measured them."""

    key: InvarianceKey
    outcome: Outcome
    change: float | None = None
    tolerance: float | None = None
    raised: str | None = None  # what the metric raised on the crops, when it could not be checked

    @classmethod
    def of(cls, record: CaseRecord, outcome: Outcome) -> InvarianceOutcome:
        """From an invariance record (ValueError for another kind)."""
        if not isinstance(record.key, InvarianceKey):
            raise ValueError(f"a {record.kind.value} case is no invariance outcome")
        change, tolerance = record.number(Field.CHANGE), record.number(Field.TOLERANCE)
        return cls(record.key, outcome, change, tolerance, record.figures.get(Field.RAISED))

    @property
    def text(self) -> str:
        """The cell: `pass 0.17 ≤ 0.3`, `FAIL 4.1 > 3.9`, `FAIL cannot run: LinAlgError`, or the
        bare outcome when nothing was measured."""
        if self.raised:
            word = "FAIL" if self.outcome is Outcome.FAILED else self.outcome.value
            return f"{word} cannot run: {self.raised.partition(':')[0]}"
        if self.change is None or self.tolerance is None:
            return self.outcome.value
        word, sign = ("FAIL", ">") if self.outcome is Outcome.FAILED else ("pass", "≤")
        if self.outcome not in VERDICTS:
            word, sign = self.outcome.value, "vs"
        return f"{word} {self.change:.3g} {sign} {self.tolerance:.3g}"


def checks(outcomes: Iterable[InvarianceOutcome]) -> list[str]:
    """The columns: the known checks in their order, then any other (a newer version's) by name."""
    found = {o.key.check for o in outcomes}
    known = [i.value for i in Invariance if i.value in found]
    return known + sorted(found - set(known))


def invariance_rows(outcomes: Sequence[InvarianceOutcome]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): `metric` and one column per check; a check a metric did not run is `-`."""
    columns = checks(outcomes)
    cells = {(o.key.metric, o.key.check): o.text for o in outcomes}
    metrics = sorted({o.key.metric for o in outcomes})
    rows = [[m, *(cells.get((m, c), "-") for c in columns)] for m in metrics]
    return ["metric", *columns], rows


def invariance_markdown(outcomes: Sequence[InvarianceOutcome]) -> str:
    """The table with its heading, for summary.md; empty when the run had no invariance case."""
    if not outcomes:
        return ""
    header, rows = invariance_rows(outcomes)
    lines = [
        "## Invariance (change in normalised points against tolerance)",
        "",
        *table(header, rows),
    ]
    return "\n".join(lines)


def invariance_html(outcomes: Sequence[InvarianceOutcome]) -> str:
    """The invariance table summary.md has, one row a metric and a column a check; empty without
    invariance cases."""
    from banana_tests.reports.page.markup import table as html_table

    if not outcomes:
        return ""
    header, rows = invariance_rows(outcomes)
    return "\n".join(
        [
            "<h2>Invariance</h2>",
            "<p>Does a metric give an image the same score whatever happens around it (batching, a "
            "repeat, a PNG round trip, a shift, a resize)? Each cell: the change in normalised points "
            "against its tolerance.</p>",
            html_table(header, rows),
        ]
    )


def outcome_of(case: Case) -> InvarianceOutcome:
    record = CaseRecord.read(case.props)
    assert record is not None
    return InvarianceOutcome.of(record, Outcome(case.outcome))


@dataclass(frozen=True)
class InvarianceSection:
    """The invariance family's section (banana_tests.families.family.Section)."""

    title: str = "banana-tests invariance"

    def terminal(self, cases: Sequence[Case]) -> list[str]:
        return []  # the terminal shows each failing check's own line

    def report(self, cases: Sequence[Case], inputs: Sequence[Path]) -> Report:
        newest = {o.key: o for o in map(outcome_of, cases)}  # oldest first: the newest of each case
        outcomes = [newest[k] for k in sorted(newest)]
        page = Page(html=(invariance_html(outcomes),))
        return Report(invariance_markdown(outcomes), write=lambda out: page)


SECTION = InvarianceSection()
