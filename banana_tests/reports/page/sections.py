"""report.html's sections beyond the matrix: the comparison with the paper, separability, the
degradation oracle (each linking its cases to their rows under "Every case")."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from banana_tests.reports.compare import MetricComparison, failure_rate
from banana_tests.reports.matrix_sections import (
    ORACLE,
    invalid_trials,
    oracle_cells,
    oracle_steps,
    psnr_text,
    separability_rows,
)
from banana_tests.reports.page.markup import Html, Value, anchor, figure, number, table
from banana_tests.scoring.oracle import NOT_A_VALID_TRIAL, UNCHANGED_PSNR
from banana_tests.verdicts.matrix import Cell, Matrix


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
