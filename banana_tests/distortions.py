"""Classical distortions at a strength in [0, 1]: the controls the classical metrics were built for.

Strength 0 leaves the image unchanged; 1 is severe (noise σ 50, blur radius 5 px, JPEG quality 5).
"""

from __future__ import annotations

import io
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageFilter

Array = NDArray[np.uint8]


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
