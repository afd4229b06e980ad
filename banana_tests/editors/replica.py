"""The `emulate` editor: `ReplicaEmulator` behind the editor protocol (offline, deterministic).

`--option artifact=static` keeps one artifact family (reframing is always on); `--option
FAMILY.PARAMETER=VALUE` sets any family's parameter (`static.amplitude=4`, `reframe.long_side=256`)
within its documented range. The defaults are the embedded set's recipe.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from banana_tests.editors.artifacts import FAMILIES
from banana_tests.editors.base import EditorConfig, EditorError, EditRequest, EditResult, take_options
from banana_tests.editors.emulate import EmulatorParams, ReplicaEmulator
from banana_tests.editors.prompts import apply_transform
from banana_tests.trajectories.records import COMPOSITE, artifact_named

DEFAULTS = EmulatorParams()


def _scalars() -> dict[str, Any]:
    """Every settable option and its default: `artifact`, and FAMILY.PARAMETER for scalar fields."""
    out: dict[str, Any] = {"artifact": COMPOSITE.value}  # the option is text, read by artifact_named
    for name, family in FAMILIES.items():
        for f in dataclasses.fields(family.params):
            if isinstance(f.default, (int, float)):
                out[f"{name}.{f.name}"] = f.default
    return out


class EmulateEditor:
    """Applies the prompt's geometric op exactly, then the emulator's replica artifacts."""

    name = "emulate"
    model = "replica-emulator"
    accepts = frozenset({"seed"})

    def __init__(self, params: EmulatorParams = DEFAULTS) -> None:
        self.params = params

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "params": self.params.to_json()}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        emulator = ReplicaEmulator(self.params, seed=request.seed or 0)
        image = apply_transform(request.image.convert("RGB"), request.transform)
        return EditResult(emulator.edit(image, step=request.step, run=request.run, key=request.key))


def make(config: EditorConfig) -> EmulateEditor:
    """`--option artifact=NAME` and `--option FAMILY.PARAMETER=VALUE` (see the module docstring)."""
    values = take_options(config, "emulate", _scalars())
    artifact = str(values.pop("artifact"))  # the option's text
    raw: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if key not in config.options:  # a family no option names keeps the recipe's default (on or off)
            continue
        family, _, field = key.partition(".")
        raw.setdefault(family, {})[field] = value
    try:
        return EmulateEditor(EmulatorParams.from_json(raw).only(artifact_named(artifact)))
    except (TypeError, ValueError) as exc:
        raise EditorError(f"editor 'emulate': {exc}") from None
