"""Write every report file for one matrix into a folder, with the same code for runs and the paper."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from banana_tests.families.degradation.matrix_sections import (
    artifact_markdown,
    oracle_markdown,
    separabilities,
    separability_markdown,
)
from banana_tests.families.family import Page, Report
from banana_tests.reports.page.html import html_chunks
from banana_tests.reports.paper import MetricComparison
from banana_tests.reports.tables import summary_markdown, write_csv
from banana_tests.verdicts.matrix import Matrix


def write_report(
    matrix: Matrix,
    out: Path,
    metadata: Mapping[str, str],
    title: str,
    notes: Sequence[tuple[str, str]] = (),
    summary_extra: str = "",
    comparisons: Sequence[MetricComparison] | None = None,
    figure_steps: Sequence[int] | None = None,
    families: Sequence[Report] = (),
) -> list[Path]:
    """matrix.csv, summary.md (`summary_sections`, the families' parts, then `summary_extra`),
    the figures (heatmaps for `figure_steps`, see `heatmap_steps`; separability.png/.svg when the
    cells carry per-run scores), each family's files (a trend figure per seed image), and
    report.html (with `notes`: a heading and preformatted text each, and the comparison with the
    paper when `comparisons` is given), and controls.csv with the control cases' outcomes when
    there are any (also in summary.md and the page), and the families' parts of the page.
    Returns the files written, each once."""
    from banana_tests.reports.page.figure_style import separability_figure
    from banana_tests.reports.page.figures import render_figures

    out.mkdir(parents=True, exist_ok=True)
    written = [out / "matrix.csv", out / "summary.md"]
    with written[0].open("w", encoding="utf-8", newline="") as table:
        write_csv(matrix, table)
    cases = summary_markdown(matrix, title) if matrix.cells else ""  # no empty table (a search-only run)
    sections = [cases, *summary_sections(matrix)]
    sections += [family.markdown for family in families]
    sections.append(summary_extra)
    written[1].write_text("\n".join(s for s in sections if s), encoding="utf-8")
    figures = render_figures(matrix, out, figure_steps)
    separable = separabilities(matrix)
    separable_files = separability_figure(separable, out / "separability") if separable else []
    pages: list[Page] = [family.write(out) for family in families]
    page = out / "report.html"
    with page.open("w", encoding="utf-8") as html:  # written as made: its case table is the bulk
        html.writelines(
            html_chunks(
                matrix,
                figures,
                metadata,
                title,
                notes,
                comparisons,
                separable_files[0] if separable_files else None,
                pages,
            )
        )
    family_files = (p for f in pages for p in f.files)
    return list(dict.fromkeys([*written, *figures, *separable_files, *family_files, page]))


def summary_sections(matrix: Matrix) -> list[str]:
    """summary.md's sections below the per-metric table, also printed by `report`: misses by
    artifact, separability and the degradation oracle, each when the cells recorded what it needs."""
    texts = (artifact_markdown(matrix), separability_markdown(matrix), oracle_markdown(matrix))
    return [text for text in texts if text]


@contextmanager
def staged(out: Path) -> Iterator[Path]:
    """A hidden sibling folder to write a report into. On success its files move into `out`
    (the whole folder when `out` is new, else file by file, each an atomic rename); on any
    failure it is removed. So `out` never holds half a report, and other files in it stay."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.parent / f".{out.name}.partial-{secrets.token_hex(6)}"
    stage.mkdir()  # not mkdtemp: the report folder gets the umask's mode, not 0700
    try:
        yield stage
        if out.exists():
            for path in stage.iterdir():
                os.replace(path, out / path.name)
        else:
            os.rename(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
