"""The small protocol every metric on trial speaks, pyiqa's or your own.

A batch is a list of RGB images as uint8 numpy arrays of shape (H, W, 3); sizes may differ.
A metric returns one finite float per image.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# A forward reference (PEP 613), so that a run whose scores are all cached never imports numpy.
Image: TypeAlias = "NDArray[np.uint8]"


@runtime_checkable
class Metric(Protocol):
    """What the suite needs from a metric."""

    name: str
    lower_better: bool
    score_range: tuple[float, float]  # the typical range used to normalise to [0, 100]

    def __call__(self, images: Sequence[Image]) -> Sequence[float]: ...


class MetricError(Exception):
    """A metric broke the protocol; the message says which part."""


class UnscoredImages(MetricError):
    """Some images of a batch got no score; `reasons` says why for each batch position, `scores`
    holds the others' scores, so the suite can fail those images alone, naming each."""

    def __init__(self, metric: str, scores: list[float | None], reasons: dict[int, str]) -> None:
        listed = "; ".join(f"batch position {i}: {why}" for i, why in sorted(reasons.items()))
        super().__init__(f"metric {metric!r} could not score {len(reasons)} image(s): {listed}")
        self.metric, self.scores, self.reasons = metric, scores, reasons


F = TypeVar("F", bound=Callable[[Sequence[Image]], Sequence[float]])


def metric(
    name: str,
    *,
    lower_better: bool,
    score_range: tuple[float, float],
    cost: str = "fast",
    min_side: int | None = None,
) -> Callable[[F], F]:
    """Turn a plain batch function into a `Metric` by giving it the protocol's attributes;
    `min_side`: the smallest height and width, in pixels, it can score (None: any)."""

    def mark(fn: F) -> F:
        fn.name = name  # type: ignore[attr-defined]
        fn.lower_better = lower_better  # type: ignore[attr-defined]
        fn.score_range = score_range  # type: ignore[attr-defined]
        fn.cost = cost  # type: ignore[attr-defined]
        if min_side is not None:
            fn.min_side = min_side  # type: ignore[attr-defined]
        return fn

    return mark


def raised_at(exc: BaseException) -> str:
    """Where `exc` was raised, as ` (at file:line in function)`: the one-line error keeps no
    traceback (it would hold the batch's frames and tensors), but a metric's bug must show where."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    inner = frames[-1]
    return f" (at {inner.filename}:{inner.lineno} in {inner.name})"
