"""The paper's published Figure 5: its gaps as matrix cells, a run's matrix compared with them, and
the paper's failure matrix as a ready baseline to gate a run against.

The CSV keeps the paper's text, rounded to 0.1. A failure is a published gap ≥ 0, and "-0.0"
(PaQ-2-PiQ Fog 5, PIQE Sand 5) counts as 0, so a failure: only then do the failure counts
equal the paper's (PaQ-2-PiQ 18, PIQE 22), though the gap was negative before rounding.

Cells are matched by metric, seed image and step. Where a metric shares no seed image with
the paper (the embedded data uses other images), only per-metric failure rates can be set side
by side, and the comparison says so.

`python -m banana_tests.reports.paper [OUT]` rewrites the baseline (default:
fixtures/baselines/paper.json) from the published gaps; a cell fails as the paper counts it.
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass, field
from pathlib import Path

from banana_tests.cases import CaseKey, sort_key
from banana_tests.data import BASELINES, PAPER_CSV
from banana_tests.table_text import Align, table
from banana_tests.verdicts.baseline import write_baseline
from banana_tests.verdicts.matrix import VERDICTS, Cell, Matrix, Outcome
from metrics_under_test.registry import PAPER_METRICS

PAPER_REFERENCE_STEP = 1
_PYIQA_NAME = {m.paper_name: m.pyiqa_name for m in PAPER_METRICS}


def paper_cells(path: Path = PAPER_CSV) -> list[Cell]:
    """One passed/failed cell per (metric, seed image, step) of Figure 5, metrics by pyiqa name."""
    cells = []
    with path.open(newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                metric = _PYIQA_NAME[row["metric"]]
                text = row["normalized_gap"].strip()
                key = CaseKey(metric, row["seed_image"], int(row["step"]))
                delta = float(text)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path}:{line}: not a Figure 5 row {row} ({exc!r})") from exc
            outcome = Outcome.FAILED if delta >= 0 else Outcome.PASSED
            cells.append(Cell(key, outcome, delta, reference_step=PAPER_REFERENCE_STEP))
    return cells


@dataclass(frozen=True)
class Difference:
    key: CaseKey
    run: Cell
    paper: Cell


@dataclass
class MetricComparison:
    """`matched` cells share (metric, seed image, step) with the paper; `agree` of them agree in sign."""

    metric: str
    matched: int = 0
    agree: int = 0
    differences: list[Difference] = field(default_factory=list)
    run_failed: int = 0
    run_verdicts: int = 0
    paper_failed: int = 0
    paper_verdicts: int = 0

    @property
    def by_rate(self) -> bool:
        return self.matched == 0


def _verdicts(matrix: Matrix, metric: str) -> dict[CaseKey, Cell]:
    return {k: c for k, c in matrix.cells.items() if k.metric == metric and c.outcome in VERDICTS}


def compare(run: Matrix, paper: Matrix) -> list[MetricComparison]:
    """One comparison per metric the run and the paper both have. Run cells kept per run are
    compared under the run-mean key, since the paper shows one value per cell."""
    out = []
    for metric in sorted(set(run.metrics) & set(paper.metrics)):
        ours, theirs = _verdicts(run, metric), _verdicts(paper, metric)
        mc = MetricComparison(metric)
        mc.run_failed = sum(c.outcome is Outcome.FAILED for c in ours.values())
        mc.run_verdicts = len(ours)
        mc.paper_failed = sum(c.outcome is Outcome.FAILED for c in theirs.values())
        mc.paper_verdicts = len(theirs)
        for key in sorted(ours, key=sort_key):
            other = theirs.get(CaseKey(key.metric, key.seed_image, key.step))
            if other is None:
                continue
            mc.matched += 1
            if ours[key].outcome is other.outcome:
                mc.agree += 1
            else:
                mc.differences.append(Difference(key, ours[key], other))
        out.append(mc)
    return out


def failure_rate(failed: int, total: int) -> str:
    return f"{failed}/{total} ({100 * failed / total:.0f}%)" if total else "no verdicts"


def _delta(cell: Cell) -> str:
    return "?" if cell.delta is None else f"{cell.delta:+.1f}"


def comparison_markdown(comparisons: list[MetricComparison]) -> str:
    lines = ["### Compared with the paper (Figure 5)", ""]
    if not comparisons:
        return "\n".join([*lines, "No metric of this run is among the paper's 21 metrics.", ""])
    header = ["metric", "cells matched", "agree in sign", "run failures", "paper failures"]
    rows = [
        [
            c.metric,
            c.matched,
            "– (no shared seed image)" if c.by_rate else f"{c.agree}/{c.matched}",
            failure_rate(c.run_failed, c.run_verdicts),
            failure_rate(c.paper_failed, c.paper_verdicts),
        ]
        for c in comparisons
    ]
    lines += table(header, rows, [Align.LEFT] + [Align.RIGHT] * 4)
    if any(c.by_rate for c in comparisons):
        lines += [
            "",
            "Where no seed image is shared with the paper, cells cannot be matched, so only the "
            "failure rates compare.",
        ]
    for c in comparisons:
        if c.differences:
            lines += ["", f"Where {c.metric} differs from the paper:", ""]
            lines += [
                f"- {d.key.test_id}: run {d.run.outcome} (Δ {_delta(d.run)}), "
                f"paper {d.paper.outcome} (Δ {_delta(d.paper)})"
                for d in c.differences
            ]
    return "\n".join(lines) + "\n"


FIXTURE = BASELINES / "paper.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else FIXTURE
    write_baseline(Matrix.of(paper_cells()), out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
