"""Which artifact a metric misses: the metric × artifact table of a run over the trial sets.

A trial's seed image is `<seed image>.<artifact>` (banana_tests.trajectories.records), so the
cells of a `--artifact` run group by artifact with no field of their own: "PIQE misses 14/24"
comes with "static 8/24, tint 0/24". Empty for a run without trial cells.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape

from banana_tests.table_text import Align, table
from banana_tests.trajectories.records import ARTIFACTS, split_trial
from banana_tests.verdicts.matrix import Matrix, OutcomeCounts

Table = dict[str, dict[str, OutcomeCounts]]  # artifact -> metric -> counts


def artifact_counts(matrix: Matrix) -> Table:
    """Outcome counts per artifact (in the composite's order) and metric, over the trial cells."""
    found: defaultdict[str, defaultdict[str, OutcomeCounts]] = defaultdict(lambda: defaultdict(OutcomeCounts))
    for key, cell in matrix.cells.items():
        trial = split_trial(key.seed_image)
        if trial is not None:
            found[trial[1]][key.metric].add(cell.outcome)
    return {a: dict(found[a]) for a in ARTIFACTS if a in found}


def _grid(table: Table) -> tuple[list[str], list[list[str]]]:
    metrics = sorted({m for row in table.values() for m in row})
    rows = [
        [artifact, *(row[m].label() if m in row else "" for m in metrics)] for artifact, row in table.items()
    ]
    return metrics, rows


def artifact_lines(matrix: Matrix) -> list[str]:
    """The table for the terminal: a row per artifact, a column per metric, misses/verdicts."""
    table = artifact_counts(matrix)
    if not table:
        return []
    metrics, rows = _grid(table)
    col = max(7, *(len(m) for m in metrics), *(len(c) for r in rows for c in r[1:]))
    first = max(12, *(len(r[0]) for r in rows))
    lines = [
        "cell: cases missed (Δ ≥ 0) / cases with a verdict, over every seed image and step",
        " " * first + " " + " ".join(m.rjust(col) for m in metrics),
    ]
    lines += [r[0].ljust(first) + " " + " ".join(c.rjust(col) for c in r[1:]) for r in rows]
    return lines


def artifact_markdown(matrix: Matrix) -> str:
    """summary.md's section; empty without trial cells."""
    counts = artifact_counts(matrix)
    if not counts:
        return ""
    metrics, rows = _grid(counts)
    lines = [
        "### Misses by artifact",
        "",
        "Each trial set degrades the same seed images with one artifact family alone (replicate: all",
        "of them); a cell counts the cases missed (Δ ≥ 0) out of those with a verdict.",
        "",
        *table(["artifact", *metrics], rows, [Align.LEFT] + [Align.RIGHT] * len(metrics)),
    ]
    return "\n".join(lines) + "\n"


def artifact_html(matrix: Matrix) -> str:
    """report.html's section; empty without trial cells."""
    table = artifact_counts(matrix)
    if not table:
        return ""
    metrics, rows = _grid(table)
    head = "".join(f"<th>{escape(m)}</th>" for m in metrics)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (
        "<h2>Misses by artifact</h2>\n<p>Each trial set degrades the same seed images with one artifact "
        "family alone (replicate: all of them); a cell counts the cases missed (Δ ≥ 0) out of those "
        f'with a verdict.</p>\n<div class="scroll"><table class="facts"><tr><th>artifact</th>{head}</tr>'
        f"{body}</table></div>"
    )


def miss_rates(matrix: Matrix) -> tuple[list[str], list[str], list[list[float]]]:
    """(artifacts, metrics, miss rate in % per artifact and metric; nan without a verdict) for the figure."""
    table = artifact_counts(matrix)
    metrics = sorted({m for row in table.values() for m in row})
    rates = []
    for row in table.values():
        line = []
        for m in metrics:
            c = row.get(m, OutcomeCounts())
            verdicts = c.passed + c.failed
            line.append(100.0 * c.failed / verdicts if verdicts else float("nan"))
        rates.append(line)
    return list(table), metrics, rates
