"""An offline stand-in for an editing model asked, again and again, for an exact replica.

Real models (Nano Banana Pro and others) given "Produce an exact replica of the provided
image, with no alterations." do not return the input: the first output is reframed, and every
round after that softens and re-invents fine texture, drifts the colour balance and adds static
or scatter points. Each effect is an artifact family (`banana_tests.editors.artifacts`); the
composite "replicate" recipe applies them in turn, each with its own random stream, and rounds
to 8 bits once a round. The defaults are the calibrated embedded recipe
(`benchmarks/calibrate_emulator.py`, docs/datasets.md).

Determinism: every random draw comes from a numpy Generator seeded by a SHA-256 of
(seed, key, run, step, family), so a family's draws do not depend on which others are on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from banana_tests.editors.artifacts import FAMILIES, check_ranges, stable_rng
from banana_tests.editors.artifacts import reframe as _reframe
from banana_tests.editors.artifacts import resynthesis as _resynthesis
from banana_tests.editors.artifacts import scatter as _scatter
from banana_tests.editors.artifacts import soften as _soften
from banana_tests.editors.artifacts import static as _static
from banana_tests.editors.artifacts import tint as _tint
from banana_tests.editors.artifacts import vae_roundtrip as _vae_roundtrip
from banana_tests.trajectories.records import COMPOSITE, TRIALS, Artifact


@dataclass(frozen=True)
class EmulatorParams:
    """The recipe: one parameter set per family; None switches a family off (reframing is
    always on: step 1 is the reference)."""

    reframe: _reframe.Params = field(default_factory=_reframe.Params)
    soften: _soften.Params | None = field(default_factory=_soften.Params)
    resynthesis: _resynthesis.Params | None = field(default_factory=_resynthesis.Params)
    tint: _tint.Params | None = field(default_factory=_tint.Params)
    static: _static.Params | None = field(default_factory=_static.Params)
    scatter: _scatter.Params | None = field(default_factory=_scatter.Params)
    vae_roundtrip: _vae_roundtrip.Params | None = None

    def __post_init__(self) -> None:
        for name in FAMILIES:
            params = getattr(self, name)
            if params is not None:
                check_ranges(params)

    @property
    def long_side(self) -> int:
        return int(self.reframe.long_side)

    def only(self, artifact: Artifact) -> EmulatorParams:
        """This recipe with every family but `artifact` (and reframing) off, at the same strength
        (at the family's own defaults where this recipe has it off); `replicate` is the whole recipe."""
        if artifact is COMPOSITE:
            return self
        alone: dict[str, Any] = {name: None for name in TRIALS if name is not artifact}
        alone[artifact] = getattr(self, artifact) or FAMILIES[artifact].params()
        return dataclasses.replace(self, **alone)

    def to_json(self) -> dict[str, Any]:
        return {name: _as_json(getattr(self, name)) for name in FAMILIES}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> EmulatorParams:
        """The recipe from `to_json`'s dict; unknown families or parameters are refused by name, and
        a family the dict does not name keeps this class's default."""
        unknown = sorted(set(raw) - set(FAMILIES))
        if unknown:
            raise ValueError(f"unknown artifact famil(ies) {unknown}; known: {', '.join(FAMILIES)}")
        values: dict[str, Any] = {}
        for name, family in FAMILIES.items():
            if name not in raw:  # the recipe's default: a recipe written before a family existed keeps it off
                continue
            given = raw[name]
            if given is None:
                values[name] = None
                continue
            fields = {f.name: f for f in dataclasses.fields(family.params)}
            extra = sorted(set(given) - set(fields))
            if extra:
                raise ValueError(f"{name}: unknown parameter(s) {extra}; known: {', '.join(fields)}")
            values[name] = family.params(**{k: _typed(fields[k].default, v) for k, v in given.items()})
        return cls(**values)


def _as_json(params: object) -> Any:
    return None if params is None else dataclasses.asdict(params)  # type: ignore[call-overload]


def _typed(default: Any, value: Any) -> Any:
    if isinstance(default, tuple):
        return tuple(float(v) for v in value)
    return type(default)(value)


class ReplicaEmulator:
    """Turns step n-1 into step n of a "produce an exact replica" trajectory."""

    def __init__(self, params: EmulatorParams | None = None, seed: int = 0) -> None:
        self.params = params if params is not None else EmulatorParams()
        self.seed = seed

    def edit(self, image: Image.Image, *, step: int, run: int, key: str) -> Image.Image:
        """Return the model's "replica" of `image` (the previous step's output) at `step`.

        `key` names the trajectory (e.g. the seed image) so that different images, runs and
        steps get independent draws, while the same (seed, key, run, step) always gives the
        same output.
        """
        if step < 1:
            raise ValueError(f"step must be >= 1 (step 0 is the seed image), got {step}")
        x = np.asarray(image.convert("RGB"), dtype=np.float64)
        for name, family in FAMILIES.items():
            params = getattr(self.params, name)
            if params is not None:
                x = family.apply(x, stable_rng(self.seed, key, run, step, name), step, params)
        return Image.fromarray(np.clip(np.rint(x), 0, 255).astype(np.uint8), mode="RGB")
