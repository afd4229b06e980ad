"""`report.html`: one self-contained page a researcher can open anywhere or attach to a CI run.

Figures are embedded as base64 PNG; tables sort by a click through a few lines of inline
JavaScript. The page loads nothing from outside.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path

from banana_tests.matrix import Matrix
from banana_tests.reports.tables import CSV_COLUMNS, csv_rows, summarise

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; }
body { color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: .2em .6em; text-align: left; }
th.sortable { cursor: pointer; background: #f3f3f3; user-select: none; }
th.sortable::after { content: " \\2195"; color: #999; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.failed td { background: #fde8e6; } tr.skipped td { color: #888; } tr.error td { background: #fff1d6; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
pre { background: #f7f7f7; padding: .6em; white-space: pre-wrap; }
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

_RIGHT = frozenset(
    {"step", "delta", "score_reference", "score_step", "run", "reference_step", "runs"}
    | {"cases", "passed", "failed", "skipped", "error", "worst Δ"}
)


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], classes: Sequence[str] = ()) -> str:
    """A sortable table; `classes` gives each body row a CSS class (its outcome)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            f'<td class="num">{escape(v)}</td>' if h in _RIGHT else f"<td>{escape(v)}</td>"
            for h, v in zip(headers, row, strict=True)
        )
        cls = f' class="{classes[i]}"' if classes else ""
        body.append(f"<tr{cls}>{cells}</tr>")
    return f'<table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _figure(png: Path) -> str:
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    return (
        f'<figure><img alt="{escape(png.stem)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{escape(png.name)} (SVG beside it)</figcaption></figure>"
    )


def render_html(
    matrix: Matrix,
    figures: Sequence[Path],
    metadata: Mapping[str, str],
    title: str,
    notes: Sequence[tuple[str, str]] = (),
    trends: Sequence[Path] = (),
) -> str:
    """The page: run metadata, per-metric summary, figures, `notes` (heading, preformatted
    text, e.g. the paper comparison or replaced cases), the trend figures if any, then every cell."""
    summary = _table(
        ["metric", "cases", "passed", "failed", "skipped", "error", "worst Δ"],
        (
            [
                s.metric,
                str(s.cases),
                str(s.passed),
                str(s.failed),
                str(s.skipped),
                str(s.error),
                "" if s.worst_delta is None else f"{s.worst_delta:+.2f}",
            ]
            for s in summarise(matrix)
        ),
    )
    meta = _table(["", "value"], ([k, v] for k, v in metadata.items()))
    rows = csv_rows(matrix)
    cells = _table(
        list(CSV_COLUMNS), ([r[c] for c in CSV_COLUMNS] for r in rows), [r["outcome"] for r in rows]
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        "<p>Each cell is one test case: does the metric score the edited image worse than the "
        "reference step? Δ = norm(step i) − norm(reference); a case <b>fails</b> when Δ ≥ 0.</p>",
        "<h2>Run</h2>",
        meta,
        "<h2>Summary per metric</h2>",
        summary,
    ]
    for heading, text in notes:
        parts += [f"<h2>{escape(heading)}</h2>", f"<pre>{escape(text)}</pre>"]
    parts.append("<h2>Figures</h2>")
    parts += [_figure(p) for p in figures if p.suffix == ".png"]
    if trends:
        parts.append("<h2>Trends</h2>")
        parts.append(
            "<p>Normalised score against step per seed image: the run mean per metric, a band for "
            "the spread over runs, and the reference score dashed.</p>"
        )
        parts += [_figure(p) for p in trends if p.suffix == ".png"]
    parts += ["<h2>Every case</h2>", cells, f"<script>{_SORT}</script>", "</body></html>"]
    return "\n".join(parts) + "\n"
