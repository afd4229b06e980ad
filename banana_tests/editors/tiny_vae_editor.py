"""The `flux2-tiny-vae` editor: each edit is one round trip through FLUX.2's tiny autoencoder.

Offline and deterministic, on the CPU with torch alone (`--device cuda`: other bytes): encode,
perturb the latent by `latent_noise`, decode, blend with the input at `strength`, round to 8
bits. It is the learned
artifact family `vae_roundtrip` (banana_tests.editors.artifacts) behind the editor protocol, with
the same random draws, so `generate --editor flux2-tiny-vae` and `--artifact=vae_roundtrip` agree
on the same settings (the editor's default adds latent noise, so that its replicate runs differ).
No diffusion sampling and no semantic change: a 1.3 M-parameter distillation of one model's VAE.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from PIL import Image

from banana_tests.editors import tiny_vae
from banana_tests.editors.artifacts import check_ranges, stable_rng
from banana_tests.editors.artifacts import vae_roundtrip as family
from banana_tests.editors.base import (
    DeviceUnavailable,
    EditorConfig,
    EditorError,
    EditRequest,
    EditResult,
    take_options,
)
from banana_tests.editors.emulate import EmulatorParams
from banana_tests.editors.prompts import apply_transform

NAME = "flux2-tiny-vae"
RUN_NOISE = 0.05
"""The default latent noise, drawn per (seed image, run, step): without it `--runs 5` made five
byte-identical copies. Between two runs of one step it changes 29 % of the 8-bit values (mean 0.36)
and adds 0.04 to the round trip's mean change of 1.51 (the rocket seed, step 1, strength 0.35)."""
_RECIPE = EmulatorParams().vae_roundtrip or family.Params()
DEFAULTS = _RECIPE if _RECIPE.latent_noise > 0 else dataclasses.replace(_RECIPE, latent_noise=RUN_NOISE)
"""The embedded recipe's round trip (or the family's own defaults where the recipe has it off),
with RUN_NOISE where it adds no noise, so that replicate runs differ."""


class TinyVaeEditor:
    name = NAME
    model = "taef2"
    accepts = frozenset({"seed"})

    def __init__(self, params: family.Params = DEFAULTS, device: str = "cpu") -> None:
        self.params, self.device = params, device
        # without latent noise (or without the round trip) every run is the same: generate warns
        self.deterministic = params.latent_noise == 0 or params.strength == 0

    def settings(self) -> dict[str, Any]:
        weights = {w.name: w.sha256 for w in (tiny_vae.ENCODER, tiny_vae.DECODER)}
        found = {"model": self.model, "params": dataclasses.asdict(self.params), "weights": weights}
        # the CPU's sets carry no device, as before there was a choice: they resume as they are
        return found if self.device == "cpu" else {**found, "device": self.device}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        image = apply_transform(request.image.convert("RGB"), request.transform)
        rng = stable_rng(request.seed or 0, request.key, request.run, request.step, family.NAME)
        x = family.apply(
            np.asarray(image, dtype=np.float64), rng, request.step, self.params, device=self.device
        )
        return EditResult(Image.fromarray(np.clip(np.rint(x), 0, 255).astype(np.uint8), mode="RGB"))


def make(config: EditorConfig) -> TinyVaeEditor:
    """`--option strength=A` and `--option latent_noise=S` (default RUN_NOISE), within the family's ranges.
    The weights are checked and loaded here, so a bad file stops the run before its first edit."""
    values = take_options(config, NAME, dataclasses.asdict(DEFAULTS))
    params = family.Params(**values)
    try:
        check_ranges(params)
    except ValueError as exc:
        raise EditorError(f"editor {NAME!r}: {exc}") from None
    device = _device(config.device)
    tiny_vae.shipped(device)
    return TinyVaeEditor(params, device)


def _device(asked: str) -> str:
    """`auto` is the CPU, whose bytes are the same on every machine measured; `cuda` (or `cuda:N`)
    must be there. A set's bytes differ between devices."""
    if asked in ("auto", "cpu"):
        return "cpu"
    if asked != "cuda" and not asked.startswith("cuda:"):
        raise EditorError(f"editor {NAME!r} runs on --device cpu or cuda, got {asked!r}")
    import torch

    if not torch.cuda.is_available():
        raise DeviceUnavailable(
            f"--device {asked}: no CUDA device on this machine (torch {torch.__version__}); use --device cpu"
        )
    number = asked.partition(":")[2] or "0"
    if not number.isdigit():
        raise EditorError(f"editor {NAME!r} runs on --device cpu or cuda[:N], got {asked!r}")
    index = int(number)
    if index >= torch.cuda.device_count():
        raise DeviceUnavailable(
            f"--device {asked}: this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    return f"cuda:{index}"
