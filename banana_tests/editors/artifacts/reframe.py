"""Reframe: the first output's crop and resample.

Paper: Nano Banana Pro crops and resizes its first output (Ekphrasis 5632×3072 came back
2816×1504 at 2K), which is why step 1, not step 0, is the reference. Only step 1 is touched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from banana_tests.editors.artifacts.common import Array, bounded

NAME = "reframe"


@dataclass(frozen=True)
class Params:
    crop_fraction: float = bounded(0.5, 1.0, 0.9)
    """Step 1 keeps this central fraction of width and height."""
    long_side: int = bounded(16, 8192, 384)
    """Step 1 resamples (LANCZOS) so the long side has this many pixels: the model's output grid."""
    size_multiple: int = bounded(1, 64, 8)
    """The short side is rounded to a multiple of this, as model outputs are (2816x1504)."""


def apply(x: Array, rng: np.random.Generator, step: int, params: Params) -> Array:
    """Step 1: the central crop, resampled to the output grid; later steps: `x` unchanged.
    Step 1's input is 8-bit, so the resample runs on the rounded image."""
    if step != 1:
        return x
    image = Image.fromarray(np.clip(np.rint(x), 0, 255).astype(np.uint8), mode="RGB")
    w, h = image.size
    cw, ch = max(1, round(w * params.crop_fraction)), max(1, round(h * params.crop_fraction))
    left, top = (w - cw) // 2, (h - ch) // 2
    image = image.crop((left, top, left + cw, top + ch))
    scale = params.long_side / max(cw, ch)
    m = max(1, params.size_multiple)
    short = max(m, round(min(cw, ch) * scale / m) * m)
    size = (params.long_side, short) if cw >= ch else (short, params.long_side)
    return np.asarray(image.resize(size, Image.Resampling.LANCZOS), dtype=np.float64)
