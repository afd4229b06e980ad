"""`report.html`: one self-contained page a researcher can open anywhere or attach to a CI run.

Figures are embedded as base64 PNG; tables sort by a click through a few lines of inline
JavaScript. The page loads nothing from outside. Numbers show to the paper's precision (three
decimals in tables); matrix.csv keeps every digit.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from html import escape
from pathlib import Path

from banana_tests.families.family import Page
from banana_tests.reports.compare import MetricComparison
from banana_tests.reports.matrix_sections import artifact_html
from banana_tests.reports.page.case_tables import CASE_HEADERS, case_rows, summary_table
from banana_tests.reports.page.markup import Html, figure, table, table_chunks
from banana_tests.reports.page.sections import (
    comparison_html,
    oracle_html,
    separability_html,
)
from banana_tests.reports.run_facts import run_facts
from banana_tests.verdicts.matrix import Matrix

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; }
body { color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: .2em .6em; text-align: left; }
th { background: #f3f3f3; }
th.sortable { cursor: pointer; user-select: none; }
th.sortable::after { content: " \\2195"; color: #999; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num, td.short { white-space: nowrap; }
table.facts { width: 100%; } table.facts th:first-child { width: 10em; }
tr.failed td { background: #fde8e6; } tr.skipped td { color: #888; } tr.error td { background: #fff1d6; }
tr.unresolved td { background: #fdf3c4; } tr.invalid td { background: #e8eef1; color: #555; }
tr.reference td { background: #eef4fb; font-style: italic; }
tr:target td { outline: 2px solid #1f5fbf; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f7f7f7; padding: .6em; white-space: pre-wrap; overflow-x: auto; }
div.scroll { overflow-x: auto; max-width: 100%; }
"""

_SORT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, col) {
    th.classList.add("sortable");
    th.addEventListener("click", function () {
      var body = table.tBodies[0], up = th.dataset.dir !== "asc";
      th.dataset.dir = up ? "asc" : "desc";
      var value = function (row) { return row.cells[col].textContent.trim(); };
      Array.from(body.rows).sort(function (a, b) {
        var x = value(a), y = value(b), nx = parseFloat(x), ny = parseFloat(y);
        var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
        return up ? c : -c;
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def html_chunks(
    matrix: Matrix,
    figures: Sequence[Path],
    metadata: Mapping[str, str],
    title: str,
    notes: Sequence[tuple[str, str]] = (),
    comparisons: Sequence[MetricComparison] | None = None,
    separability_figure: Path | None = None,
    families: Sequence[Page] = (),
) -> Iterator[Html]:
    """The page, piece by piece for writing as it is made: the run's facts, per-metric summary
    (with the oracle's reference row), separability and the oracle when the cells recorded them,
    the families' parts when the run had them, the
    comparison with the paper when given, `notes` (heading, preformatted text, e.g. replaced
    cases), figures, the families' parts below the figures (the trends'), then every cell, a row
    a piece."""
    summary = summary_table(matrix)
    facts = table(["fact", "value"], ([k, v] for k, v in run_facts(metadata)), kind="facts")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    if matrix.cells:  # a run of other families alone (a search) has no Δ case: no empty table
        parts.append(
            "<p>Each cell is one test case: does the metric score the edited image worse than the "
            "reference step? Δ = norm(step i) − norm(reference); a case <b>fails</b> when Δ ≥ 0.</p>"
        )
    parts += ["<h2>Run</h2>", facts]
    if matrix.cells:
        parts += ["<h2>Summary per metric</h2>", summary]
    sections = (artifact_html(matrix), separability_html(matrix, separability_figure), oracle_html(matrix))
    parts += [part for part in sections if part]
    parts += [part for family in families if not family.after_figures for part in family.html]
    if comparisons is not None:
        parts += ["<h2>Compared with the paper (Figure 5)</h2>", comparison_html(comparisons)]
    for heading, text in notes:
        parts += [f"<h2>{escape(heading)}</h2>", f"<pre>{escape(text)}</pre>"]
    pngs = [figure(p) for p in figures if p.suffix == ".png"]
    if pngs:
        parts += ["<h2>Figures</h2>", *pngs]
    parts += [part for family in families if family.after_figures for part in family.html]
    if matrix.cells:
        parts += [
            "<h2>Every case</h2>",
            "<p>Δ and scores to three decimals; matrix.csv has every digit. The run range is [min Δ, "
            "max Δ] over the runs (hover for each run's Δ), PSNR and SSIM the oracle's mean over runs "
            "(hover for each run's).</p>",
        ]
    for part in parts:
        yield part + "\n"
    if matrix.cells:
        yield from table_chunks(CASE_HEADERS, case_rows(matrix))
    yield f"\n<script>{_SORT}</script>\n</body></html>\n"
