"""The control family's section: its outcomes per metric, read back from JUnit: one row a metric,
one column a distortion (gaussian noise, blur, JPEG), each cell the outcome and, for a failure, the
verdict's figures, so a report shows whether the metric sees the classical distortions it was built
for. `report` puts the table in summary.md and report.html, and the cases in controls.csv.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from banana_tests.families.control import ControlKey
from banana_tests.families.family import Case, Page, Report
from banana_tests.table_text import Writer, table
from banana_tests.verdicts.matrix import Outcome

CSV_HEADER = ("metric", "distortion", "outcome", "message")


@dataclass(frozen=True)
class ControlOutcome:
    """One control case as a run left it (under a baseline an xfail is `failed`), with the first
    line of its failure or error message (`normalised 603.49 ≥ 19.39`), empty when it passed."""

    key: ControlKey
    outcome: Outcome
    message: str = ""

    @classmethod
    def of(cls, key: ControlKey, outcome: Outcome, message: str) -> ControlOutcome:
        first = message.strip().splitlines()[0] if message.strip() else ""
        return cls(key, outcome, first.removeprefix("Failed: "))

    @property
    def text(self) -> str:
        """The cell: `pass`, or `FAIL` / the outcome with its message."""
        word = {Outcome.PASSED: "pass", Outcome.FAILED: "FAIL"}.get(self.outcome, self.outcome.value)
        return f"{word}: {self.message}" if self.message and self.outcome is not Outcome.PASSED else word


def control_rows(outcomes: Sequence[ControlOutcome]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): `metric` and one column per distortion, sorted; a case not run is `-`."""
    distortions = sorted({o.key.distortion for o in outcomes})
    cells = {(o.key.metric, o.key.distortion): o.text for o in outcomes}
    metrics = sorted({o.key.metric for o in outcomes})
    return ["metric", *distortions], [[m, *(cells.get((m, d), "-") for d in distortions)] for m in metrics]


def control_markdown(outcomes: Sequence[ControlOutcome]) -> str:
    """The table with its heading, for summary.md; empty when the run had no control case."""
    if not outcomes:
        return ""
    header, rows = control_rows(outcomes)
    lines = [
        "## Control degradations (the stronger distortion must score worse)",
        "",
        *table(header, rows),
    ]
    return "\n".join(lines)


def write_control_csv(outcomes: Sequence[ControlOutcome], out: TextIO) -> None:
    """controls.csv: one row per case, sorted by metric and distortion."""
    writer = Writer(out)
    writer.writerow(CSV_HEADER)
    for o in sorted(outcomes, key=lambda o: o.key):
        writer.writerow([o.key.metric, o.key.distortion, o.outcome, o.message])


def control_page(outcomes: Sequence[ControlOutcome], out: Path) -> Page:
    """controls.csv and report.html's Control degradations table."""
    from banana_tests.reports.page.markup import table as html_table

    path = out / "controls.csv"
    with path.open("w", encoding="utf-8", newline="") as csv:
        write_control_csv(outcomes, csv)
    header, rows = control_rows(outcomes)
    html = (
        "<h2>Control degradations</h2>",
        "<p>Per metric and distortion: does the stronger of two strengths score worse on every drawn "
        "crop? A failure gives the first failing crop's normalised scores (controls.csv too).</p>",
        html_table(header, rows),
    )
    return Page((path,), html)


@dataclass(frozen=True)
class ControlSection:
    """The control family's section (banana_tests.families.family.Section)."""

    title: str = "banana-tests controls"

    def terminal(self, cases: Sequence[Case]) -> list[str]:
        return []  # the terminal shows each failing control's own line

    def report(self, cases: Sequence[Case], inputs: Sequence[Path]) -> Report:
        newest = {c.key: c for c in cases if isinstance(c.key, ControlKey)}  # oldest first: the newest
        outcomes = [
            ControlOutcome.of(k, Outcome(c.outcome), c.message)
            for k, c in sorted(newest.items(), key=lambda kc: kc[0])
        ]
        return Report(control_markdown(outcomes), write=lambda out: control_page(outcomes, out))


SECTION = ControlSection()
