"""The hand-written artifact families, and what every family shares: stable random draws and
documented parameter ranges.

A family is a physical mechanism with a few typed parameters (a frozen dataclass whose fields
carry their plausible `range` in their metadata, whose docstring says what the paper saw) and a
pure `apply(x, rng, step, params)` on an (H, W, 3) float64 array in 8-bit code values. Pure: the
same array, generator state, step and parameters give the same array, so a hypothesis search can
draw parameters from `ranges()` and call `apply` outside the trajectory generator.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from PIL import Image
from scipy import ndimage

from banana_tests.trajectories.records import Artifact

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
    family = getattr(type(params), "NAME", type(params).__name__)
    for name, (lo, hi) in ranges(type(params)).items():
        value = getattr(params, name)
        if not lo <= value <= hi:
            raise ValueError(f"{family}.{name}={value} is outside [{lo}, {hi}]")


def luma(x: Array) -> NDArray[np.float64]:
    """The (H, W) luma of an (H, W, 3) image."""
    return np.asarray(x @ LUMA, dtype=np.float64)


@dataclass(frozen=True)
class ReframeParams:
    """Reframe: the first output's crop and resample.

    Paper: Nano Banana Pro crops and resizes its first output (Ekphrasis 5632×3072 came back
    2816×1504 at 2K), which is why step 1, not step 0, is the reference. Only step 1 is touched.
    """

    NAME: ClassVar[str] = "reframe"

    crop_fraction: float = bounded(0.5, 1.0, 0.9)
    """Step 1 keeps this central fraction of width and height."""
    long_side: int = bounded(16, 8192, 384)
    """Step 1 resamples (LANCZOS) so the long side has this many pixels: the model's output grid."""
    size_multiple: int = bounded(1, 64, 8)
    """The short side is rounded to a multiple of this, as model outputs are (2816x1504)."""


def reframe(x: Array, rng: np.random.Generator, step: int, params: ReframeParams) -> Array:
    """Step 1: the central crop, resampled to the output grid; later steps: `x` unchanged.
    Step 1's input is 8-bit, so the resample runs on the rounded image."""
    if step != 1:
        return x
    image = Image.fromarray(np.clip(np.rint(x), 0, 255).astype(np.uint8), mode="RGB")
    w, h = image.size
    cw, ch = max(1, round(w * params.crop_fraction)), max(1, round(h * params.crop_fraction))
    left, top = (w - cw) // 2, (h - ch) // 2
    image = image.crop((left, top, left + cw, top + ch))
    scale = params.long_side / max(cw, ch)
    m = max(1, params.size_multiple)
    short = max(m, round(min(cw, ch) * scale / m) * m)
    size = (params.long_side, short) if cw >= ch else (short, params.long_side)
    return np.asarray(image.resize(size, Image.Resampling.LANCZOS), dtype=np.float64)


@dataclass(frozen=True)
class SoftenParams:
    """Soften: fine detail lost a little each round (a small Gaussian blur of the previous output).

    Paper: "texture simplification" (Qwen Image Edit) and lost fine texture in every generator's
    replicas; compounded over rounds, it is what makes the replica smoother than its input.
    """

    NAME: ClassVar[str] = Artifact.SOFTEN

    sigma: float = bounded(0.0, 1.5, 0.37)
    """Gaussian blur (px) a round; about sigma·√n accumulated after n rounds."""


def soften(x: Array, rng: np.random.Generator, step: int, params: SoftenParams) -> Array:
    if params.sigma <= 0:
        return x
    return np.asarray(ndimage.gaussian_filter(x, sigma=(params.sigma, params.sigma, 0), mode="reflect"))


@dataclass(frozen=True)
class ResynthesisParams:
    """Resynthesis: fine texture is re-invented, plausible but wrong, at the same local energy.

    Paper: "high-frequency details distorted" and texture re-invented rather than copied (and
    "texture simplification" for Qwen Image Edit): a generative model redraws detail it cannot copy.
    Not a blur: each round a share of the image's fine band (spatial frequencies above `cutoff`,
    split off sharply in the Fourier domain so the band and the rest share no frequency) is replaced
    by a phase-randomised copy of that band (the same power spectrum, new structure), rescaled to the
    band's local energy. The band's energy and spectrum stay; the content does not,
    so PSNR against the input falls while a spectrum or a local-contrast statistic barely moves.
    """

    NAME: ClassVar[str] = Artifact.RESYNTHESIS

    share: float = bounded(0.0, 1.0, 0.1)
    """Share of the fine band's energy replaced a round (0: none, 1: all of it)."""
    cutoff: float = bounded(0.02, 0.5, 0.16)
    """The fine band's lowest spatial frequency (cycles per pixel; 0.5 is the finest)."""
    window: float = bounded(1.0, 16.0, 4.0)
    """Gaussian sigma (px) over which the local energy is kept."""


def _local_rms(band: np.ndarray, window: float) -> np.ndarray:
    axes = (window, window, 0)[: band.ndim]
    return np.sqrt(np.maximum(ndimage.gaussian_filter(band * band, sigma=axes, mode="reflect"), 0.0))


def resynthesis(x: Array, rng: np.random.Generator, step: int, params: ResynthesisParams) -> Array:
    if params.share <= 0:
        return x
    h, w, _ = x.shape
    fine = np.hypot(*np.meshgrid(np.fft.fftfreq(h), np.fft.rfftfreq(w), indexing="ij")) >= params.cutoff
    band = np.fft.irfft2(np.fft.rfft2(x, axes=(0, 1)) * fine[..., None], s=(h, w), axes=(0, 1))
    low = x - band
    phase = np.exp(1j * np.angle(np.fft.rfft2(rng.standard_normal((h, w)))))
    texture = np.fft.irfft2(np.fft.rfft2(luma(band)) * phase, s=(h, w))
    texture /= np.maximum(_local_rms(texture, params.window), 1e-6)
    energy = _local_rms(band, params.window)
    keep, new = np.sqrt(1.0 - params.share), np.sqrt(params.share)
    return low + keep * band + new * energy * texture[..., None]


@dataclass(frozen=True)
class TintParams:
    """Tint: the colour balance drifts a little each round, towards green, at constant luminance.

    Paper: a "green tint" accompanies the static in Nano Banana Pro's replicas. Modelled as a white
    balance (per-channel gain) change a round: a systematic step along `bias` plus a random walk,
    both made orthogonal to the luma weights, so a grey pixel keeps its brightness exactly and a
    coloured one nearly: the drift is colour, not light.
    """

    NAME: ClassVar[str] = Artifact.TINT

    rate: float = bounded(0.0, 0.02, 0.0025)
    """Gain change a round along `bias` (0.0025: about 5 % by step 20)."""
    walk: float = bounded(0.0, 0.01, 0.0005)
    """Std of a fresh per-round gain jitter (the random-walk part of the drift)."""
    bias: tuple[float, float, float] = (-0.5, 1.0, -0.5)
    """Direction (R, G, B) of the systematic drift before it is made luma-neutral: green."""


def luma_neutral(v: np.ndarray) -> np.ndarray:
    """`v` with its component along the luma weights removed, scaled to unit length."""
    v = np.asarray(v, dtype=np.float64)
    v = v - (v @ LUMA) / (LUMA @ LUMA) * LUMA
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def gain(rng: np.random.Generator, params: TintParams) -> np.ndarray:
    """This round's per-channel gain change; its sum over rounds is the drift."""
    return params.rate * luma_neutral(np.asarray(params.bias)) + params.walk * luma_neutral(
        rng.standard_normal(3)
    )


def tint(x: Array, rng: np.random.Generator, step: int, params: TintParams) -> Array:
    return x * (1.0 + gain(rng, params))


@dataclass(frozen=True)
class StaticParams:
    """Static: fresh, spatially correlated noise each round, piling up like a decoder's grain.

    Paper: "static noise" is the first artifact it names for Nano Banana Pro: visible after 5–10
    replications and growing with them. A decoder paints it over a pixel or so (blotchy, not
    per-pixel white), mostly in luminance with weaker colour speckle. Zero-mean by construction: the
    image's mean colour is kept (up to clipping at 0 and 255).
    """

    NAME: ClassVar[str] = Artifact.STATIC

    amplitude: float = bounded(0.0, 16.0, 6.0)
    """Std (8-bit levels) of the fresh luminance static a round, equal in R, G and B."""
    grain: float = bounded(0.0, 3.0, 0.75)
    """Correlation length (Gaussian sigma, px) of the static; 0 = white, per-pixel noise. The noise
    is rescaled after filtering, so `amplitude` stays its std."""
    chroma: float = bounded(0.0, 8.0, 1.5)
    """Std (8-bit levels) of fresh, independent per-channel speckle a round."""


def static(x: Array, rng: np.random.Generator, step: int, params: StaticParams) -> Array:
    h, w, _ = x.shape
    noise = rng.standard_normal((h, w, 1))
    if params.grain > 0:
        noise = ndimage.gaussian_filter(noise, sigma=(params.grain, params.grain, 0), mode="wrap")
    noise = params.amplitude * (noise - noise.mean()) / max(float(noise.std()), 1e-12)
    speckle = params.chroma * rng.standard_normal((h, w, 3))
    speckle -= speckle.mean(axis=(0, 1))
    return x + noise + speckle


@dataclass(frozen=True)
class ScatterParams:
    """Scatter: a few isolated bright or dark points appear each round and stay.

    Paper: "scatter points" are FLUX.2's signature artifact (its Figure 9): small isolated specks
    over otherwise clean regions. Each round adds a Poisson number of Gaussian spots of random sign
    at random places; the rest of the image is untouched, so the share of pixels changed is bounded
    by the density.
    """

    NAME: ClassVar[str] = Artifact.SCATTER

    density: float = bounded(0.0, 0.01, 0.0005)
    """Expected new points a round, per pixel."""
    amplitude: float = bounded(0.0, 128.0, 40.0)
    """Peak change (8-bit levels) at a point's centre, equal in R, G and B; the sign is random."""
    radius: float = bounded(0.3, 3.0, 0.7)
    """Gaussian sigma (px) of a point."""


def scatter(x: Array, rng: np.random.Generator, step: int, params: ScatterParams) -> Array:
    h, w, _ = x.shape
    count = int(rng.poisson(params.density * h * w))
    if count == 0 or params.amplitude <= 0:
        return x
    rows, cols = rng.integers(0, h, count), rng.integers(0, w, count)
    signs = rng.choice((-1.0, 1.0), count)
    impulses = np.zeros((h, w))
    np.add.at(impulses, (rows, cols), signs)
    r = params.radius
    spots = ndimage.gaussian_filter(impulses, sigma=r, mode="constant", truncate=3.0) * (2 * np.pi * r * r)
    return x + params.amplitude * spots[..., None]
