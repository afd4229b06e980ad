"""report.html's two tables of the matrix: the summary per metric (with the oracle's reference
row) and every case, to three decimals, with the runs' spread and the oracle's PSNR and SSIM."""

from __future__ import annotations

import math
from collections.abc import Iterator
from html import escape

from banana_tests.reports.page.markup import Html, Value, anchor, number, table_chunks
from banana_tests.reports.tables import sorted_cells, summarise
from banana_tests.scoring.oracle import NOT_A_VALID_TRIAL
from banana_tests.verdicts.matrix import Cell, Matrix
from banana_tests.verdicts.outcome import Outcome
from banana_tests.verdicts.uncertainty import RunSpread, spread

SHOWN_OUTCOME = {Outcome.INVALID: NOT_A_VALID_TRIAL}
"""An outcome as the page says it; matrix.csv keeps the short name."""


CASE_HEADERS = (
    "metric",
    "seed image",
    "step",
    "Δ",
    "outcome",
    "run Δ range",
    "run Δ sd",
    "PSNR (dB)",
    "SSIM",
    "score (reference)",
    "score (step)",
    "run",
    "reference step",
    "runs",
)


def _run_spread(cell: Cell) -> RunSpread | None:
    """The cell's runs' Δs, when it recorded two or more runs' scores (one run bounds nothing)."""
    deltas = [s - r for r, s in zip(cell.run_norm_references, cell.run_norm_steps, strict=False)]
    if len(deltas) < 2 or len(cell.run_norm_references) != len(cell.run_norm_steps):
        return None
    try:
        return spread(deltas)
    except ValueError:  # a non-finite run score: no interval to show
        return None


def _spread_cells(cell: Cell) -> tuple[Value, str]:
    """The run range [min Δ, max Δ] (its tooltip: each run's Δ and the range's coverage of the
    median Δ) and the runs' standard deviation."""
    s = _run_spread(cell)
    if s is None:
        return "", ""
    low, high = s.interval
    text = f"{low:+.3f} … {high:+.3f}"
    runs = ", ".join(f"{d:+.3f}" for d in s.deltas)
    tip = f"runs Δ {runs}; the range covers the median Δ with {100 * s.confidence:g} %"
    return (text, f'<span title="{escape(tip)}">{escape(text)}</span>'), f"{s.stdev:.3f}"


def _oracle_value(values: tuple[float, ...], places: int) -> Value:
    """The runs' mean, each run's value in its tooltip."""
    if not values:
        return ""
    text = number(math.fsum(values) / len(values), places)
    tip = "runs: " + ", ".join(f"{v:.{places}f}" for v in values)
    return text, f'<span title="{escape(tip)}">{escape(text)}</span>'


def case_rows(matrix: Matrix) -> Iterator[tuple[list[Value], str, str]]:
    """Every cell to three decimals, with its outcome and anchor; the run column says "mean" for
    cells averaged over runs. Made one at a time: 118,800 rows held at once were ~100 MiB."""
    for c in sorted_cells(matrix):
        k = c.key
        run_range, run_sd = _spread_cells(c)
        yield (
            [
                k.metric,
                k.seed_image,
                str(k.step),
                number(c.delta, sign=True),
                SHOWN_OUTCOME.get(c.outcome, c.outcome),
                run_range,
                run_sd,
                _oracle_value(c.psnr, 2),
                _oracle_value(c.ssim, 3),
                number(c.score_reference),
                number(c.score_step),
                "mean" if k.run is None else str(k.run),
                "" if c.reference_step is None else str(c.reference_step),
                "" if c.runs is None else str(c.runs),
            ],
            c.outcome,
            anchor(k),
        )


def summary_table(matrix: Matrix) -> Html:
    """Per metric: every outcome counted apart (unresolved and not valid trials are neither
    passes nor failures), then the oracle's reference row."""
    headers = ["metric", "cases", "passed", "failed", "unresolved", "not valid trial", "skipped", "error"]
    rows = (
        (
            [
                f"{s.metric} (reference)" if s.reference else s.metric,
                *(str(n) for n in (s.cases, s.passed, s.failed, s.unresolved, s.invalid, s.skipped, s.error)),
                number(s.worst_delta, sign=True),
            ],
            "reference" if s.reference else "",
            "",
        )
        for s in summarise(matrix)
    )
    return "".join(table_chunks([*headers, "worst Δ"], rows))
