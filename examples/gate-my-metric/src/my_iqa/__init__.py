"""my-iqa: a tiny no-reference IQA model, put on trial by banana-tests.

Colourfulness (Hasler & Süsstrunk, "Measuring colourfulness in natural images", SPIE 5007, 2003)
is a classic NR-IQA feature: washed-out colour reads as low quality. It needs numpy only, and
speaks banana-tests' metric protocol by duck typing, so this package does not import banana-tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["Colourfulness", "colourfulness"]


def colourfulness(image: NDArray[np.uint8]) -> float:
    """M = σ_rgyb + 0.3·μ_rgyb over the opponent channels rg = R−G and yb = (R+G)/2 − B.

    The spread of colour around its mean plus how far that mean sits from grey, on 0..255 sRGB.
    """
    rgb = image.astype(np.float64)
    rg = rgb[..., 0] - rgb[..., 1]
    yb = 0.5 * (rgb[..., 0] + rgb[..., 1]) - rgb[..., 2]
    return float(np.hypot(rg.std(), yb.std()) + 0.3 * np.hypot(rg.mean(), yb.mean()))


class Colourfulness:
    """The metric banana-tests builds: protocol attributes on the class, scores from `__call__`.

    Higher is better. The authors' scale puts "not colourful" at 0, "moderately" at 33 and
    "extremely colourful" at 109, hence the typical range (0, 110) used to normalise scores.
    """

    name = "colourfulness"
    lower_better = False
    score_range = (0.0, 110.0)
    cost = "fast"
    version = "1"  # bump when the scores change on purpose; it is part of the score cache key

    def __call__(self, images: Sequence[NDArray[np.uint8]]) -> list[float]:
        return [colourfulness(image) for image in images]
