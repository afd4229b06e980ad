"""The control family's outcomes per metric, read back from JUnit: one row a metric, one column a
distortion (gaussian noise, blur, JPEG), each cell the outcome and, for a failure, the verdict's
figures, so a report shows whether the metric sees the classical distortions it was built for.

`report` puts the markdown table in summary.md, the rows in report.html and controls.csv.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from banana_tests.table_text import Writer, table
from banana_tests.verdicts.baseline import ControlKey
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
