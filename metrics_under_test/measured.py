"""Each metric's measured cost, read from `measured_costs.json`: data beside the registry, not
code, so a re-measurement edits one file (how each figure was measured: docs/research/speed.md).

Read without importing torch or pyiqa, by `banana-tests metrics` and `plan`, the catalog's cost
classes and `-n auto`'s worker count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

COSTS_FILE = Path(__file__).with_name("measured_costs.json")


@dataclass(frozen=True)
class Measured:
    """One metric's figures; None where it was not measured."""

    cpu_seconds_2k: float | None = None  # seconds for one 2048×1152 image, one thread
    peak_mib: int | None = None  # peak resident memory of one scoring process


@cache
def measured() -> dict[str, Measured]:
    """Every measured metric by canonical name."""
    rows = json.loads(COSTS_FILE.read_text(encoding="utf-8"))["metrics"]
    return {name: Measured(**row) for name, row in rows.items()}


def cpu_seconds_2k() -> dict[str, float]:
    """Seconds per 2048×1152 image of each metric measured for it."""
    return {name: m.cpu_seconds_2k for name, m in measured().items() if m.cpu_seconds_2k is not None}


def peak_bytes() -> dict[str, int]:
    """Peak bytes of one scoring process of each metric measured for it."""
    return {name: m.peak_mib * 2**20 for name, m in measured().items() if m.peak_mib is not None}
