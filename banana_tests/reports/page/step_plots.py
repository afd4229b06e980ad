"""Figures against the editing step, a line per metric: failure rate and mean Δ (for runs with
too many steps for a heatmap each) and separability's AUC."""

from __future__ import annotations

import math
from pathlib import Path

from banana_tests.reports.matrix_sections import Separability
from banana_tests.reports.page.figure_style import pyplot, save
from banana_tests.verdicts.matrix import Cell, Matrix
from banana_tests.verdicts.outcome import VERDICTS, Outcome


def step_summary(matrix: Matrix, stem: Path) -> list[Path]:
    """For runs with many steps: per metric, the share of seed images that fail and the mean Δ
    against step, where a heatmap per step would be too many figures to read."""
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(8.0, 6.4), layout="constrained")
    colours = plt.get_cmap("tab10")
    groups: dict[str, dict[int, list[Cell]]] = {metric: {} for metric in matrix.metrics}
    for cell in matrix.cells.values():  # one pass for every metric
        if cell.outcome in VERDICTS:
            groups[cell.key.metric].setdefault(cell.key.step, []).append(cell)
    for i, (metric, by_step) in enumerate(groups.items()):
        steps = sorted(by_step)
        rate = [100 * sum(c.outcome is Outcome.FAILED for c in by_step[s]) / len(by_step[s]) for s in steps]
        mean = []
        for s in steps:
            finite = [c.delta for c in by_step[s] if c.delta is not None and math.isfinite(c.delta)]
            mean.append(sum(finite) / len(finite) if finite else math.nan)
        style = {"color": colours(i % 10), "marker": "o", "markersize": 2.5, "lw": 1.2}
        top.plot(steps, rate, label=metric, **style)
        bottom.plot(steps, mean, **style)
    top.set_ylabel("failing seed images (%)")
    top.set_ylim(-3, 103)
    bottom.axhline(0, color="black", lw=0.8)
    bottom.set_ylabel("mean Δ (≥ 0: missed on average)")
    bottom.set_xlabel("editing step")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.legend(fontsize=8, loc="upper left", ncol=min(4, len(matrix.metrics)))
    n = len(matrix.steps)
    top.set_title(f"Per step over {n} steps: failure rate (Δ ≥ 0) and mean Δ per metric", fontsize=10)
    return save(fig, stem)


def separability_figure(table: dict[str, list[Separability]], stem: Path) -> list[Path]:
    """AUC of step-k against reference-step images against step, a line per metric, with
    chance (0.5) dashed: where a metric's line sits under it, a threshold keeps the degraded
    images rather than the clean ones."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
    colours = plt.get_cmap("tab10")
    steps = sorted({r.step for rows in table.values() for r in rows})
    for i, (metric, rows) in enumerate(table.items()):
        ax.plot(
            [r.step for r in rows],
            [r.auc for r in rows],
            marker="o",
            lw=1.4,
            color=colours(i % 10),
            label=metric,
        )
    ax.axhline(0.5, color="black", lw=0.8, ls="--", label="chance (0.5)")
    ax.set_ylim(0, 1)
    if len(steps) <= 12:
        ax.set_xticks(steps)
    ax.set_xlabel("editing step k")
    ax.set_ylabel("AUC, step k against clean")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left", ncol=min(4, len(table) + 1))
    ax.set_title("Separability: could one threshold filter step-k images?", fontsize=10)
    return save(fig, stem)
