"""The paper's figures from a matrix: a Δ heatmap per step (Figure 5), failure counts (Figure 6)
and, for runs with many steps, one step summary instead of a heatmap per step.

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
from banana_tests.reports.oracle_table import ORACLE, OracleCell, oracle_cells
from banana_tests.reports.tables import row_label
from banana_tests.scoring.oracle import UNCHANGED_PSNR
from banana_tests.verdicts.matrix import Cell, Matrix, OutcomeCounts
from banana_tests.verdicts.outcome import VERDICTS, Outcome
from banana_tests.verdicts.separability import Separability

SKIPPED = "#d0d0d0"
ERROR = "#f2b84b"
NAN = "#b39ddb"
UNRESOLVED = "#f5e08a"
INVALID = "#c9d6dd"
MISSING = "#ffffff"
Colour = str | tuple[float, float, float, float]
NO_FAILURE = "#f4f4f1"
FRAME = "black"
PAPER_STEPS = (5, 10, 20)
MAX_HEATMAPS = 6
"""More steps than this (e.g. `--steps all`) get a step summary and heatmaps of a few steps only."""
_SIGN_GAP = 0.18
"""How much of RdBu's pale middle is cut out: the smallest Δ still shows its sign's colour."""


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
    """PNG and SVG from one layout: constrained layout runs once here and is then frozen, and
    no `bbox_inches="tight"` (which draws the figure again to measure it); each save then
    draws once. Laying out per save made a 60-row heatmap cost 3.6 s instead of ~1."""
    png, svg = stem.with_name(f"{stem.name}.png"), stem.with_name(f"{stem.name}.svg")  # keeps a dot in it
    fig.draw_without_rendering()
    fig.set_layout_engine(None)
    fig.savefig(png, dpi=110, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    return [png, svg]


def _axes(
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


def _cells(ax: Any, cells: Sequence[GridCell]) -> None:
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


def _legend(fig: Any, entries: Sequence[tuple[Colour, str, bool]]) -> None:
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


def gap_colours() -> Any:
    """RdBu_r with its pale middle cut out: blue below 0, red from 0 up, so a missed cell at
    Δ = +0.2 is as plainly red as its sign, not near-white; larger |Δ| only darkens it."""
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    base = colormaps["RdBu_r"]
    blue = base(np.linspace(0.0, 0.5 - _SIGN_GAP, 128))
    red = base(np.linspace(0.5 + _SIGN_GAP, 1.0, 128))
    return ListedColormap(np.vstack([blue, red]), name="banana_gaps")


def colour_limit(matrix: Matrix) -> float:
    """The largest |Δ| of the run, rounded up to a whole number: the scale is symmetric around 0
    and clips nothing, and one limit for every step keeps the step heatmaps comparable."""
    gaps = [abs(c.delta) for c in matrix.cells.values() if c.delta is not None and math.isfinite(c.delta)]
    return float(math.ceil(max(gaps))) if gaps and max(gaps) > 0 else 1.0


def gap_heatmap(matrix: Matrix, step: int, stem: Path, limit: float | None = None) -> list[Path]:
    """Seed images × metrics at one step, Δ written in each cell to one decimal (as the paper).

    Colours diverge at 0 (blue: detected, Δ < 0; red: missed, Δ ≥ 0) and failed cells get a
    black frame. Skipped cells are grey. `limit` fixes the colour range so that heatmaps of
    several steps compare.
    """
    plt = _pyplot()
    from matplotlib.colors import Normalize

    cells = [c for c in matrix.cells.values() if c.key.step == step]
    rows, cols = _rows(matrix), matrix.metrics
    grid = {(row_label(c.key), c.key.metric): c for c in cells}
    oracle = {row_label(o.key): o for o in oracle_cells(matrix) if o.key.step == step}
    limit = limit or colour_limit(matrix)
    cmap, norm = gap_colours(), Normalize(-limit, limit)
    counts = OutcomeCounts()
    for each in cells:
        counts.add(each.outcome)
    verdicts = counts.passed + counts.failed
    title = f"Δ{step} = norm(step {step}) − norm(reference): {counts.failed} of {verdicts} missed"
    if counts.unresolved or counts.invalid:
        title += f"; {counts.unresolved} unresolved, {counts.invalid} not valid trials"
    labels = [*cols, f"{ORACLE} (dB)"] if oracle else cols
    fig, ax = _axes(plt, rows, labels, labels, title)
    shown = dict.fromkeys(("skipped", "error", "nan", "unresolved", "invalid", "missing"), False)
    drawn: list[GridCell] = []
    for (r, row), (c, col) in ((a, b) for a in enumerate(rows) for b in enumerate(cols)):
        cell = grid.get((row, col))
        colour: Colour = MISSING
        text = ""
        if cell is None:
            shown["missing"] = True
        elif cell.outcome in _OUTCOME_STYLE:
            colour, text = _OUTCOME_STYLE[cell.outcome]
            shown[cell.outcome.value] = True
            if cell.outcome is Outcome.UNRESOLVED and cell.delta is not None:
                text = f"U {cell.delta:+.1f}"  # the run mean, whose sign the runs do not all share
        elif cell.delta is not None and math.isnan(cell.delta):
            colour, text, shown["nan"] = NAN, "nan", True
        elif cell.delta is not None:
            colour, text = cmap(norm(cell.delta)), f"{cell.delta:.1f}"
        drawn.append((r, c, colour, text, cell is not None and cell.outcome is Outcome.FAILED))
    if oracle:
        drawn += _oracle_column(rows, len(cols), oracle, cmap)
        ax.axvline(len(cols) - 0.5, color=FRAME, lw=1.2)
    _cells(ax, drawn)
    mappable = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(
        mappable, ax=ax, fraction=0.03, pad=0.02, label=f"Δ{step} (scale ±{limit:g}: largest |Δ| of the run)"
    )
    entries: list[tuple[Colour, str, bool]] = [
        (cmap(0.75), "red, framed: missed (Δ ≥ 0), the case fails", True),
        (cmap(0.25), "blue: detected (Δ < 0)", False),
        (SKIPPED, "grey (s): skipped", False),
    ]
    extra = {"error": (ERROR, "orange (E): error"), "nan": (NAN, "purple: Δ is nan (fails)"),
             "unresolved": (UNRESOLVED, "yellow (U, run mean Δ): runs disagree in sign"),
             "invalid": (INVALID, f"blue-grey (I): not a valid trial (PSNR ≥ {UNCHANGED_PSNR:.2f} dB)"),
             "missing": (MISSING, "white: no case")}  # fmt: skip
    entries += [(*extra[name], False) for name in extra if shown[name]]
    if oracle:
        entries.append((ORACLE_CHANGED, f"last column: {ORACLE}, mean dB against the reference", False))
    _legend(fig, entries)
    try:
        return _save(fig, stem)
    finally:
        plt.close(fig)


_OUTCOME_STYLE: dict[Outcome, tuple[Colour, str]] = {
    Outcome.SKIPPED: (SKIPPED, "s"),
    Outcome.ERROR: (ERROR, "E"),
    Outcome.UNRESOLVED: (UNRESOLVED, "U"),
    Outcome.INVALID: (INVALID, "I"),
}
"""Cells without a Δ verdict: their fill and label. Unresolved is never a pass's blue."""
ORACLE_CHANGED = "#d9e6f5"
"""The oracle column's fill where the step changed: pale, apart from the Δ scale's blues."""


def _oracle_column(rows: list[str], column: int, oracle: dict[str, OracleCell], cmap: Any) -> list[GridCell]:
    """The oracle's reference column: its mean PSNR (dB) per row; red and framed where the step
    did not change (every metric's case there is not a valid trial)."""
    drawn: list[GridCell] = []
    for r, row in enumerate(rows):
        cell = oracle.get(row)
        if cell is None:
            drawn.append((r, column, MISSING, "", False))
        elif cell.detected:
            drawn.append((r, column, ORACLE_CHANGED, f"{cell.mean_psnr:.1f}", False))
        else:
            drawn.append((r, column, cmap(0.75), f"{cell.mean_psnr:.1f}", True))
    return drawn


def failure_counts(matrix: Matrix, stem: Path) -> list[Path]:
    """Failing steps per (seed image, metric), out of the steps with a verdict, with totals; the
    labels are the terminal matrix's, so errors show beside the failures. No failure is neutral,
    so only cells that failed somewhere draw the eye."""
    plt = _pyplot()
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap, Normalize

    rows, cols = _rows(matrix), matrix.metrics
    cmap = ListedColormap(colormaps["Reds"](np.linspace(0.25, 0.95, 256)), name="banana_failures")
    totals = matrix.tally()
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for cell in matrix.cells.values():
        groups.setdefault((row_label(cell.key), cell.key.metric), []).append(cell.outcome)
    oracle = oracle_cells(matrix)
    if oracle:  # the reference column: steps it did not see change / steps
        for o in oracle:
            groups.setdefault((row_label(o.key), ORACLE), []).append(o.outcome)
            totals[(ORACLE, None)].add(o.outcome)
        cols = [*cols, ORACLE]
    labels = [f"{col} ({totals[(col, None)].label()})" for col in cols]
    title = "Failing steps (Δ ≥ 0) per seed image and metric"
    fig, ax = _axes(
        plt, rows, cols, labels, title, "metric (failing steps / steps with a verdict, all seed images)"
    )
    if oracle:
        ax.axvline(len(cols) - 1.5, color=FRAME, lw=1.2)
    drawn: list[GridCell] = []
    for (r, row), (c, col) in ((a, b) for a in enumerate(rows) for b in enumerate(cols)):
        group = groups.get((row, col), [])
        tally = OutcomeCounts()
        for outcome in group:
            tally.add(outcome)
        failed, verdicts = tally.failed, tally.passed + tally.failed
        colour: Colour
        if not verdicts:
            fallback = (
                ERROR
                if tally.error
                else UNRESOLVED
                if tally.unresolved
                else INVALID
                if tally.invalid
                else SKIPPED
            )
            colour = fallback if group else MISSING
        else:
            colour = cmap(failed / verdicts) if failed else NO_FAILURE
        drawn.append((r, c, colour, tally.label(), False))
    _cells(ax, drawn)
    # the bar's triangle below 0% is the neutral colour of a cell without a failing step
    mappable = plt.cm.ScalarMappable(norm=Normalize(0, 1), cmap=cmap.with_extremes(under=NO_FAILURE))
    bar = fig.colorbar(mappable, ax=ax, fraction=0.03, pad=0.02, extend="min", extendfrac=0.1)
    bar.set_label("share of steps failed (none: neutral)")
    bar.set_ticks([0, 0.25, 0.5, 0.75, 1], labels=["> 0%", "25%", "50%", "75%", "100%"])
    entries: list[tuple[Colour, str, bool]] = [
        (NO_FAILURE, "no failing step", False),
        (cmap(0.6), "red: some steps missed (Δ ≥ 0)", False),
        (SKIPPED, "grey (s): skipped", False),
        (ERROR, "orange (E): errors only", False),
    ]
    if any(t.unresolved for t in totals.values()):
        entries.append((UNRESOLVED, "U<n>: unresolved, runs disagree in sign (no verdict)", False))
    if any(t.invalid for t in totals.values()):
        entries.append((INVALID, "I<n>: not valid trials, the step did not change", False))
    if oracle:
        entries.append((NO_FAILURE, f"{ORACLE}: steps it did not see change / steps", False))
    _legend(fig, entries)
    try:
        return _save(fig, stem)
    finally:
        plt.close(fig)


def step_summary(matrix: Matrix, stem: Path) -> list[Path]:
    """For runs with many steps: per metric, the share of seed images that fail and the mean Δ
    against step, where a heatmap per step would be too many figures to read."""
    plt = _pyplot()
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
    try:
        return _save(fig, stem)
    finally:
        plt.close(fig)


def heatmap_steps(matrix: Matrix, chosen: Sequence[int] | None = None) -> list[int]:
    """The steps that get a heatmap: `chosen` (those in the run), else every step of a run with
    at most MAX_HEATMAPS steps, else the paper's steps (5, 10, 20) in the run, else the first,
    middle and last step."""
    steps = matrix.steps
    if chosen is not None:
        return [s for s in steps if s in set(chosen)]
    if len(steps) <= MAX_HEATMAPS:
        return steps
    paper = [s for s in steps if s in PAPER_STEPS]
    return paper or sorted({steps[0], steps[len(steps) // 2], steps[-1]})


def separability_figure(table: dict[str, list[Separability]], stem: Path) -> list[Path]:
    """AUC of step-k against reference-step images against step, a line per metric, with
    chance (0.5) dashed: where a metric's line sits under it, a threshold keeps the degraded
    images rather than the clean ones."""
    plt = _pyplot()
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
    try:
        return _save(fig, stem)
    finally:
        plt.close(fig)


def render_figures(matrix: Matrix, out: Path, chosen: Sequence[int] | None = None) -> list[Path]:
    """Every figure for `matrix` into `out`: gaps_step<i>.png/.svg for `heatmap_steps`,
    steps_summary.png/.svg when the run has more than MAX_HEATMAPS steps, and
    failure_counts.png/.svg; none for a matrix without Δ cells (a run of invariance or control
    cases only), which would be empty axes."""
    if not matrix.cells:
        return []
    limit = colour_limit(matrix)
    paths: list[Path] = []
    for step in heatmap_steps(matrix, chosen):
        paths += gap_heatmap(matrix, step, out / f"gaps_step{step}", limit)
    if len(matrix.steps) > MAX_HEATMAPS:
        paths += step_summary(matrix, out / "steps_summary")
    paths += failure_counts(matrix, out / "failure_counts")
    paths += artifact_figure(matrix, out / "artifacts")
    return paths


def artifact_figure(matrix: Matrix, stem: Path) -> list[Path]:
    """Miss rate per artifact (rows) and metric (columns) of a run over the trial sets; none
    without trial cells."""
    from banana_tests.reports.artifact_table import miss_rates

    artifacts, metrics, rates = miss_rates(matrix)
    if not artifacts:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(
        figsize=(1.6 + 1.1 * len(metrics), 1.2 + 0.45 * len(artifacts)), layout="constrained"
    )
    image = ax.imshow(rates, cmap="Reds", vmin=0, vmax=100, aspect="auto")
    ax.set_xticks(range(len(metrics)), metrics, rotation=30, ha="right")
    ax.set_yticks(range(len(artifacts)), artifacts)
    for i, row in enumerate(rates):
        for j, value in enumerate(row):
            if value == value:  # not nan
                ax.text(j, i, f"{value:.0f}%", ha="center", va="center", fontsize=8)
    fig.colorbar(image, ax=ax, label="cases missed (%)")
    ax.set_title("Misses by artifact", fontsize=10)
    try:
        return _save(fig, stem)
    finally:
        plt.close(fig)
