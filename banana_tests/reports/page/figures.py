"""Every figure of a report from a matrix: which steps get a heatmap, and the heatmaps themselves:
Δ per seed image and metric at one step (the paper's Figure 5), failing steps per seed image and
metric (Figure 6), and miss rates per artifact and metric. The plots against the step are in
banana_tests.reports.page.figure_style.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from banana_tests.families.degradation.matrix_sections import ORACLE, OracleCell, oracle_cells
from banana_tests.reports.page.figure_style import (
    ERROR,
    FRAME,
    INVALID,
    MISSING,
    NAN,
    NO_FAILURE,
    SKIPPED,
    UNRESOLVED,
    Colour,
    GridCell,
    draw_cells,
    grid_axes,
    grid_rows,
    legend,
    pyplot,
    save,
    step_summary,
)
from banana_tests.reports.tables import row_label
from banana_tests.scoring.oracle import UNCHANGED_PSNR
from banana_tests.verdicts.matrix import Matrix, Outcome, OutcomeCounts

PAPER_STEPS = (5, 10, 20)
MAX_HEATMAPS = 6
"""More steps than this (e.g. `--steps all`) get a step summary and heatmaps of a few steps only."""


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


_SIGN_GAP = 0.18
"""How much of RdBu's pale middle is cut out: the smallest Δ still shows its sign's colour."""


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
    plt = pyplot()
    from matplotlib.colors import Normalize

    cells = [c for c in matrix.cells.values() if c.key.step == step]
    rows, cols = grid_rows(matrix), matrix.metrics
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
    fig, ax = grid_axes(plt, rows, labels, labels, title)
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
    draw_cells(ax, drawn)
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
    legend(fig, entries)
    return save(fig, stem)


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
    plt = pyplot()
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap, Normalize

    rows, cols = grid_rows(matrix), matrix.metrics
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
    fig, ax = grid_axes(
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
    draw_cells(ax, drawn)
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
    legend(fig, entries)
    return save(fig, stem)


def artifact_figure(matrix: Matrix, stem: Path) -> list[Path]:
    """Miss rate per artifact (rows) and metric (columns) of a run over the trial sets; none
    without trial cells."""
    from banana_tests.families.degradation.matrix_sections import miss_rates

    artifacts, metrics, rates = miss_rates(matrix)
    if not artifacts:
        return []
    plt = pyplot()
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
    return save(fig, stem)
