"""What the suite knows about a metric before loading it: its range, direction and files.

Apart from the registry so that custom metrics can build a spec without importing the registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from metrics_under_test.scale import Scale
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
