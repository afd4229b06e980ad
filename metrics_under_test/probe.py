"""The load-time probe: a custom metric scores crops of the shipped seed images before its first case.

What every case needs and nothing more: one finite real number per image of a batch (text,
booleans, complex numbers and meta tensors are refused: `score_value`), and another image
shape in another call (the suite batches images of one size together). Realistic content, not a
synthetic pattern: a published BRISQUE returns NaN on a flat checkerboard yet scores every real
image, and the probe must not reject a metric the cases would accept. A metric that fails it gets
one `MetricError` naming the probe, the probe image and what came back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from metrics_under_test.protocol import Image, MetricError, raised_at
from metrics_under_test.score_value import NotAScore, as_list, as_score, short
from metrics_under_test.weights import MissingWeights, NotPublished


@dataclass(frozen=True)
class ProbeImage:
    """A centre crop of one shipped seed image."""

    seed: str  # file name in banana_tests.data.SEEDS
    height: int
    width: int

    def __str__(self) -> str:
        return f"{self.seed} ({self.height}×{self.width} crop)"

    def pixels(self) -> Image:
        import numpy as np
        from banana_tests.data import SEEDS
        from PIL import Image as PILImage

        with PILImage.open(SEEDS / self.seed) as file:
            whole = np.asarray(file.convert("RGB"))
        top, left = (max(0, whole.shape[0] - self.height) // 2, max(0, whole.shape[1] - self.width) // 2)
        return np.ascontiguousarray(whole[top : top + self.height, left : left + self.width])

    def at_least(self, side: int | None) -> ProbeImage:
        """This crop at least `side` px high and wide (a metric's `min_side`), as far as its seed
        image allows."""
        if not side:
            return self
        return replace(self, height=max(self.height, side), width=max(self.width, side))


PROBE: tuple[tuple[ProbeImage, ...], ...] = (
    (ProbeImage("astronaut.png", 256, 256), ProbeImage("brick.png", 256, 256)),  # a batch of two
    (ProbeImage("coffee.png", 192, 320),),  # another shape, not square, in a call of its own
)
"""The probe's calls, each a batch. Typical sizes of the suite's images (its control crops are
160 to 320 px, its seed images 384 px wide)."""


def probe(name: str, metric: Callable[[Sequence[Image]], Sequence[float]]) -> None:
    """Score each of PROBE's batches with `metric`; a MetricError at the first that fails."""
    side = getattr(metric, "min_side", None)
    for planned in PROBE:
        batch = tuple(image.at_least(side) for image in planned)
        where = " and ".join(map(str, batch))
        try:
            raw = metric([image.pixels() for image in batch])  # fresh: a metric may write into them
        except (MissingWeights, NotPublished):
            raise  # weights fetched at the first call: the weights' rules, not a probe failure
        except Exception as exc:
            raise _failed(name, where, f"it raised {type(exc).__name__}: {exc}{raised_at(exc)}") from exc
        problem = _problem(batch, raw)
        if problem:
            raise _failed(name, where, problem)


def _failed(name: str, where: str, what: str) -> MetricError:
    return MetricError(f"metric {name!r} failed the load-time probe (its scores on {where}): {what}")


def _problem(batch: Sequence[ProbeImage], raw: Any) -> str:
    """What is wrong with `raw` as the scores of `batch`, or ''."""
    try:
        returned = as_list(raw)
    except NotAScore as exc:
        return f"it returned {exc}"
    if len(returned) != len(batch):
        return f"it returned {len(returned)} score(s) for {len(batch)} image(s): {short(returned, 120)}"
    try:
        values = [as_score(v) for v in returned]
    except NotAScore as exc:
        return f"it returned {exc}: return one float per image"
    bad = [f"{image}: {v!r}" for image, v in zip(batch, values, strict=True) if not math.isfinite(v)]
    return f"non-finite score(s), {'; '.join(bad)}" if bad else ""
