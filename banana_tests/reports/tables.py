"""The matrix as rows: `matrix.csv`, the per-metric summary and its Markdown for CI job summaries."""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from banana_tests.cases import CaseKey, sort_key
from banana_tests.families.degradation.matrix_sections import ORACLE, OracleCell, oracle_cells, oracle_counts
from banana_tests.table_text import Align, Writer, table
from banana_tests.verdicts.matrix import VERDICTS, Cell, Matrix

CSV_COLUMNS = (
    "metric",
    "seed_image",
    "step",
    "delta",
    "outcome",
    "score_reference",
    "score_step",
    "run",
    "reference_step",
    "runs",
)
SUMMARY_HEADER = ("metric", "cases", "failed", "skipped", "error", "unresolved", "not valid trial", "worst Δ")
NUMBERS = [Align.RIGHT] * (len(SUMMARY_HEADER) - 1)


def row_label(key: CaseKey) -> str:
    """A figure or table row: the seed image, and the run when cases are per run."""
    return key.seed_image if key.run is None else f"{key.seed_image} run{key.run}"


def sorted_cells(matrix: Matrix) -> list[Cell]:
    return [matrix.cells[k] for k in sorted(matrix.cells, key=sort_key)]


def _text(value: float | int | None) -> str:
    """Empty for missing, `repr` for floats so every digit (and the sign of -0.0) survives."""
    return "" if value is None else repr(value)


def csv_rows(matrix: Matrix) -> Iterator[dict[str, str]]:
    """A row per cell, made as read: the CSV is written a row at a time."""
    for c in sorted_cells(matrix):
        k = c.key
        yield (
            {
                "metric": k.metric,
                "seed_image": k.seed_image,
                "step": str(k.step),
                "delta": _text(c.delta),
                "outcome": c.outcome,
                "score_reference": _text(c.score_reference),
                "score_step": _text(c.score_step),
                "run": _text(k.run),
                "reference_step": _text(c.reference_step),
                "runs": _text(c.runs),
            }
        )


def matrix_csv(matrix: Matrix) -> str:
    """Sorted and stable: the same cells give the same bytes, whatever files they came from."""
    out = io.StringIO()
    write_csv(matrix, out)
    return out.getvalue()


def write_csv(matrix: Matrix, out: TextIO) -> None:
    """`matrix_csv` into `out` as it is made, so 118,800 rows are never all in memory at once."""
    writer = Writer(out)
    writer.writerow(CSV_COLUMNS)
    writer.writerows([row[c] for c in CSV_COLUMNS] for row in csv_rows(matrix))


@dataclass(frozen=True)
class MetricSummary:
    """One metric's outcome counts and its worst gap (the largest Δ among its verdicts)."""

    metric: str
    cases: int
    passed: int
    failed: int
    skipped: int
    error: int
    worst_delta: float | None
    unresolved: int = 0  # the runs disagree in sign (--banana-strict-runs): never a pass
    invalid: int = 0  # not a valid trial: the step did not change (scoring.oracle)
    reference: bool = False  # the oracle's row, not a metric's

    @classmethod
    def of_oracle(cls, cells: list[OracleCell]) -> MetricSummary:
        """The oracle's reference row: a step it saw change passes, an unchanged one fails."""
        t = oracle_counts(cells)
        return cls(ORACLE, len(cells), t.passed, t.failed, 0, 0, None, reference=True)

    def cells(self) -> list[object]:
        """summary.md's row: the counts and the worst Δ (empty without one)."""
        worst = "" if self.worst_delta is None else f"{self.worst_delta:+.3f}"
        name = f"{self.metric} (reference)" if self.reference else self.metric
        return [name, self.cases, self.failed, self.skipped, self.error, self.unresolved, self.invalid, worst]


def summarise(matrix: Matrix) -> list[MetricSummary]:
    """One row per metric, one pass over the cells for all of them (one per metric was 20
    passes at 20 metrics), then the oracle's reference row when the cells recorded it."""
    tally = matrix.tally()
    by_metric: dict[str, list[float]] = {metric: [] for metric in matrix.metrics}
    for k, c in matrix.cells.items():
        if c.delta is not None and c.outcome in VERDICTS:
            by_metric[k.metric].append(c.delta)
    out = []
    for metric, deltas in by_metric.items():
        t = tally[(metric, None)]
        # a nan Δ is a failure without a size: the worst Δ is nan only when every Δ is
        worst = max((d for d in deltas if not math.isnan(d)), default=math.nan if deltas else None)
        cases = t.passed + t.failed + t.skipped + t.error + t.unresolved + t.invalid  # all its cells
        out.append(
            MetricSummary(
                metric, cases, t.passed, t.failed, t.skipped, t.error, worst, t.unresolved, t.invalid
            )
        )
    oracle = oracle_cells(matrix)
    if oracle:
        out.append(MetricSummary.of_oracle(oracle))
    return out


def summary_markdown(matrix: Matrix, title: str = "banana-tests failure matrix") -> str:
    """A short table per metric; a failure is Δ ≥ 0 (the metric missed the degradation)."""
    rows = summarise(matrix)
    lines = [
        f"### {title}",
        "",
        "A case fails when Δ ≥ 0: the metric scored the edited image no worse than the reference step.",
        "Unresolved cases (--banana-strict-runs: the runs disagree in sign) and cases that are not a",
        "valid trial (the step did not change) are neither passes nor failures.",
    ]
    if any(s.reference for s in rows):
        lines.append(
            f"The {ORACLE} row is the positive control: it fails a step only where it did not change."
        )
    lines += ["", *table(SUMMARY_HEADER, [s.cells() for s in rows], [Align.LEFT, *NUMBERS])]
    return "\n".join(lines) + "\n"
