"""The figures' shared look and files (outcome colours, the seed images × metrics grid of cells
with its legend, PNG + SVG saved from one layout), and the figures against the editing step, a
line per metric: failure rate and mean Δ (for runs with too many steps for a heatmap each) and
separability's AUC.

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
from banana_tests.families.degradation.matrix_sections import Separability
from banana_tests.reports.tables import row_label
from banana_tests.verdicts.matrix import VERDICTS, Cell, Matrix, Outcome

SKIPPED = "#d0d0d0"
ERROR = "#f2b84b"
NAN = "#b39ddb"
UNRESOLVED = "#f5e08a"
INVALID = "#c9d6dd"
MISSING = "#ffffff"
Colour = str | tuple[float, float, float, float]
NO_FAILURE = "#f4f4f1"
FRAME = "black"


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "banana-tests"
    return plt


def grid_rows(matrix: Matrix) -> list[str]:
    seen: dict[str, None] = {}
    for key in sorted(matrix.cells, key=lambda k: (k.seed_image, *sort_key(k)[2:])):
        seen.setdefault(row_label(key), None)
    return list(seen)


def save(fig: Any, stem: Path) -> list[Path]:
    """PNG and SVG from one layout: constrained layout runs once here and is then frozen, and
    no `bbox_inches="tight"` (which draws the figure again to measure it); each save then
    draws once (laying out per save cost several times as much: docs/research/speed.md). The figure is
    closed afterwards, saved or not: pyplot keeps every figure it made until then."""
    png, svg = stem.with_name(f"{stem.name}.png"), stem.with_name(f"{stem.name}.svg")  # keeps a dot in it
    try:
        fig.draw_without_rendering()
        fig.set_layout_engine(None)
        fig.savefig(png, dpi=110, metadata={"Software": None})
        fig.savefig(svg, metadata={"Date": None, "Creator": None})
        return [png, svg]
    finally:
        pyplot().close(fig)


def grid_axes(
    plt: Any, rows: list[str], cols: list[str], col_labels: list[str], title: str, xlabel: str = "metric"
) -> tuple[Any, Any]:
    """A seed images × metrics grid. Its title and its row label are the figure's (suptitle,
    supylabel), placed once by the layout: an axes' own title and y label measure every row's
    tick label again at each draw, most of a 60-row heatmap's cost. The x label stays the
    axes' (its few metric labels are cheap to measure), above the legend."""
    fig, ax = plt.subplots(figsize=(3.2 + 0.95 * len(cols), 2.4 + 0.42 * len(rows)), layout="constrained")
    ax.set_xticks(range(len(cols)), col_labels, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel(xlabel)
    ax.yaxis.set_label_coords(0, 0.5)  # no axes y label, so none to place: skips its measuring
    fig.suptitle(title, fontsize=10)
    fig.supylabel("seed image", fontsize=10)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    return fig, ax


GridCell = tuple[int, int, Colour, str, bool]
"""(row, column, fill colour, label, framed) of one drawn cell."""


def draw_cells(ax: Any, cells: Sequence[GridCell]) -> None:
    """The grid's cells as two collections, fills and frames, and a label each. One patch per
    cell was an artist to draw per cell at each of a figure's three draws (layout, PNG, SVG):
    a 20-metric, 60-row heatmap took 8 s. The labels sit inside the axes, so the layout skips
    measuring them."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    fills = [Rectangle((c - 0.5, r - 0.5), 1, 1) for r, c, *_ in cells]
    colours = [colour for _, _, colour, _, _ in cells]
    ax.add_collection(PatchCollection(fills, facecolors=colours, edgecolors="white", linewidths=1))
    frames = [Rectangle((c - 0.45, r - 0.45), 0.9, 0.9) for r, c, _, _, framed in cells if framed]
    if frames:
        ax.add_collection(PatchCollection(frames, facecolors="none", edgecolors=FRAME, linewidths=1.6))
    for r, c, colour, text, framed in cells:
        if text:
            weight = "bold" if framed else "normal"
            ax.text(c, r, text, ha="center", va="center", fontsize=8, color=_ink(colour), fontweight=weight,
                    in_layout=False)  # fmt: skip


def legend(fig: Any, entries: Sequence[tuple[Colour, str, bool]]) -> None:
    """Colour swatches (colour, meaning, framed) under the axes, in as many columns as the
    figure's width holds (an entry takes up to ~2.6 in): the figure is not widened to fit."""
    from matplotlib.patches import Patch

    handles = [
        Patch(
            facecolor=colour, edgecolor=FRAME if framed else "#999999", lw=1.6 if framed else 0.5, label=text
        )
        for colour, text, framed in entries
    ]
    columns = max(1, min(3, len(handles), int(fig.get_figwidth() // 2.6)))
    fig.legend(handles=handles, loc="outside lower center", ncol=columns, fontsize=8, frameon=False)


def _ink(colour: Colour) -> str:
    """White text on dark cells, black on light ones (by relative luminance)."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(colour)
    return "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.45 else "black"


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
