"""report.html's sections: the matrix's two tables (the summary per metric, with the oracle's
reference row, and every case, to three decimals, with the runs' spread and the oracle's PSNR and
SSIM), the comparison with the paper, separability and the degradation oracle (each linking its
cases to their rows under "Every case").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from html import escape
from pathlib import Path

from banana_tests.families.degradation.matrix_sections import (
    ORACLE,
    invalid_trials,
    oracle_cells,
    oracle_steps,
    psnr_text,
    separability_rows,
)
from banana_tests.reports.page.markup import Html, Value, anchor, figure, number, table, table_chunks
from banana_tests.reports.paper import MetricComparison, failure_rate
from banana_tests.reports.tables import sorted_cells, summarise
from banana_tests.scoring.oracle import NOT_A_VALID_TRIAL, UNCHANGED_PSNR
from banana_tests.verdicts.gaps import RunSpread, spread
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome

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


def _paper_delta(cell: Cell) -> str:
    """The paper publishes Δ to one decimal."""
    return number(cell.delta, 1, sign=True)


def comparison_html(comparisons: Sequence[MetricComparison]) -> Html:
    """Per metric: cells matched and in agreement, failure rates side by side, and a table of
    the cells that differ, each linked to its row under "Every case"."""
    if not comparisons:
        return "<p>No metric of this run is among the paper's 21 metrics.</p>"
    rows: list[list[Value]] = []
    for c in comparisons:
        agree: Value = ("–", "– (no shared seed image)") if c.by_rate else f"{c.agree}/{c.matched}"
        n = len(c.differences)
        differ: Value = (str(n), f'<a href="#differ-{escape(c.metric)}">{n}</a>') if n else "0"
        rows.append(
            [
                c.metric,
                str(c.matched),
                agree,
                failure_rate(c.run_failed, c.run_verdicts),
                failure_rate(c.paper_failed, c.paper_verdicts),
                differ,
            ]
        )
    headers = [
        "metric",
        "cells matched",
        "agree in sign",
        "run failures",
        "paper failures",
        "cells that differ",
    ]
    parts = [
        "<p>Cells match by metric, seed image and step; they agree when both fail (Δ ≥ 0) or both "
        "pass. Paper Δ as published (one decimal).</p>",
        table(headers, rows),
    ]
    if any(c.by_rate for c in comparisons):
        parts.append(
            "<p>Where no seed image is shared with the paper (the embedded data uses other images), "
            "cells cannot be matched, so only the failure rates compare.</p>"
        )
    for c in comparisons:
        if not c.differences:
            continue
        diff_rows: list[list[Value]] = [
            [
                (d.key.test_id, f'<a href="#{escape(anchor(d.key))}">{escape(d.key.test_id)}</a>'),
                d.run.outcome,
                number(d.run.delta, sign=True),
                d.paper.outcome,
                _paper_delta(d.paper),
            ]
            for d in c.differences
        ]
        parts += [
            f'<h3 id="differ-{escape(c.metric)}">Where {escape(c.metric)} differs from the paper</h3>',
            table(["case", "run", "run Δ", "paper", "paper Δ"], diff_rows),
        ]
    return "\n".join(parts)


def separability_html(matrix: Matrix, png: Path | None) -> Html:
    """Per metric: the AUC of step-k against reference-step images at each step, the clean
    images' range and spread beside it, and the AUC-against-step figure; empty without per-run scores."""
    headers, rows = separability_rows(matrix)
    if not rows:
        return ""
    parts = [
        "<h2>Separability</h2>",
        "<p>Could one global threshold on the normalised score filter step-k images out? The AUC of "
        "telling step-k images from reference-step images, pooled over seed images and runs: 1 = every "
        "clean image scores above every degraded one, 0.5 = chance, below 0.5 the metric prefers the "
        "degraded images. The clean images' range and spread (normalised points) is the content "
        "confound.</p>",
        table(headers, rows),
    ]
    if png is not None:
        parts.append(figure(png))
    return "\n".join(parts)


def oracle_html(matrix: Matrix) -> Html:
    """The oracle's section: per step, how many steps it detected and the PSNR/SSIM ranges, and
    every case that was not a valid trial with its PSNR, linked to its row; empty without it."""
    cells = oracle_cells(matrix)
    if not cells:
        return ""
    steps = [s.row() for s in oracle_steps(cells)]
    parts = [
        "<h2>Degradation oracle (positive control)</h2>",
        f"<p>PSNR and SSIM of each step against the reference step of the same run, by pixels alone: "
        f"the {escape(ORACLE)} row beside the metrics. It detects a step that moved by at least one "
        f"grey level RMS (PSNR &lt; {UNCHANGED_PSNR:.2f} dB); where it does not, the metrics' cases are "
        f"<b>{NOT_A_VALID_TRIAL}</b>, not their failures.</p>",
        table(["step", "detected", "PSNR range (dB)", "SSIM range"], steps),
    ]
    invalid = invalid_trials(matrix)
    if invalid:
        rows: list[list[Value]] = [
            [
                (c.key.test_id, f'<a href="#{escape(anchor(c.key))}">{escape(c.key.test_id)}</a>'),
                psnr_text(c.psnr),
                number(c.delta, sign=True),
            ]
            for c in invalid
        ]
        parts += [
            f"<h3>{len(invalid)} case(s) {NOT_A_VALID_TRIAL}</h3>",
            table(["case", "PSNR per run (dB)", "Δ"], rows),
        ]
    return "\n".join(parts)
