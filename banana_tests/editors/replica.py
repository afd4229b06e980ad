"""The `emulate` editor: `ReplicaEmulator` behind the editor protocol (offline, deterministic)."""

from __future__ import annotations

import dataclasses
from typing import Any

from banana_tests.editors.base import EditorConfig, EditRequest, EditResult, take_options
from banana_tests.editors.emulate import EmulatorParams, ReplicaEmulator
from banana_tests.editors.prompts import apply_transform

DEFAULTS = EmulatorParams()
_SCALARS = {f.name: getattr(DEFAULTS, f.name) for f in dataclasses.fields(DEFAULTS) if f.name != "tint_bias"}


class EmulateEditor:
    """Applies the prompt's geometric op exactly, then the emulator's replica noise."""

    name = "emulate"
    model = "replica-emulator"
    accepts = frozenset({"seed"})

    def __init__(self, params: EmulatorParams = DEFAULTS) -> None:
        self.params = params

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "params": dataclasses.asdict(self.params)}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        emulator = ReplicaEmulator(self.params, seed=request.seed or 0)
        image = apply_transform(request.image.convert("RGB"), request.transform)
        return EditResult(emulator.edit(image, step=request.step, run=request.run, key=request.key))


def make(config: EditorConfig) -> EmulateEditor:
    """`--option NAME=VALUE` sets any scalar `EmulatorParams` field (e.g. `long_side=256`)."""
    return EmulateEditor(EmulatorParams(**take_options(config, "emulate", _SCALARS)))
