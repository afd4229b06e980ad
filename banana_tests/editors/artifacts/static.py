"""Static: fresh, spatially correlated noise each round, piling up like a decoder's grain.

Paper: "static noise" is the first artifact it names for Nano Banana Pro: visible after 5–10
replications and growing with them. A decoder paints it over a pixel or so (blotchy, not
per-pixel white), mostly in luminance with weaker colour speckle. Zero-mean by construction: the
image's mean colour is kept (up to clipping at 0 and 255).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from banana_tests.editors.artifacts.common import Array, bounded
from banana_tests.trajectories.records import Artifact

NAME = Artifact.STATIC


@dataclass(frozen=True)
class Params:
    amplitude: float = bounded(0.0, 16.0, 6.0)
    """Std (8-bit levels) of the fresh luminance static a round, equal in R, G and B."""
    grain: float = bounded(0.0, 3.0, 0.75)
    """Correlation length (Gaussian sigma, px) of the static; 0 = white, per-pixel noise. The noise
    is rescaled after filtering, so `amplitude` stays its std."""
    chroma: float = bounded(0.0, 8.0, 1.5)
    """Std (8-bit levels) of fresh, independent per-channel speckle a round."""


def apply(x: Array, rng: np.random.Generator, step: int, params: Params) -> Array:
    h, w, _ = x.shape
    noise = rng.standard_normal((h, w, 1))
    if params.grain > 0:
        noise = ndimage.gaussian_filter(noise, sigma=(params.grain, params.grain, 0), mode="wrap")
    noise = params.amplitude * (noise - noise.mean()) / max(float(noise.std()), 1e-12)
    speckle = params.chroma * rng.standard_normal((h, w, 3))
    speckle -= speckle.mean(axis=(0, 1))
    return x + noise + speckle
