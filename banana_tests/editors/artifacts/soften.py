"""Soften: fine detail lost a little each round (a small Gaussian blur of the previous output).

Paper: "texture simplification" (Qwen Image Edit) and lost fine texture in every generator's
replicas; compounded over rounds, it is what makes the replica smoother than its input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from banana_tests.editors.artifacts.common import Array, bounded
from banana_tests.trajectories.records import Artifact

NAME = Artifact.SOFTEN


@dataclass(frozen=True)
class Params:
    sigma: float = bounded(0.0, 1.5, 0.37)
    """Gaussian blur (px) a round; about sigma·√n accumulated after n rounds."""


def apply(x: Array, rng: np.random.Generator, step: int, params: Params) -> Array:
    if params.sigma <= 0:
        return x
    return np.asarray(ndimage.gaussian_filter(x, sigma=(params.sigma, params.sigma, 0), mode="reflect"))
