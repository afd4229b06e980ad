"""The emulator's artifact families: each a physical mechanism named after what the paper saw.

`FAMILIES` lists them in the order the composite "replicate" recipe applies them; each entry has
its parameter class (fields documented with their plausible range, `ranges(family.params)`) and a
pure `apply(x, rng, step, params)` usable outside the trajectory generator, e.g.

    from banana_tests.editors.artifacts import FAMILIES, stable_rng
    static = FAMILIES["static"]
    y = static.apply(x, stable_rng("mine", 0), 5, static.params(amplitude=4.0))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from banana_tests.editors.artifacts import handwritten as _hand
from banana_tests.editors.artifacts.handwritten import Array, check_ranges, luma, ranges, stable_rng
from banana_tests.editors.artifacts.vae_roundtrip import VaeRoundtripParams, vae_roundtrip
from banana_tests.trajectories.records import TRIALS

__all__ = ["FAMILIES", "TRIALS", "Array", "Family", "check_ranges", "luma", "ranges", "stable_rng"]


@dataclass(frozen=True)
class Family:
    """One artifact family: its name, parameter class, pure `apply` and the paper's words for it."""

    name: str
    params: type[Any]
    apply: Callable[[Array, np.random.Generator, int, Any], Array]
    paper: str

    @classmethod
    def of(cls, params: type[Any], apply: Callable[..., Array]) -> Family:
        return cls(params.NAME, params, apply, (params.__doc__ or "").strip().splitlines()[0])


_ALL = {
    family.name: family
    for family in (
        Family.of(_hand.ReframeParams, _hand.reframe),
        Family.of(_hand.SoftenParams, _hand.soften),
        Family.of(_hand.ResynthesisParams, _hand.resynthesis),
        Family.of(_hand.TintParams, _hand.tint),
        Family.of(_hand.StaticParams, _hand.static),
        Family.of(_hand.ScatterParams, _hand.scatter),
        Family.of(VaeRoundtripParams, vae_roundtrip),
    )
}
FAMILIES: dict[str, Family] = {name: _ALL[name] for name in ("reframe", *TRIALS)}
"""Every family, in the composite's order: reframing first (step 1), then the hand-written effects,
the learned decoder's round trip last (a model's output is what its decoder draws); each trial's
family is the one its `Artifact` names."""
