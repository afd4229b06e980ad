"""docs/metrics.md's table of measured costs, generated from `metrics_under_test/measured_costs.json`
(and each metric's `cost` class in the catalog). Refresh it after a re-measurement with
`python -m tests.costs_doc --write`; tests/test_docs.py fails while it is stale."""

from __future__ import annotations

from pathlib import Path

from metrics_under_test.registry import catalog
from metrics_under_test.spec import measured
from tests.generated_block import GeneratedBlock

PROJECT = Path(__file__).resolve().parent.parent


def table() -> str:
    """The generated block's body: one row per measured metric, by name."""
    rows = ["| metric | cost | s per 2048×1152 image | peak MiB |", "|---|---|---:|---:|"]
    for name, m in sorted(measured().items()):
        seconds = f"{m.cpu_seconds_2k:g}" if m.cpu_seconds_2k is not None else "–"
        peak = f"{m.peak_mib:,}" if m.peak_mib is not None else "–"
        rows.append(f"| {name} | {catalog()[name].cost} | {seconds} | {peak} |")
    return "\n".join(rows) + "\n"


COSTS = GeneratedBlock(
    PROJECT / "docs" / "metrics.md",
    "<!-- costs: python -m tests.costs_doc --write -->\n",
    "<!-- end of costs -->\n",
    table,
)

if __name__ == "__main__":
    COSTS.main()
