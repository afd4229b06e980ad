"""Resynthesis: fine texture is re-invented, plausible but wrong, at the same local energy.

Paper: "high-frequency details distorted" and texture re-invented rather than copied (and
"texture simplification" for Qwen Image Edit): a generative model redraws detail it cannot copy.
Not a blur: each round a share of the image's fine band (spatial frequencies above `cutoff`,
split off sharply in the Fourier domain so the band and the rest share no frequency) is replaced
by a phase-randomised copy of that band (the same power spectrum, new structure), rescaled to the
band's local energy. The band's energy and spectrum stay; the content does not,
so PSNR against the input falls while a spectrum or a local-contrast statistic barely moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from banana_tests.editors.artifacts.common import Array, bounded, luma
from banana_tests.trajectories.records import Artifact

NAME = Artifact.RESYNTHESIS


@dataclass(frozen=True)
class Params:
    share: float = bounded(0.0, 1.0, 0.1)
    """Share of the fine band's energy replaced a round (0: none, 1: all of it)."""
    cutoff: float = bounded(0.02, 0.5, 0.16)
    """The fine band's lowest spatial frequency (cycles per pixel; 0.5 is the finest)."""
    window: float = bounded(1.0, 16.0, 4.0)
    """Gaussian sigma (px) over which the local energy is kept."""


def _local_rms(band: np.ndarray, window: float) -> np.ndarray:
    axes = (window, window, 0)[: band.ndim]
    return np.sqrt(np.maximum(ndimage.gaussian_filter(band * band, sigma=axes, mode="reflect"), 0.0))


def apply(x: Array, rng: np.random.Generator, step: int, params: Params) -> Array:
    if params.share <= 0:
        return x
    h, w, _ = x.shape
    fine = np.hypot(*np.meshgrid(np.fft.fftfreq(h), np.fft.rfftfreq(w), indexing="ij")) >= params.cutoff
    band = np.fft.irfft2(np.fft.rfft2(x, axes=(0, 1)) * fine[..., None], s=(h, w), axes=(0, 1))
    low = x - band
    phase = np.exp(1j * np.angle(np.fft.rfft2(rng.standard_normal((h, w)))))
    texture = np.fft.irfft2(np.fft.rfft2(luma(band)) * phase, s=(h, w))
    texture /= np.maximum(_local_rms(texture, params.window), 1e-6)
    energy = _local_rms(band, params.window)
    keep, new = np.sqrt(1.0 - params.share), np.sqrt(params.share)
    return low + keep * band + new * energy * texture[..., None]
