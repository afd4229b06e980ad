"""Scatter: a few isolated bright or dark points appear each round and stay.

Paper: "scatter points" are FLUX.2's signature artifact (its Figure 9): small isolated specks
over otherwise clean regions. Each round adds a Poisson number of Gaussian spots of random sign
at random places; the rest of the image is untouched, so the share of pixels changed is bounded
by the density.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from banana_tests.editors.artifacts.common import Array, bounded
from banana_tests.trajectories.records import Artifact

NAME = Artifact.SCATTER


@dataclass(frozen=True)
class Params:
    density: float = bounded(0.0, 0.01, 0.0005)
    """Expected new points a round, per pixel."""
    amplitude: float = bounded(0.0, 128.0, 40.0)
    """Peak change (8-bit levels) at a point's centre, equal in R, G and B; the sign is random."""
    radius: float = bounded(0.3, 3.0, 0.7)
    """Gaussian sigma (px) of a point."""


def apply(x: Array, rng: np.random.Generator, step: int, params: Params) -> Array:
    h, w, _ = x.shape
    count = int(rng.poisson(params.density * h * w))
    if count == 0 or params.amplitude <= 0:
        return x
    rows, cols = rng.integers(0, h, count), rng.integers(0, w, count)
    signs = rng.choice((-1.0, 1.0), count)
    impulses = np.zeros((h, w))
    np.add.at(impulses, (rows, cols), signs)
    r = params.radius
    spots = ndimage.gaussian_filter(impulses, sigma=r, mode="constant", truncate=3.0) * (2 * np.pi * r * r)
    return x + params.amplitude * spots[..., None]
