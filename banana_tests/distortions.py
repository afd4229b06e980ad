"""Classical distortions at a strength in [0, 1]: the controls the classical metrics were built for,
and the crops of the clean seed images they distort (the control, invariance and search cases').

Strength 0 leaves the image unchanged; 1 is severe (noise σ 50, blur radius 5 px, JPEG quality 5).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageFilter

from banana_tests.data import SEEDS

Array = NDArray[np.uint8]
CROP = (160, 320)  # the side lengths, px, a control or search crop is drawn from


def gaussian_noise(image: Array, strength: float, seed: int = 0) -> Array:
    noise = np.random.default_rng(seed).normal(0.0, 50.0 * strength, image.shape)
    return np.clip(image.astype(np.float64) + noise, 0, 255).round().astype(np.uint8)


def gaussian_blur(image: Array, strength: float, seed: int = 0) -> Array:
    blurred = Image.fromarray(image).filter(ImageFilter.GaussianBlur(radius=5.0 * strength))
    return np.asarray(blurred, dtype=np.uint8)


def jpeg(image: Array, strength: float, seed: int = 0) -> Array:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="JPEG", quality=round(95 - 90 * strength))
    with Image.open(buffer) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8)


DISTORTIONS: dict[str, Callable[[Array, float, int], Array]] = {
    "gaussian_noise": gaussian_noise,
    "gaussian_blur": gaussian_blur,
    "jpeg": jpeg,
}


@cache
def clean_images() -> dict[str, Array]:
    """The embedded set's seed images before any edit (shipped PNGs): clean, varied content."""
    paths = sorted(SEEDS.glob("*.png"))
    if not paths:
        raise FileNotFoundError(f"{SEEDS}: no seed images; rebuild them with `banana-tests fixtures refresh`")
    return {p.stem: np.asarray(Image.open(p).convert("RGB")) for p in paths}


@dataclass(frozen=True)
class Crop:
    """A drawn crop, by seed image and box: hypothesis prints a falsifying example's arguments,
    and this repr keeps ~150,000 pixel values out of the report."""

    seed_image: str
    top: int
    left: int
    height: int
    width: int

    def __repr__(self) -> str:
        box = f"{self.top}:{self.top + self.height}, {self.left}:{self.left + self.width}"
        return f"{self.seed_image}[{box}] ({self.width}x{self.height})"

    @property
    def pixels(self) -> Array:
        box = (slice(self.top, self.top + self.height), slice(self.left, self.left + self.width))
        return np.ascontiguousarray(clean_images()[self.seed_image][box])

    def at_least(self, side: int | None) -> Crop:
        """This crop grown about its centre to `side` px in each dimension where it is smaller (a
        metric's `min_side`), as far as its seed image allows."""
        height, width = clean_images()[self.seed_image].shape[:2]
        top, h = _grown(self.top, self.height, side or 0, height)
        left, w = _grown(self.left, self.width, side or 0, width)
        return Crop(self.seed_image, top, left, h, w)


def _grown(start: int, length: int, side: int, limit: int) -> tuple[int, int]:
    """(start, length) of a span grown to `side` about its centre, kept within [0, limit)."""
    if length >= side:
        return start, length
    grown = min(side, limit)
    return max(0, min(start - (grown - length) // 2, limit - grown)), grown


def write_lossless(path: Path, pixels: Array) -> Path:
    """Saved losslessly in the format its suffix names (PNG, or WebP with `lossless`)."""
    Image.fromarray(pixels).save(path, lossless=True)
    return path
