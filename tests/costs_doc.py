"""docs/metrics.md's table of measured costs, generated from `metrics_under_test/measured_costs.json`
(and each metric's `cost` class in the catalog). Refresh it after a re-measurement with
`python -m tests.costs_doc --write`; tests/test_docs.py fails while it is stale."""

from __future__ import annotations

import sys
from pathlib import Path

from metrics_under_test.measured import measured
from metrics_under_test.registry import catalog

PROJECT = Path(__file__).resolve().parent.parent
DOC = PROJECT / "docs" / "metrics.md"
BEGIN, END = "<!-- costs: python -m tests.costs_doc --write -->\n", "<!-- end of costs -->\n"


def table() -> str:
    """The generated block: one row per measured metric, by name."""
    rows = ["| metric | cost | s per 2048×1152 image | peak MiB |", "|---|---|---:|---:|"]
    for name, m in sorted(measured().items()):
        seconds = f"{m.cpu_seconds_2k:g}" if m.cpu_seconds_2k is not None else "–"
        peak = f"{m.peak_mib:,}" if m.peak_mib is not None else "–"
        rows.append(f"| {name} | {catalog()[name].cost} | {seconds} | {peak} |")
    return BEGIN + "\n".join(rows) + "\n" + END


def with_table(text: str) -> str:
    """`text` (docs/metrics.md) with its generated block replaced by the data file's."""
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + table() + text[stop:]


if __name__ == "__main__":
    current = DOC.read_text(encoding="utf-8")
    if "--write" in sys.argv[1:]:
        DOC.write_text(with_table(current), encoding="utf-8")
    else:
        sys.stdout.write(table())
