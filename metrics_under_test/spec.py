"""What the suite knows about a metric before loading it: its range and direction (the Table 2
rule that maps raw scores to [0, 100]), its files and its measured cost.

Apart from the registry so that custom metrics can build a spec without importing the registry.
The measured costs are read from `measured_costs.json`: data beside the registry, not code, so a
re-measurement edits one file (how each figure was measured: docs/research/speed.md); read
without importing torch or pyiqa, by `banana-tests metrics` and `plan`, the catalog's cost classes
and `-n auto`'s worker count.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path

from metrics_under_test.weights import torch_hub_dir


class Backend(StrEnum):
    """Where a metric's code comes from: how it is built and what its score cache key holds."""

    PYIQA = "pyiqa"
    VLM = "vlm"  # metrics_under_test.vlm's adapters
    CUSTOM = "custom"  # a user's `package.module:attr` or entry point


class Cost(StrEnum):
    """What a metric costs to run (docs/metrics.md, "What each metric costs"); a custom metric
    declares it as one of these strings."""

    FAST = "fast"
    SLOW = "slow"
    NEURAL = "neural"
    VLM = "vlm"


@dataclass(frozen=True)
class WeightFile:
    """A parameter file a metric needs, where pyiqa (or torch) looks for it, and its source."""

    file: str
    url: str
    cache: str = "pyiqa"  # "pyiqa": torch hub dir/pyiqa; "torch": torch hub dir/checkpoints

    @property
    def path(self) -> Path:
        sub = "pyiqa" if self.cache == "pyiqa" else "checkpoints"
        return torch_hub_dir() / sub / self.file


@dataclass(frozen=True)
class MetricSpec:
    """Everything the suite knows about a metric before loading it."""

    name: str
    backend: Backend
    low: float
    high: float
    lower_better: bool
    weights: tuple[WeightFile, ...] = ()
    cost: Cost = Cost.NEURAL
    paper_name: str | None = None
    weights_note: str = ""  # what else it fetches at load time, when not in `weights`
    target: str | None = None  # Backend.CUSTOM: the `package.module:attr` that builds it
    files: tuple[Path, ...] = ()  # Backend.CUSTOM: data files it reads, hashed into the cache key
    snapshot_points: float | None = None  # snapshot tolerance in normalised points; None: default
    invariance_points: float | None = None  # shift/resize invariance tolerance, the same; None: default
    min_side: int | None = None  # the smallest height and width, in pixels, it can score; None: any

    @property
    def scale(self) -> Scale:
        return Scale(self.low, self.high, self.lower_better)

    def missing_weights(self, mirror: Path | None = None) -> list[WeightFile]:
        """Files neither in pyiqa's cache nor in `mirror` (the --weights-dir the suite stages from)."""
        return [
            w for w in self.weights if not w.path.exists() and not (mirror and (mirror / w.file).is_file())
        ]


@dataclass(frozen=True)
class Scale:
    """A metric's typical range and direction; maps raw scores to [0, 100], higher = better."""

    low: float
    high: float
    lower_better: bool

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.high > self.low):
            raise ValueError(f"typical range must be finite with high > low, got [{self.low}, {self.high}]")

    def normalise(self, score: float) -> float:
        """`100·(s−lo)/(hi−lo)`, or `100·(hi−s)/(hi−lo)` for lower-is-better. Not clipped:
        a score outside the typical range keeps its distance, so Δ keeps its sign."""
        span = self.high - self.low
        if self.lower_better:
            return 100.0 * (self.high - score) / span
        return 100.0 * (score - self.low) / span

    def flipped(self) -> Scale:
        return Scale(self.low, self.high, not self.lower_better)


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
