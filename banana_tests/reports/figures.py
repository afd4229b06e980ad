"""The paper's figures from a matrix: a Δ heatmap per step (Figure 5) and failure counts (Figure 6).

matplotlib is imported inside the functions, with the Agg backend, so the CLI stays light and
works without a display. SVGs carry no date and a fixed hash salt, so the same cells give the
same file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from banana_tests.cases import sort_key
from banana_tests.matrix import Cell, Matrix, OutcomeCounts
from banana_tests.reports.tables import row_label

SKIPPED = "#d0d0d0"
ERROR = "#f2b84b"
NAN = "#b39ddb"
MISSING = "#ffffff"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "banana-tests"
    return plt


def _rows(matrix: Matrix) -> list[str]:
    seen: dict[str, None] = {}
    for key in sorted(matrix.cells, key=lambda k: (k.seed_image, *sort_key(k)[2:])):
        seen.setdefault(row_label(key), None)
    return list(seen)


def _save(fig: Any, stem: Path) -> list[Path]:
    png, svg = stem.with_suffix(".png"), stem.with_suffix(".svg")
    fig.savefig(png, dpi=110, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(svg, bbox_inches="tight", metadata={"Date": None, "Creator": None})
    return [png, svg]


def _grid(matrix: Matrix, cells: Sequence[Cell]) -> tuple[list[str], list[str], dict[tuple[str, str], Cell]]:
    rows, cols = _rows(matrix), matrix.metrics
    return rows, cols, {(row_label(c.key), c.key.metric): c for c in cells}


def _axes(plt: Any, rows: list[str], cols: list[str], col_labels: list[str]) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=(2.2 + 0.95 * len(cols), 1.6 + 0.42 * len(rows)))
    ax.set_xticks(range(len(cols)), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    return fig, ax


def gap_heatmap(matrix: Matrix, step: int, stem: Path, limit: float | None = None) -> list[Path]:
    """Seed images × metrics at one step, Δ written in each cell.

    Colours diverge at 0 (blue: detected, Δ < 0; red: missed, Δ ≥ 0) and failed cells get a
    black frame, so a Δ of +0.1 stands out as much as one of +20. Skipped cells are grey.
    `limit` fixes the colour range so that heatmaps of several steps compare.
    """
    plt = _pyplot()
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    cells = [c for c in matrix.cells.values() if c.key.step == step]
    rows, cols, grid = _grid(matrix, cells)
    limit = limit or colour_limit(matrix)
    cmap, norm = plt.get_cmap("RdBu_r"), Normalize(-limit, limit)
    fig, ax = _axes(plt, rows, cols, cols)
    for (r, row), (c, col) in ((a, b) for a in enumerate(rows) for b in enumerate(cols)):
        cell = grid.get((row, col))
        colour, text, ink = MISSING, "", "black"
        if cell is not None and cell.outcome == "skipped":
            colour, text = SKIPPED, "s"
        elif cell is not None and cell.outcome == "error":
            colour, text = ERROR, "E"
        elif cell is not None and cell.delta is not None and math.isnan(cell.delta):
            colour, text = NAN, "nan"
        elif cell is not None and cell.delta is not None:
            colour, text = cmap(norm(cell.delta)), f"{cell.delta:.1f}"
            ink = "white" if abs(cell.delta) > 0.6 * limit else "black"
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=colour, edgecolor="white", lw=1))
        if cell is not None and cell.outcome == "failed":
            ax.add_patch(Rectangle((c - 0.45, r - 0.45), 0.9, 0.9, fill=False, edgecolor="black", lw=1.6))
        ax.text(
            c,
            r,
            text,
            ha="center",
            va="center",
            fontsize=8,
            color=ink,
            fontweight="bold" if cell is not None and cell.outcome == "failed" else "normal",
        )
    mappable = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(mappable, ax=ax, fraction=0.025, pad=0.02, extend="both", label="Δ (normalised score gap)")
    failed = sum(c.outcome == "failed" for c in cells)
    verdicts = sum(c.outcome in ("passed", "failed") for c in cells)
    ax.set_title(
        f"Δ{step} = norm(step {step}) − norm(reference); red and framed: Δ ≥ 0, missed ({failed}/{verdicts})",
        fontsize=10,
    )
    try:
        return _save(fig, stem)
    finally:
        plt.close(fig)


def colour_limit(matrix: Matrix) -> float:
    """The 90th percentile of |Δ|: a few huge gaps saturate instead of washing out the rest."""
    import numpy as np

    gaps = [abs(c.delta) for c in matrix.cells.values() if c.delta is not None and math.isfinite(c.delta)]
    return float(np.percentile(gaps, 90)) if gaps and max(gaps) > 0 else 1.0


def failure_counts(matrix: Matrix, stem: Path) -> list[Path]:
    """Failing steps per (seed image, metric), out of the steps with a verdict, with totals; the
    labels are the terminal matrix's, so errors show beside the failures."""
    plt = _pyplot()
    from matplotlib.patches import Rectangle

    rows, cols = _rows(matrix), matrix.metrics
    steps = max(1, len(matrix.steps))
    cmap = plt.get_cmap("Reds")
    labels = []
    for col in cols:
        labels.append(f"{col} ({matrix.counts(col).label()})")
    fig, ax = _axes(plt, rows, cols, labels)
    counts: dict[tuple[str, str], list[Cell]] = {}
    for cell in matrix.cells.values():
        counts.setdefault((row_label(cell.key), cell.key.metric), []).append(cell)
    for (r, row), (c, col) in ((a, b) for a in enumerate(rows) for b in enumerate(cols)):
        group = counts.get((row, col), [])
        tally = OutcomeCounts()
        for x in group:
            tally.add(x.outcome)
        failed, verdicts, text = tally.failed, tally.passed + tally.failed, tally.label()
        if not verdicts:
            colour = (ERROR if tally.error else SKIPPED) if group else MISSING
        else:
            colour = cmap(0.08 + 0.8 * failed / steps)
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=colour, edgecolor="white", lw=1))
        ink = "white" if verdicts and failed / steps > 0.6 else "black"
        ax.text(c, r, text, ha="center", va="center", fontsize=8, color=ink)
    ax.set_title("Failing steps (Δ ≥ 0) per seed image and metric; column: failures / verdicts", fontsize=10)
    try:
        return _save(fig, stem)
    finally:
        plt.close(fig)


def render_figures(matrix: Matrix, out: Path) -> list[Path]:
    """Every figure for `matrix` into `out`: gaps_step<i>.png/.svg and failure_counts.png/.svg."""
    limit = colour_limit(matrix)
    paths: list[Path] = []
    for step in matrix.steps:
        paths += gap_heatmap(matrix, step, out / f"gaps_step{step}", limit)
    paths += failure_counts(matrix, out / "failure_counts")
    return paths
