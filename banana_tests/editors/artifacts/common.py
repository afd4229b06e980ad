"""What every artifact family shares: stable random draws and documented parameter ranges.

A family is a physical mechanism with a few typed parameters (a frozen dataclass whose fields
carry their plausible `range` in their metadata) and a pure `apply(x, rng, step, params)` on an
(H, W, 3) float64 array in 8-bit code values. Pure: the same array, generator state, step and
parameters give the same array, so a hypothesis search can draw parameters from `ranges()` and
call `apply` outside the trajectory generator.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
"""An (H, W, 3) image in 8-bit code values (0..255), as floats so effects compose before rounding."""

LUMA = np.array([0.299, 0.587, 0.114])
"""Rec. 601 luma weights: what the metrics (and people) read as brightness."""


def stable_rng(*parts: object) -> np.random.Generator:
    """A Generator seeded by a SHA-256 of `parts`: the same numbers on every machine and run
    (never Python's `hash()`, which is salted per process)."""
    text = "banana-emulate|" + "|".join(str(p) for p in parts)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "big"))


def bounded(lo: float, hi: float, default: Any) -> Any:
    """A dataclass field with its plausible range recorded for searches and `check_ranges`."""
    return dataclasses.field(default=default, metadata={"range": (lo, hi)})


def ranges(params: type) -> dict[str, tuple[float, float]]:
    """Each numeric parameter of a family's parameter class and its documented range."""
    return {f.name: f.metadata["range"] for f in dataclasses.fields(params) if "range" in f.metadata}


def check_ranges(params: object) -> None:
    """Refuse parameters outside their documented range, naming the family and field."""
    family = type(params).__module__.rsplit(".", 1)[-1]
    for name, (lo, hi) in ranges(type(params)).items():
        value = getattr(params, name)
        if not lo <= value <= hi:
            raise ValueError(f"{family}.{name}={value} is outside [{lo}, {hi}]")


def luma(x: Array) -> NDArray[np.float64]:
    """The (H, W) luma of an (H, W, 3) image."""
    return np.asarray(x @ LUMA, dtype=np.float64)
