"""The offline editors, built on the artifact families: `emulate`, `flux2-tiny-vae` and `jpeg`.

`emulate` is `ReplicaEmulator`, a stand-in for an editing model asked, again and again, for an
exact replica. Real models (Nano Banana Pro and others) given "Produce an exact replica of the
provided image, with no alterations." do not return the input: the first output is reframed, and
every round after that softens and re-invents fine texture, drifts the colour balance and adds
static or scatter points. Each effect is an artifact family (`banana_tests.editors.artifacts`);
the composite "replicate" recipe applies them in turn, each with its own random stream, and
rounds to 8 bits once a round. The defaults are the calibrated embedded recipe
(`benchmarks/calibrate_emulator.py`, docs/datasets.md). `--option artifact=static` keeps one
family (reframing is always on); `--option FAMILY.PARAMETER=VALUE` sets any family's parameter
(`static.amplitude=4`, `reframe.long_side=256`) within its documented range.

`flux2-tiny-vae`: each edit is one round trip through FLUX.2's tiny autoencoder, the learned
family `vae_roundtrip` behind the editor protocol with the same random draws, so `generate
--editor flux2-tiny-vae` and `--artifact=vae_roundtrip` agree on the same settings (the editor's
default adds latent noise, so that its replicate runs differ). On the CPU with torch alone
(`--device cuda`: other bytes), imported only when the editor is built. No diffusion sampling and
no semantic change: a 1.3 M-parameter distillation of one model's VAE.

`jpeg`: classic JPEG generation loss, a well-understood control degradation. Each step
re-encodes the image as JPEG at `quality` (optionally after shrinking it by `resize` and
enlarging it back), so the loss compounds step after step, with no randomness.

Determinism: every random draw comes from a numpy Generator seeded by a SHA-256 of
(seed, key, run, step, family), so a family's draws do not depend on which others are on.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from banana_tests.editors.artifacts import FAMILIES, check_ranges, stable_rng
from banana_tests.editors.artifacts.handwritten import (
    ReframeParams,
    ResynthesisParams,
    ScatterParams,
    SoftenParams,
    StaticParams,
    TintParams,
)
from banana_tests.editors.artifacts.vae_roundtrip import VaeRoundtripParams, vae_roundtrip
from banana_tests.editors.base import (
    DeviceUnavailable,
    EditorConfig,
    EditorError,
    EditRequest,
    EditResult,
    take_options,
)
from banana_tests.editors.prompts import apply_transform
from banana_tests.trajectories.records import COMPOSITE, TRIALS, Artifact, artifact_named


@dataclass(frozen=True)
class EmulatorParams:
    """The recipe: one parameter set per family; None switches a family off (reframing is
    always on: step 1 is the reference)."""

    reframe: ReframeParams = field(default_factory=ReframeParams)
    soften: SoftenParams | None = field(default_factory=SoftenParams)
    resynthesis: ResynthesisParams | None = field(default_factory=ResynthesisParams)
    tint: TintParams | None = field(default_factory=TintParams)
    static: StaticParams | None = field(default_factory=StaticParams)
    scatter: ScatterParams | None = field(default_factory=ScatterParams)
    vae_roundtrip: VaeRoundtripParams | None = None

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


EMULATE_DEFAULTS = EmulatorParams()


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

    def __init__(self, params: EmulatorParams = EMULATE_DEFAULTS) -> None:
        self.params = params

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "params": self.params.to_json()}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        emulator = ReplicaEmulator(self.params, seed=request.seed or 0)
        image = apply_transform(request.image.convert("RGB"), request.transform)
        return EditResult(emulator.edit(image, step=request.step, run=request.run, key=request.key))


def make_emulate(config: EditorConfig) -> EmulateEditor:
    """`--option artifact=NAME` and `--option FAMILY.PARAMETER=VALUE` (see the module docstring)."""
    values = take_options(config, "emulate", _scalars())
    artifact = str(values.pop("artifact"))  # the option's text
    raw: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        if key not in config.options:  # a family no option names keeps the recipe's default (on or off)
            continue
        family, _, parameter = key.partition(".")
        raw.setdefault(family, {})[parameter] = value
    try:
        return EmulateEditor(EmulatorParams.from_json(raw).only(artifact_named(artifact)))
    except (TypeError, ValueError) as exc:
        raise EditorError(f"editor 'emulate': {exc}") from None


TINY_VAE = "flux2-tiny-vae"
RUN_NOISE = 0.05
"""The default latent noise, drawn per (seed image, run, step): without it `--runs 5` made five
byte-identical copies. Between two runs of one step it changes 29 % of the 8-bit values (mean 0.36)
and adds 0.04 to the round trip's mean change of 1.51 (the rocket seed, step 1, strength 0.35)."""
_RECIPE = EmulatorParams().vae_roundtrip or VaeRoundtripParams()
TINY_VAE_DEFAULTS = (
    _RECIPE if _RECIPE.latent_noise > 0 else dataclasses.replace(_RECIPE, latent_noise=RUN_NOISE)
)
"""The embedded recipe's round trip (or the family's own defaults where the recipe has it off),
with RUN_NOISE where it adds no noise, so that replicate runs differ."""


class TinyVaeEditor:
    name = TINY_VAE
    model = "taef2"
    accepts = frozenset({"seed"})

    def __init__(self, params: VaeRoundtripParams = TINY_VAE_DEFAULTS, device: str = "cpu") -> None:
        self.params, self.device = params, device
        # without latent noise (or without the round trip) every run is the same: generate warns
        self.deterministic = params.latent_noise == 0 or params.strength == 0

    def settings(self) -> dict[str, Any]:
        from banana_tests.editors import tiny_vae  # torch: only where this editor is used

        weights = {w.name: w.sha256 for w in (tiny_vae.ENCODER, tiny_vae.DECODER)}
        found = {"model": self.model, "params": dataclasses.asdict(self.params), "weights": weights}
        # the CPU's sets carry no device, as before there was a choice: they resume as they are
        return found if self.device == "cpu" else {**found, "device": self.device}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        image = apply_transform(request.image.convert("RGB"), request.transform)
        rng = stable_rng(request.seed or 0, request.key, request.run, request.step, VaeRoundtripParams.NAME)
        x = vae_roundtrip(
            np.asarray(image, dtype=np.float64), rng, request.step, self.params, device=self.device
        )
        return EditResult(Image.fromarray(np.clip(np.rint(x), 0, 255).astype(np.uint8), mode="RGB"))


def make_tiny_vae(config: EditorConfig) -> TinyVaeEditor:
    """`--option strength=A` and `--option latent_noise=S` (default RUN_NOISE), within the family's ranges.
    The weights are checked and loaded here, so a bad file stops the run before its first edit."""
    values = take_options(config, TINY_VAE, dataclasses.asdict(TINY_VAE_DEFAULTS))
    params = VaeRoundtripParams(**values)
    try:
        check_ranges(params)
    except ValueError as exc:
        raise EditorError(f"editor {TINY_VAE!r}: {exc}") from None
    device = _device(config.device)
    from banana_tests.editors import tiny_vae

    tiny_vae.shipped(device)
    return TinyVaeEditor(params, device)


def _device(asked: str) -> str:
    """`auto` is the CPU, whose bytes are the same on every machine measured; `cuda` (or `cuda:N`)
    must be there. A set's bytes differ between devices."""
    if asked in ("auto", "cpu"):
        return "cpu"
    if asked != "cuda" and not asked.startswith("cuda:"):
        raise EditorError(f"editor {TINY_VAE!r} runs on --device cpu or cuda, got {asked!r}")
    import torch

    if not torch.cuda.is_available():
        raise DeviceUnavailable(
            f"--device {asked}: no CUDA device on this machine (torch {torch.__version__}); use --device cpu"
        )
    number = asked.partition(":")[2] or "0"
    if not number.isdigit():
        raise EditorError(f"editor {TINY_VAE!r} runs on --device cpu or cuda[:N], got {asked!r}")
    index = int(number)
    if index >= torch.cuda.device_count():
        raise DeviceUnavailable(
            f"--device {asked}: this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    return f"cuda:{index}"


class JpegEditor:
    name = "jpeg"
    accepts: frozenset[str] = frozenset()
    deterministic = True
    """Every run of a seed image is the same bytes: `generate` warns when asked for several."""

    def __init__(self, quality: int = 75, resize: float = 1.0) -> None:
        if not 1 <= quality <= 100:
            raise EditorError(f"jpeg quality must lie in 1..100, got {quality}")
        if not 0 < resize <= 1:
            raise EditorError(f"jpeg resize must lie in (0, 1], got {resize}")
        self.quality, self.resize = quality, resize
        self.model = f"jpeg-q{quality}" + (f"-r{resize:g}" if resize != 1 else "")

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "quality": self.quality, "resize": self.resize}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        image = apply_transform(request.image.convert("RGB"), request.transform)
        size = image.size
        if self.resize != 1:
            small = (max(1, round(size[0] * self.resize)), max(1, round(size[1] * self.resize)))
            image = image.resize(small, Image.Resampling.BICUBIC)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=self.quality)
        out = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
        if out.size != size:
            out = out.resize(size, Image.Resampling.BICUBIC)
        return EditResult(out)


def make_jpeg(config: EditorConfig) -> JpegEditor:
    """`--option quality=N` (1..100, default 75), `--option resize=F` (round trip scale, default 1)."""
    options = take_options(config, "jpeg", {"quality": 75, "resize": 1.0})
    return JpegEditor(options["quality"], options["resize"])
