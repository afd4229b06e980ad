"""A drawn degradation: typed parameters that turn a clean image into a degraded one.

The search family (banana_tests/test_search.py) draws these with hypothesis and asks whether a
metric still scores the result as well as the clean image. This module is the one seam between
the search and the emulator: `Degradation` names the parameters, `RANGES` their documented
ranges, `degradations()` the strategy that draws them and `Degradation.apply` the pixels. It is
written on `ReplicaEmulator` (blur, luma and chroma noise and its grain, tint drift, the latent
round trip, sharpening, over a number of replica rounds); step 1's reframing is left out, so the
degraded image keeps the clean one's geometry and PSNR/SSIM compare pixel for pixel.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from banana_tests.editors.emulate import EmulatorParams, ReplicaEmulator

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from banana_tests.editors.distortions import Array

RANGES: dict[str, tuple[float, float]] = {
    "steps": (1, 20),  # replica rounds, as the paper's trajectories (Δ5, Δ10, Δ20)
    "blur_sigma": (0.0, 1.0),  # px, each round
    "luma_noise": (0.0, 12.0),  # 8-bit code values, std of fresh static each round
    "chroma_noise": (0.0, 4.0),  # code values, per-channel speckle each round
    "noise_grain": (0.0, 2.0),  # px, correlation length of the static
    "tint_rate": (0.0, 0.01),  # gain drift along the green bias, each round
    "latent_factor": (1.0, 4.0),  # coarser grid of the encode/decode round trip; 1 = none
    "sharpen": (0.0, 1.5),  # unsharp-mask amount after the round trip
}
"""Each parameter's range: from nothing (the lower end) to about twice the embedded recipe's
strength (docs/trial.md, "The worst escape"). Hypothesis shrinks towards the lower ends."""


@dataclass(frozen=True)
class Degradation:
    """`steps` rounds of the replica emulator at these strengths, its noise drawn from `seed`."""

    steps: int = 1
    blur_sigma: float = 0.0
    luma_noise: float = 0.0
    chroma_noise: float = 0.0
    noise_grain: float = 0.0
    tint_rate: float = 0.0
    latent_factor: float = 1.0
    sharpen: float = 0.0
    seed: int = 0

    def __str__(self) -> str:
        """`steps=12 blur_sigma=0.3107 …`: every parameter in one line, as drawn (4 decimals)."""
        return " ".join(f"{k}={v}" for k, v in asdict(self).items())

    def params(self) -> EmulatorParams:
        """The emulator's parameters: these strengths, no reframing, no per-run tint direction."""
        strengths = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("steps", "seed")}
        return EmulatorParams(crop_fraction=1.0, tint_run=0.0, tint_walk=0.0, **strengths)

    def apply(self, clean: Array) -> Array:
        """The degraded (H, W, 3) uint8 image of the same size; the same pixels on any machine."""
        emulator = ReplicaEmulator(self.params(), seed=self.seed)
        image = Image.fromarray(clean)
        for step in range(2, self.steps + 2):  # from step 2: step 1 would reframe
            image = emulator.edit(image, step=step, run=0, key="search")
        return np.asarray(image, dtype=np.uint8)


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
    return st.builds(Degradation, steps=st.integers(low, high), seed=st.integers(0, 2**16 - 1), **floats)
