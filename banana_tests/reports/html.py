"""`report.html`: one self-contained page a researcher can open anywhere or attach to a CI run.

Figures are embedded as base64 PNG; tables sort by a click through a few lines of inline
JavaScript. The page loads nothing from outside. Numbers show to the paper's precision (three
decimals in tables); matrix.csv keeps every digit.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from banana_tests.cases import CaseKey
from banana_tests.reports.artifact_table import artifact_html
from banana_tests.reports.compare import MetricComparison
from banana_tests.reports.control_table import ControlOutcome, control_rows
from banana_tests.reports.oracle_table import ORACLE, invalid_trials, oracle_cells, oracle_steps, psnr_text
from banana_tests.reports.search_table import HEADER as SEARCH_HEADER
from banana_tests.reports.search_table import SearchOutcome, search_pairs_html
from banana_tests.reports.separability_table import separabilities
from banana_tests.reports.tables import sorted_cells, summarise
from banana_tests.scoring.oracle import NOT_A_VALID_TRIAL, UNCHANGED_PSNR
from banana_tests.verdicts.escape import VISIBLE_PSNR
from banana_tests.verdicts.matrix import Cell, Matrix
from banana_tests.verdicts.outcome import Outcome
from banana_tests.verdicts.uncertainty import RunSpread, spread

if TYPE_CHECKING:
    from banana_tests.reports.trends import TrendFigure

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1400px; padding: 0 1em; }
body { color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: .2em .6em; text-align: left; overflow-wrap: anywhere; }
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
pre { background: #f7f7f7; padding: .6em; white-space: pre-wrap; overflow-wrap: anywhere; }
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
    {"step", "Δ", "score (reference)", "score (step)", "reference step", "runs"}
    | {"cases", "passed", "failed", "skipped", "error", "worst Δ", "run Δ", "paper Δ"}
    | {"unresolved", "not valid trial", "run Δ range", "run Δ sd", "PSNR (dB)", "SSIM"}
    | {"clean images", "clean range", "clean spread", "detected", "PSNR range (dB)", "SSIM range"}
    | {"cells matched", "agree in sign", "run failures", "paper failures", "cells that differ"}
)
_SHORT = frozenset({"outcome", "run"})
"""Text columns of a few words that read badly broken ("mea|n"); numbers never break either."""
SHOWN_OUTCOME = {Outcome.INVALID: NOT_A_VALID_TRIAL}
"""An outcome as the page says it; matrix.csv keeps the short name."""


def _numeric(header: str) -> bool:
    return header in _RIGHT or header.startswith("AUC step")


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

Html = str
"""Markup already escaped, as opposed to text."""
Value = str | tuple[str, Html]
"""A table cell: text, or (text to sort by, markup to show)."""


def _cell(header: str, value: Value) -> Html:
    """A td; a (text, markup) value is a link or other markup whose text sorts."""
    markup = value[1] if isinstance(value, tuple) else escape(value)
    if _numeric(header):
        return f'<td class="num">{markup}</td>'
    return f'<td class="short">{markup}</td>' if header in _SHORT else f"<td>{markup}</td>"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Value]], kind: str = "sortable") -> Html:
    """A table (sortable unless `kind` says otherwise)."""
    return "".join(_table_chunks(headers, ((row, "", "") for row in rows), kind))


def _table_chunks(
    headers: Sequence[str], rows: Iterable[tuple[Sequence[Value], str, str]], kind: str = "sortable"
) -> Iterator[Html]:
    """A table piece by piece, a body row a piece; each row comes with its CSS class (its
    outcome) and its anchor to link to, either may be empty."""
    head = "".join(
        f'<th class="num">{escape(h)}</th>' if _numeric(h) else f"<th>{escape(h)}</th>" for h in headers
    )
    yield f'<table class="{kind}"><thead><tr>{head}</tr></thead><tbody>'
    for row, css, ident in rows:
        cells = "".join(_cell(h, v) for h, v in zip(headers, row, strict=True))
        cls = f' class="{css}"' if css else ""
        anchor = f' id="{escape(ident)}"' if ident else ""
        yield f"<tr{anchor}{cls}>{cells}</tr>"
    yield "</tbody></table>"


def anchor(key: CaseKey) -> str:
    """The id of a case's row under "Every case", for links to it."""
    return "case-" + re.sub(r"\s", "_", key.test_id)


def _number(value: float | None, places: int = 3, sign: bool = False) -> str:
    if value is None:
        return ""
    if math.isnan(value):
        return "nan"
    return f"{value:+.{places}f}" if sign else f"{value:.{places}f}"


def _figure(png: Path, name: str | None = None) -> Html:
    """An embedded PNG, captioned with its file's name, or `name` (a seed image's real name)."""
    data = base64.b64encode(png.read_bytes()).decode("ascii")
    label = png.name if name is None else f"{name}: {png.name}"
    return (
        f'<figure><img alt="{escape(name or png.stem)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{escape(label)} (SVG beside it)</figcaption></figure>"
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


def _rate(failed: int, total: int) -> str:
    return f"{failed}/{total} ({100 * failed / total:.0f}%)" if total else "no verdicts"


def _paper_delta(cell: Cell) -> str:
    """The paper publishes Δ to one decimal."""
    return _number(cell.delta, 1, sign=True)


def comparison_html(comparisons: Sequence[MetricComparison]) -> Html:
    """Per metric: cells matched and in agreement, failure rates side by side, and a table of
    the cells that differ, each linked to its row under "Every case"."""
    if not comparisons:
        return "<p>No metric of this run is among the paper's 21 metrics.</p>"
    rows: list[list[Value]] = []
    for c in comparisons:
        agree: Value = ("–", "– (no shared seed image)") if c.by_rate else f"{c.agree}/{c.matched}"
        n = len(c.differences)
        differ: Value = (str(n), f'<a href="#differ-{escape(c.metric)}">{n}</a>') if n else "0"
        rows.append(
            [
                c.metric,
                str(c.matched),
                agree,
                _rate(c.run_failed, c.run_verdicts),
                _rate(c.paper_failed, c.paper_verdicts),
                differ,
            ]
        )
    headers = [
        "metric",
        "cells matched",
        "agree in sign",
        "run failures",
        "paper failures",
        "cells that differ",
    ]
    parts = [
        "<p>Cells match by metric, seed image and step; they agree when both fail (Δ ≥ 0) or both "
        "pass. Paper Δ as published (one decimal).</p>",
        _table(headers, rows),
    ]
    if any(c.by_rate for c in comparisons):
        parts.append(
            "<p>Where no seed image is shared with the paper (the embedded data uses other images), "
            "cells cannot be matched, so only the failure rates compare.</p>"
        )
    for c in comparisons:
        if not c.differences:
            continue
        diff_rows: list[list[Value]] = [
            [
                (d.key.test_id, f'<a href="#{escape(anchor(d.key))}">{escape(d.key.test_id)}</a>'),
                d.run.outcome,
                _number(d.run.delta, sign=True),
                d.paper.outcome,
                _paper_delta(d.paper),
            ]
            for d in c.differences
        ]
        parts += [
            f'<h3 id="differ-{escape(c.metric)}">Where {escape(c.metric)} differs from the paper</h3>',
            _table(["case", "run", "run Δ", "paper", "paper Δ"], diff_rows),
        ]
    return "\n".join(parts)


CASE_HEADERS = (
    "metric",
    "seed image",
    "step",
    "Δ",
    "outcome",
    "run Δ range",
    "run Δ sd",
    "PSNR (dB)",
    "SSIM",
    "score (reference)",
    "score (step)",
    "run",
    "reference step",
    "runs",
)


def _run_spread(cell: Cell) -> RunSpread | None:
    """The cell's runs' Δs, when it recorded two or more runs' scores (one run bounds nothing)."""
    deltas = [s - r for r, s in zip(cell.run_norm_references, cell.run_norm_steps, strict=False)]
    if len(deltas) < 2 or len(cell.run_norm_references) != len(cell.run_norm_steps):
        return None
    try:
        return spread(deltas)
    except ValueError:  # a non-finite run score: no interval to show
        return None


def _spread_cells(cell: Cell) -> tuple[Value, str]:
    """The run range [min Δ, max Δ] (its tooltip: each run's Δ and the range's coverage of the
    median Δ) and the runs' standard deviation."""
    s = _run_spread(cell)
    if s is None:
        return "", ""
    low, high = s.interval
    text = f"{low:+.3f} … {high:+.3f}"
    runs = ", ".join(f"{d:+.3f}" for d in s.deltas)
    tip = f"runs Δ {runs}; the range covers the median Δ with {100 * s.confidence:g} %"
    return (text, f'<span title="{escape(tip)}">{escape(text)}</span>'), f"{s.stdev:.3f}"


def _oracle_value(values: tuple[float, ...], places: int) -> Value:
    """The runs' mean, each run's value in its tooltip."""
    if not values:
        return ""
    text = _number(math.fsum(values) / len(values), places)
    tip = "runs: " + ", ".join(f"{v:.{places}f}" for v in values)
    return text, f'<span title="{escape(tip)}">{escape(text)}</span>'


def _case_rows(matrix: Matrix) -> Iterator[tuple[list[Value], str, str]]:
    """Every cell to three decimals, with its outcome and anchor; the run column says "mean" for
    cells averaged over runs. Made one at a time: 118,800 rows held at once were ~100 MiB."""
    for c in sorted_cells(matrix):
        k = c.key
        run_range, run_sd = _spread_cells(c)
        yield (
            [
                k.metric,
                k.seed_image,
                str(k.step),
                _number(c.delta, sign=True),
                SHOWN_OUTCOME.get(c.outcome, c.outcome),
                run_range,
                run_sd,
                _oracle_value(c.psnr, 2),
                _oracle_value(c.ssim, 3),
                _number(c.score_reference),
                _number(c.score_step),
                "mean" if k.run is None else str(k.run),
                "" if c.reference_step is None else str(c.reference_step),
                "" if c.runs is None else str(c.runs),
            ],
            c.outcome,
            anchor(k),
        )


def _summary_table(matrix: Matrix) -> Html:
    """Per metric: every outcome counted apart (unresolved and not valid trials are neither
    passes nor failures), then the oracle's reference row."""
    headers = ["metric", "cases", "passed", "failed", "unresolved", "not valid trial", "skipped", "error"]
    rows = (
        (
            [
                f"{s.metric} (reference)" if s.reference else s.metric,
                *(str(n) for n in (s.cases, s.passed, s.failed, s.unresolved, s.invalid, s.skipped, s.error)),
                _number(s.worst_delta, sign=True),
            ],
            "reference" if s.reference else "",
            "",
        )
        for s in summarise(matrix)
    )
    return "".join(_table_chunks([*headers, "worst Δ"], rows))


def separability_html(matrix: Matrix, figure: Path | None) -> Html:
    """Per metric: the AUC of step-k against reference-step images at each step, the clean
    images' range and spread beside it, and the AUC-against-step figure; empty without per-run scores."""
    table = separabilities(matrix)
    if not table:
        return ""
    steps = sorted({r.step for rows in table.values() for r in rows})
    rows: list[list[Value]] = []
    for metric, found in table.items():
        by_step = {r.step: f"{r.auc:.3f}" for r in found}
        first = found[0]
        clean = f"{first.clean_low:.1f} … {first.clean_high:.1f}"
        rows.append(
            [
                metric,
                *(by_step.get(s, "") for s in steps),
                str(first.clean),
                clean,
                f"{first.clean_spread:.1f}",
            ]
        )
    headers = ["metric", *(f"AUC step {s}" for s in steps), "clean images", "clean range", "clean spread"]
    parts = [
        "<h2>Separability</h2>",
        "<p>Could one global threshold on the normalised score filter step-k images out? The AUC of "
        "telling step-k images from reference-step images, pooled over seed images and runs: 1 = every "
        "clean image scores above every degraded one, 0.5 = chance, below 0.5 the metric prefers the "
        "degraded images. The clean images' range and spread (normalised points) is the content "
        "confound.</p>",
        _table(headers, rows),
    ]
    if figure is not None:
        parts.append(_figure(figure))
    return "\n".join(parts)


def oracle_html(matrix: Matrix) -> Html:
    """The oracle's section: per step, how many steps it detected and the PSNR/SSIM ranges, and
    every case that was not a valid trial with its PSNR, linked to its row; empty without it."""
    cells = oracle_cells(matrix)
    if not cells:
        return ""
    steps: list[list[Value]] = [
        [
            str(s.step),
            f"{s.detected}/{s.cells}",
            f"{s.psnr_low:.2f} … {s.psnr_high:.2f}",
            f"{s.ssim_low:.3f} … {s.ssim_high:.3f}",
        ]
        for s in oracle_steps(cells)
    ]
    parts = [
        "<h2>Degradation oracle (positive control)</h2>",
        f"<p>PSNR and SSIM of each step against the reference step of the same run, by pixels alone: "
        f"the {escape(ORACLE)} row beside the metrics. It detects a step that moved by at least one "
        f"grey level RMS (PSNR &lt; {UNCHANGED_PSNR:.2f} dB); where it does not, the metrics' cases are "
        f"<b>{NOT_A_VALID_TRIAL}</b>, not their failures.</p>",
        _table(["step", "detected", "PSNR range (dB)", "SSIM range"], steps),
    ]
    invalid = invalid_trials(matrix)
    if invalid:
        rows: list[list[Value]] = [
            [
                (c.key.test_id, f'<a href="#{escape(anchor(c.key))}">{escape(c.key.test_id)}</a>'),
                psnr_text(c.psnr),
                _number(c.delta, sign=True),
            ]
            for c in invalid
        ]
        parts += [
            f"<h3>{len(invalid)} case(s) {NOT_A_VALID_TRIAL}</h3>",
            _table(["case", "PSNR per run (dB)", "Δ"], rows),
        ]
    return "\n".join(parts)


def html_chunks(
    matrix: Matrix,
    figures: Sequence[Path],
    metadata: Mapping[str, str],
    title: str,
    notes: Sequence[tuple[str, str]] = (),
    trends: Sequence[TrendFigure] = (),
    comparisons: Sequence[MetricComparison] | None = None,
    separability_figure: Path | None = None,
    controls: Sequence[ControlOutcome] = (),
    searches: Sequence[SearchOutcome] = (),
) -> Iterator[Html]:
    """The page, piece by piece for writing as it is made: the run's facts, per-metric summary
    (with the oracle's reference row), separability and the oracle when the cells recorded them,
    the comparison with the paper when given, `notes` (heading, preformatted text, e.g. replaced
    cases), figures, the trend figures if any, then every cell, a row a piece."""
    summary = _summary_table(matrix)
    facts = _table(["fact", "value"], ([k, v] for k, v in run_facts(metadata)), kind="facts")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        "<p>Each cell is one test case: does the metric score the edited image worse than the "
        "reference step? Δ = norm(step i) − norm(reference); a case <b>fails</b> when Δ ≥ 0.</p>",
        "<h2>Run</h2>",
        facts,
        "<h2>Summary per metric</h2>",
        summary,
    ]
    sections = (artifact_html(matrix), separability_html(matrix, separability_figure), oracle_html(matrix))
    parts += [part for part in sections if part]
    if controls:
        header, rows = control_rows(controls)
        parts += [
            "<h2>Control degradations</h2>",
            "<p>Per metric and distortion: does the stronger of two strengths score worse on every drawn "
            "crop? A failure gives the first failing crop's normalised scores (controls.csv too).</p>",
            _table(header, rows),
        ]
    if searches:
        parts += [
            "<h2>Worst escape</h2>",
            f"<p>Per metric, the most degraded image it still scores at least as well as its clean "
            f"source (PSNR &lt; {VISIBLE_PSNR:g} dB), clean and degraded side by side; without an "
            "escape, the most degraded image it detected.</p>",
            _table(SEARCH_HEADER, (o.row() for o in searches)),
            search_pairs_html(searches),
        ]
    if comparisons is not None:
        parts += ["<h2>Compared with the paper (Figure 5)</h2>", comparison_html(comparisons)]
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
        parts += [_figure(f.png, f.seed_image) for f in trends]
    parts += [
        "<h2>Every case</h2>",
        "<p>Δ and scores to three decimals; matrix.csv has every digit. The run range is [min Δ, max Δ] "
        "over the runs (hover for each run's Δ), PSNR and SSIM the oracle's mean over runs (hover for "
        "each run's).</p>",
    ]
    for part in parts:
        yield part + "\n"
    yield from _table_chunks(CASE_HEADERS, _case_rows(matrix))
    yield f"\n<script>{_SORT}</script>\n</body></html>\n"
