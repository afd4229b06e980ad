"""Metrics whose verdicts on the test sets are known by construction (numpy only, no torch).

The test images (`tests.conftest.noisy_image`) are a linear gradient plus Gaussian noise of
σ = 3·step. Immerkær's 3×3 kernel cancels a linear gradient exactly, so `noise_level` reads the
injected σ back: it rises with the step and, lower being better, every Δ is negative: every case
passes. `noise_level_reversed` is the same number called higher-is-better: every case fails.
Copied into a pytester folder (`install_known_metrics`), they load as `known_metrics:<name>`.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from metrics_under_test.protocol import Image, metric

_KERNEL = np.array([[1.0, -2.0, 1.0], [-2.0, 4.0, -2.0], [1.0, -2.0, 1.0]])


def sigma(img: Image) -> float:
    """Immerkær's noise σ of the mean of the channels (CVIU 64(2), 1996)."""
    y = img.astype(np.float64).mean(axis=-1)
    h, w = y.shape
    response = sum(_KERNEL[i, j] * y[i : h - 2 + i, j : w - 2 + j] for i in range(3) for j in range(3))
    return float(np.abs(response).mean() * math.sqrt(math.pi / 2) / 6)


@metric("noise_level", lower_better=True, score_range=(0.0, 100.0), cost="fast")
def noise_level(images: Sequence[Image]) -> list[float]:
    """The injected noise σ; lower is better, so it detects every step of the test sets."""
    return [sigma(img) for img in images]


@metric("noise_level_reversed", lower_better=False, score_range=(0.0, 100.0), cost="fast")
def noise_level_reversed(images: Sequence[Image]) -> list[float]:
    """The same σ read as higher-is-better: it misses every step of the test sets."""
    return [sigma(img) for img in images]


def install_known_metrics(folder: Path) -> str:
    """Copy this module into `folder` (the folder a run starts in); return its module name."""
    shutil.copyfile(__file__, folder / "known_metrics.py")
    return "known_metrics"


@metric("interrupted", lower_better=True, score_range=(0.0, 100.0), cost="fast")
def interrupted(images: Sequence[Image]) -> list[float]:
    """Ctrl-C while scoring: the run stops with pytest's exit code 2."""
    raise KeyboardInterrupt
