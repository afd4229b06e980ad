"""`report.html`: one self-contained page a researcher can open anywhere or attach to a CI run.

Figures are embedded as base64 PNG; tables sort by a click through a few lines of inline
JavaScript. The page loads nothing from outside. Numbers show to the paper's precision (three
decimals in tables); matrix.csv keeps every digit. Its Run table shows the run's own facts from
the JUnit metadata, in a fixed order, with a long list of steps shown as ranges.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from html import escape
from pathlib import Path

from banana_tests.families.degradation.matrix_sections import artifact_html
from banana_tests.families.family import Page
from banana_tests.reports.page.markup import Html, figure, table, table_chunks
from banana_tests.reports.page.sections import (
    CASE_HEADERS,
    case_rows,
    comparison_html,
    oracle_html,
    separability_html,
    summary_table,
)
from banana_tests.reports.paper import MetricComparison
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


# The run's own facts, in the Run table's order: (metadata key, label). Anything else a JUnit
# file carries (hypothesis statistics, other plugins' properties) is a tool's, not the run's.
RUN_FACTS = (
    ("source", "source"),
    ("dataset", "data set"),
    ("selected_records", "records"),
    ("runs", "runs"),
    ("shard", "shards"),
    ("variant", "variant"),
    ("metrics", "metrics"),
    ("seed images", "seed images"),
    ("steps", "steps"),
    ("reference_step", "reference step"),
    ("cases", "cases"),
    ("merge", "merge"),
    ("versions", "versions"),
    ("libraries", "metric libraries"),
    ("device", "device"),
    ("date", "date"),
    ("timestamp", "date"),
    ("command", "command line"),
    ("command_line", "command line"),
    ("JUnit XML", "JUnit XML"),
    ("report tool", "report tool"),
)


def _steps(text: str) -> str:
    """A long list of steps as ranges: "2–100 (99 steps)" rather than 99 numbers."""
    try:
        steps = sorted(int(s) for s in text.split(","))
    except ValueError:
        return text
    if len(steps) <= 6:
        return text

    def span(a: int, b: int) -> str:
        return str(a) if a == b else f"{a}–{b}"

    ranges, start, prev = [], steps[0], steps[0]
    for step in steps[1:]:
        if step != prev + 1:
            ranges.append(span(start, prev))
            start = step
        prev = step
    ranges.append(span(start, prev))
    return f"{', '.join(ranges)} ({len(steps)} steps)"


def run_facts(metadata: Mapping[str, str]) -> list[tuple[str, str]]:
    """The Run table's rows: the run's own facts from `metadata`, in RUN_FACTS order."""
    facts = []
    for key, label in RUN_FACTS:
        if metadata.get(key):
            facts.append((label, _steps(metadata[key]) if key == "steps" else metadata[key]))
    return facts
