"""A drawn degradation: typed parameters that turn a clean image into a degraded one.

The search family (banana_tests/families/search/test_search.py) draws these with hypothesis and asks whether a
metric still scores the result as well as the clean image. This module is the one seam between
the search and the emulator: `Degradation` names the parameters, `RANGES` their searched ranges,
`degradations()` the strategy that draws them and `Degradation.apply` the pixels. It is written on
the emulator's artifact families (`banana_tests.editors.artifacts`): a strength for each of
soften, resynthesis, tint, static and scatter, over a number of replica rounds; the families'
other parameters stay at the embedded recipe's, and step 1's reframing is left out, so the
degraded image keeps the clean one's geometry and PSNR/SSIM compare pixel for pixel.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from banana_tests.editors.artifacts import ranges
from banana_tests.editors.offline_editors import EmulatorParams, ReplicaEmulator

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from banana_tests.distortions import Array

STRENGTHS: dict[str, tuple[str, str]] = {
    "soften_sigma": ("soften", "sigma"),
    "resynthesis_share": ("resynthesis", "share"),
    "tint_rate": ("tint", "rate"),
    "static_amplitude": ("static", "amplitude"),
    "static_chroma": ("static", "chroma"),
    "scatter_density": ("scatter", "density"),
}
"""Each searched strength: the family and its parameter."""


def _searched(family: str, parameter: str) -> tuple[float, float]:
    """From nothing to twice the embedded recipe's strength, within the family's documented range."""
    params = getattr(EmulatorParams(), family)
    low, high = ranges(type(params))[parameter]
    return (float(low), float(min(high, 2 * getattr(params, parameter))))


RANGES: dict[str, tuple[float, float]] = {
    "steps": (1, 20),  # replica rounds, as the paper's trajectories (Δ5, Δ10, Δ20)
    **{name: _searched(*where) for name, where in STRENGTHS.items()},
}
"""Each parameter's range: from nothing (the lower end) to twice the embedded recipe's strength
(docs/trial.md, "The worst escape"). Hypothesis shrinks towards the lower ends."""
SEEDS = (0, 2**16 - 1)
"""The emulator seeds drawn."""


@dataclass(frozen=True)
class Degradation:
    """`steps` rounds of the replica emulator at these strengths, its draws seeded by `seed`."""

    steps: int = 1
    soften_sigma: float = 0.0
    resynthesis_share: float = 0.0
    tint_rate: float = 0.0
    static_amplitude: float = 0.0
    static_chroma: float = 0.0
    scatter_density: float = 0.0
    seed: int = 0

    @classmethod
    def from_data(cls, values: object) -> Degradation:
        """A degradation read back from data (a replay file), checked as the search draws one:
        every field, of its type, within `RANGES` (themselves within the families' documented
        ranges) or `SEEDS`; a ValueError names the first field that is not."""
        if not isinstance(values, Mapping):
            raise ValueError(f"degradation is {type(values).__name__}, not an object")
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(fields), key=str)
        if unknown:
            raise ValueError(f"degradation.{unknown[0]} is not a parameter of the search")
        for name in fields:
            if name not in values:
                raise ValueError(f"degradation.{name} is missing")
            check_number(
                f"degradation.{name}",
                values[name],
                SEEDS if name == "seed" else RANGES[name],
                whole=name in _INTS,
            )
        numbers: dict[str, Any] = {n: values[n] if n in _INTS else float(values[n]) for n in fields}
        return cls(**numbers)

    def __str__(self) -> str:
        """`steps=12 soften_sigma=0.3107 …`: every parameter in one line, as drawn (4 decimals)."""
        return " ".join(f"{k}={v}" for k, v in asdict(self).items())

    def params(self) -> EmulatorParams:
        """The embedded recipe with these strengths and no per-round tint walk (`apply` starts at
        step 2, past the reframing)."""
        recipe = EmulatorParams()
        changed: dict[str, dict[str, float]] = {"tint": {"walk": 0.0}}
        for name, (family, parameter) in STRENGTHS.items():
            changed.setdefault(family, {})[parameter] = getattr(self, name)
        families = {f: dataclasses.replace(getattr(recipe, f), **values) for f, values in changed.items()}
        return dataclasses.replace(recipe, **families)

    def apply(self, clean: Array) -> Array:
        """The degraded (H, W, 3) uint8 image of the same size; the same pixels on any machine."""
        emulator = ReplicaEmulator(self.params(), seed=self.seed)
        image = Image.fromarray(clean)
        for step in range(2, self.steps + 2):  # from step 2: step 1 would reframe
            image = emulator.edit(image, step=step, run=0, key="search")
        return np.asarray(image, dtype=np.uint8)


_INTS = frozenset({"steps", "seed"})


def check_number(field: str, value: object, bounds: tuple[float, float], *, whole: bool) -> None:
    """`value` is a number (an integer if `whole`; never a bool) within `bounds`, or a ValueError
    naming `field`."""
    kind = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind):
        wanted = "an integer" if whole else "a number"
        raise ValueError(f"{field} = {reprlib.repr(value)} is not {wanted}")
    low, high = bounds
    if not low <= value <= high:  # also NaN and ±inf, and an integer too large for a float
        raise ValueError(f"{field} = {reprlib.repr(value)} is outside the search's range [{low:g}, {high:g}]")


def degradations() -> SearchStrategy[Degradation]:
    """Hypothesis's strategy over `RANGES`; it shrinks towards the lower ends (no degradation), so
    a shrunk escape is the mildest one found. Floats are rounded to 4 decimals, so the parameters
    a report prints rebuild the same image."""
    from hypothesis import strategies as st

    def strength(name: str) -> SearchStrategy[float]:
        low, high = RANGES[name]
        drawn = st.floats(low, high, allow_nan=False, allow_infinity=False)
        return drawn.map(lambda v: round(v, 4))

    low, high = (int(end) for end in RANGES["steps"])
    floats = {name: strength(name) for name in RANGES if name != "steps"}
    return st.builds(Degradation, steps=st.integers(low, high), seed=st.integers(*SEEDS), **floats)
