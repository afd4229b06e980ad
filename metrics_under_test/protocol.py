"""The small protocol every metric on trial speaks, pyiqa's or your own, and how the suite reads
what a metric returns.

A batch is a list of RGB images as uint8 numpy arrays of shape (H, W, 3); sizes may differ.
A metric returns one finite float per image.

Each returned value is read once into a Python float (`as_score`). A metric may return Python
numbers, numpy scalars or one-element arrays and tensors; what `float()` would quietly take but is
no score is refused with the reason: text (`"0.5"`), a boolean (`True` is 1.0 to `float`), a
complex number, a tensor on the meta device (it holds no value), several values where one is due.
Low-precision floats (float16, bfloat16) are scores, widened exactly to a float64; their
resolution is the metric's own, to be covered by its `snapshot_points`. A score the suite keeps
(scored, cached, merged) is finite and within ±SCORE_BOUND: wide enough for any real metric
(BRISQUE's 0–150; the Laplacian variance of 8-bit pixels is at most about 1.04e6), narrow enough
that normalising it never overflows to a Δ of ±inf, as 1e308 did.
"""

from __future__ import annotations

import math
import numbers
import traceback
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, runtime_checkable

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


SCORE_BOUND = 1e12


def in_bound(score: float) -> bool:
    """A finite score within ±SCORE_BOUND."""
    return math.isfinite(score) and abs(score) <= SCORE_BOUND


class NotAScore(ValueError):
    """A returned value that is no real number; the message says what it is."""


def as_list(raw: Any) -> list[Any]:
    """A batch's returned scores as a list, or NotAScore when they are no sequence (None, text, a
    number, a 0-d tensor)."""
    if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        raise NotAScore(f"{short(raw)}, not one float per image")
    try:
        return list(raw)
    except Exception as exc:  # a 0-d tensor or array cannot be iterated
        raise NotAScore(f"{short(raw)}, not one float per image ({type(exc).__name__}: {exc})") from None


def as_score(value: Any) -> float:
    """`value` as a float, or NotAScore saying why it is none (finiteness is the caller's check)."""
    if isinstance(value, str | bytes | bytearray):
        raise NotAScore(f"{short(value)}, text, not a number")
    if isinstance(value, bool):
        raise NotAScore(f"{value!r}, a boolean, not a score")
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        value = _element(value, dtype)
    if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
        raise NotAScore(f"{short(value)}, a complex number, not a score")
    try:
        return float(value)
    except Exception as exc:  # what a tensor or an object raises is its own: TypeError, RuntimeError, ...
        raise NotAScore(f"{short(value)}, not a number ({type(exc).__name__}: {exc})") from None


def _element(value: Any, dtype: Any) -> Any:
    """The one element of a numpy or torch value, its dtype checked first."""
    kind = getattr(dtype, "kind", None)  # numpy's: b(ool), c(omplex), f, i, u, or not a number
    text = str(dtype)
    if kind == "b" or text == "torch.bool":
        raise NotAScore(f"{short(value)}, a boolean, not a score")
    if kind == "c" or getattr(dtype, "is_complex", False):
        raise NotAScore(f"{short(value)}, a complex number ({text}), not a score")
    if kind is not None and kind not in "fiu":
        raise NotAScore(f"{short(value)} of dtype {text}, not a number")
    if getattr(value, "is_meta", False):
        raise NotAScore(f"a tensor on the meta device ({text}), which holds no value")
    size = getattr(value, "size", None)
    count = size if isinstance(size, int) else value.numel() if hasattr(value, "numel") else 1
    if count != 1:
        raise NotAScore(f"{short(value)}, {count} values where one is due")
    return value.item() if hasattr(value, "item") else value


def short(value: object, limit: int = 80) -> str:
    """`repr(value)` on one line, cut to `limit` characters."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
