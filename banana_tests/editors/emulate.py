"""An offline stand-in for an editing model asked, again and again, for an exact replica.

Real models (Nano Banana Pro and others) given "Produce an exact replica of the provided
image, with no alterations." do not return the input: the first output is cropped and
resized, and every round after that loses a little fine texture, adds fresh noise that piles
up like static, and drifts the colour balance (green, for Nano Banana Pro). This module
reproduces those four effects with numpy/scipy/PIL so a trajectory set can be built, and
rebuilt bit for bit, with no network and no model. The defaults were calibrated so that the
embedded set's BRISQUE, NIQE and PIQE failure rates fall near the paper's published ones
(`benchmarks/calibrate_emulator.py`; docs/datasets.md gives the reasons).

Determinism: every random draw comes from a numpy Generator seeded by a SHA-256 of
(seed, key, run, step) – never Python's `hash()`, which is salted per process.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from PIL import Image
from scipy import ndimage


@dataclass(frozen=True)
class EmulatorParams:
    """How much each round degrades the image. Defaults target 8-bit images of ~384 px and are
    the calibrated embedded recipe.

    Intensities are in 8-bit code values (0..255); tint rates are relative gains per step.
    """

    crop_fraction: float = 0.9
    """Step 1 keeps this central fraction of width and height (the model's reframing)."""
    long_side: int = 384
    """Step 1 resizes so the long side has this many pixels; later steps keep the size."""
    size_multiple: int = 8
    """Step 1 rounds the short side to a multiple of this, as model outputs are (2816x1504)."""
    blur_sigma: float = 0.37
    """Gaussian blur (px) applied to the previous image each step: the loss of fine texture."""
    luma_noise: float = 6.0
    """Std of fresh Gaussian noise added equally to R, G, B each step (static that accumulates)."""
    chroma_noise: float = 1.5
    """Std of fresh, independent per-channel Gaussian noise each step (colour speckle)."""
    tint_rate: float = 0.0025
    """Per-step gain drift along the green bias (G up, R and B down by half as much)."""
    tint_bias: tuple[float, float, float] = (-0.5, 1.0, -0.5)
    """Direction (R, G, B) of the systematic drift; zero-sum, so a tint, not a brightness change."""
    tint_run: float = 0.001
    """Per-step gain drift along a random, zero-sum direction fixed for each run."""
    tint_walk: float = 0.0005
    """Std of a fresh per-step, per-channel gain jitter: the random-walk part of the drift."""
    latent_factor: float = 1.0
    """Each step resamples to a grid this many times coarser (area average) and back (bicubic):
    the encode/decode round trip of a latent editing model. 1 = no round trip."""
    sharpen: float = 0.0
    """Unsharp-mask amount applied after the round trip: the decoder's crisp, re-invented edges,
    which also sharpen the static already in the image. 0 = none."""
    sharpen_sigma: float = 1.0
    """Radius (Gaussian sigma, px) of the unsharp mask."""
    noise_grain: float = 0.75
    """Correlation length (Gaussian sigma, px) of the fresh luma noise; 0 = white, per-pixel noise.
    The noise is rescaled after filtering, so `luma_noise` stays its std."""


def _rng(*parts: object) -> np.random.Generator:
    """A Generator seeded by a stable hash of `parts` (same numbers on every machine and run)."""
    text = "banana-emulate|" + "|".join(str(p) for p in parts)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def _zero_sum_unit(v: np.ndarray) -> np.ndarray:
    """`v` made zero-sum (a pure chroma direction) and scaled to unit length."""
    v = v - v.mean()
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _noise(rng: np.random.Generator, shape: tuple[int, int, int], grain: float) -> np.ndarray:
    """Unit-std Gaussian noise; with `grain` > 0, spatially correlated over about `grain` px."""
    noise = rng.standard_normal(shape)
    if grain <= 0:
        return noise
    noise = ndimage.gaussian_filter(noise, sigma=(grain, grain, 0), mode="wrap")
    return noise / float(noise.std())


def _round_trip(x: np.ndarray, factor: float) -> np.ndarray:
    """`x` (H, W, 3 floats) area-averaged to a grid `factor` times coarser, then bicubic back up."""
    h, w, _ = x.shape
    small = (max(1, round(w / factor)), max(1, round(h / factor)))
    channels = []
    for c in range(x.shape[2]):
        plane = Image.fromarray(np.ascontiguousarray(x[..., c], dtype=np.float32), mode="F")
        plane = plane.resize(small, Image.Resampling.BOX).resize((w, h), Image.Resampling.BICUBIC)
        channels.append(np.asarray(plane, dtype=np.float64))
    return np.stack(channels, axis=-1)


class ReplicaEmulator:
    """Turns step n-1 into step n of a "produce an exact replica" trajectory."""

    def __init__(self, params: EmulatorParams = EmulatorParams(), seed: int = 0) -> None:
        self.params = params
        self.seed = seed

    def edit(self, image: Image.Image, *, step: int, run: int, key: str) -> Image.Image:
        """Return the model's "replica" of `image` (the previous step's output) at `step`.

        `key` names the trajectory (e.g. the seed image) so that different images, runs and
        steps get independent noise, while the same (seed, key, run, step) always gives the
        same output.
        """
        if step < 1:
            raise ValueError(f"step must be >= 1 (step 0 is the seed image), got {step}")
        p = self.params
        if step == 1:
            image = self._reframe(image.convert("RGB"))
        x = np.asarray(image.convert("RGB"), dtype=np.float64)
        rng = _rng(self.seed, key, run, step)
        if p.latent_factor != 1.0:
            x = _round_trip(x, p.latent_factor)
        if p.blur_sigma > 0:
            x = ndimage.gaussian_filter(x, sigma=(p.blur_sigma, p.blur_sigma, 0), mode="reflect")
        if p.sharpen > 0:
            soft = ndimage.gaussian_filter(x, sigma=(p.sharpen_sigma, p.sharpen_sigma, 0), mode="reflect")
            x += p.sharpen * (x - soft)
        x *= 1.0 + self._tint_step(rng, key, run)
        h, w, _ = x.shape
        x += p.luma_noise * _noise(rng, (h, w, 1), p.noise_grain)
        x += p.chroma_noise * rng.standard_normal((h, w, 3))
        return Image.fromarray(np.clip(np.rint(x), 0, 255).astype(np.uint8), mode="RGB")

    def _reframe(self, image: Image.Image) -> Image.Image:
        """Step 1's central crop and resize, like the model's 5632x3072 -> 2816x1504."""
        p = self.params
        w, h = image.size
        cw, ch = max(1, round(w * p.crop_fraction)), max(1, round(h * p.crop_fraction))
        left, top = (w - cw) // 2, (h - ch) // 2
        image = image.crop((left, top, left + cw, top + ch))
        scale = p.long_side / max(cw, ch)
        m = max(1, p.size_multiple)
        short = max(m, round(min(cw, ch) * scale / m) * m)
        size = (p.long_side, short) if cw >= ch else (short, p.long_side)
        return image.resize(size, Image.Resampling.LANCZOS)

    def _tint_step(self, rng: np.random.Generator, key: str, run: int) -> np.ndarray:
        """This step's per-channel gain change; summed over steps (in the image) it is the drift."""
        p = self.params
        bias = np.asarray(p.tint_bias, dtype=np.float64)
        direction = _zero_sum_unit(_rng(self.seed, key, run, "tint-direction").standard_normal(3))
        return p.tint_rate * bias + p.tint_run * direction + p.tint_walk * rng.standard_normal(3)
