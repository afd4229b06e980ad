"""The learned artifact family: a round trip through TAEF2, FLUX.2's tiny autoencoder (torch,
imported only when the family runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from banana_tests.editors.artifacts.handwritten import Array, bounded
from banana_tests.trajectories.records import Artifact


@dataclass(frozen=True)
class VaeRoundtripParams:
    """VAE round trip: the image goes through a real learned latent autoencoder each round.

    Paper: the noise is model-induced, not a heuristic distortion: an editing model re-renders its
    whole output through its decoder, which makes fine detail up from the latent ("FLUX.2 [dev]
    generates scatter points on many of the objects"). Here the decoder is TAEF2, the tiny
    distillation of FLUX.2's VAE (banana_tests.editors.tiny_vae): encode, optionally perturb the
    latent, decode, and blend with the input at `strength`. Fed back on itself it drifts: contours
    sharpen into wrinkles, colours shift, texture turns into invented patches.
    """

    NAME: ClassVar[str] = Artifact.VAE_ROUNDTRIP

    strength: float = bounded(0.0, 1.0, 0.35)
    """Blend a round: x ← (1 − strength)·x + strength·decode(encode(x)); 0 is off, 1 the bare round trip."""
    latent_noise: float = bounded(0.0, 2.0, 0.0)
    """Std of Gaussian noise added to the latent (values roughly in [−3, 3]) before decoding."""


def vae_roundtrip(
    x: Array, rng: np.random.Generator, step: int, params: VaeRoundtripParams, *, device: str = "cpu"
) -> Array:
    """One round; on another `device` than the CPU the bytes differ (float sums in another order)."""
    if params.strength <= 0:
        return x
    from banana_tests.editors import tiny_vae

    decoded = tiny_vae.round_trip(x, params.latent_noise, rng, device=device)
    return (1.0 - params.strength) * x + params.strength * decoded
