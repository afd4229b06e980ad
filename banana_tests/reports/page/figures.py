"""Every figure of a report from a matrix: which steps get a heatmap, and the files written
(heatmaps in banana_tests.reports.page.heatmaps, plots against step in step_plots)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from banana_tests.reports.page.heatmaps import artifact_figure, colour_limit, failure_counts, gap_heatmap
from banana_tests.reports.page.step_plots import step_summary
from banana_tests.verdicts.matrix import Matrix

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
