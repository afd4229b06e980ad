"""Tint: the colour balance drifts a little each round, towards green, at constant luminance.

Paper: a "green tint" accompanies the static in Nano Banana Pro's replicas. Modelled as a white
balance (per-channel gain) change a round: a systematic step along `bias` plus a random walk,
both made orthogonal to the luma weights, so a grey pixel keeps its brightness exactly and a
coloured one nearly: the drift is colour, not light.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from banana_tests.editors.artifacts.common import LUMA, Array, bounded
from banana_tests.trajectories.records import Artifact

NAME = Artifact.TINT


@dataclass(frozen=True)
class Params:
    rate: float = bounded(0.0, 0.02, 0.0025)
    """Gain change a round along `bias` (0.0025: about 5 % by step 20)."""
    walk: float = bounded(0.0, 0.01, 0.0005)
    """Std of a fresh per-round gain jitter (the random-walk part of the drift)."""
    bias: tuple[float, float, float] = (-0.5, 1.0, -0.5)
    """Direction (R, G, B) of the systematic drift before it is made luma-neutral: green."""


def luma_neutral(v: np.ndarray) -> np.ndarray:
    """`v` with its component along the luma weights removed, scaled to unit length."""
    v = np.asarray(v, dtype=np.float64)
    v = v - (v @ LUMA) / (LUMA @ LUMA) * LUMA
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def gain(rng: np.random.Generator, params: Params) -> np.ndarray:
    """This round's per-channel gain change; its sum over rounds is the drift."""
    return params.rate * luma_neutral(np.asarray(params.bias)) + params.walk * luma_neutral(
        rng.standard_normal(3)
    )


def apply(x: Array, rng: np.random.Generator, step: int, params: Params) -> Array:
    return x * (1.0 + gain(rng, params))
