"""The `diffusers` editor: open image-editing pipelines, loaded by model id or local folder.

The pipeline class comes from the model's own `model_index.json` (QwenImageEditPipeline,
FluxKontextPipeline, Flux2Pipeline, ...), read before any weights load, so a local snapshot of a
model gets the same treatment as its hub id. `PROFILES` holds, per class, the call arguments its
model card recommends; `--option NAME=VALUE` overrides them, parsed to the type the class's
`__call__` declares for NAME and refused when `__call__` names no such parameter (a `**kwargs`
catch-all does not count: a misspelt key there is silently ignored by the pipeline).
Needs `pip install 'banana-tests[diffusers]'` and, for the real models, a large GPU.
"""

from __future__ import annotations

import difflib
import inspect
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from banana_tests.editors.base import (
    EditorConfig,
    EditorError,
    EditRequest,
    EditResult,
    OptionError,
    parse_option,
    scalar_types,
)

QWEN_IMAGE_EDIT = "Qwen/Qwen-Image-Edit"
DTYPES = ("bfloat16", "float16", "float32")
SET_BY_EDITOR = frozenset({"self", "image", "prompt", "generator"})
"""`__call__` parameters each edit fills in itself; `--option` cannot set them."""


@dataclass(frozen=True)
class Profile:
    """What one pipeline class needs beyond its own defaults."""

    call_defaults: Mapping[str, Any] = field(default_factory=dict)
    size_from_input: bool = False
    """The class makes its default square unless told the size: pass the input's (a multiple of
    `vae_scale_factor * 2`); the class still scales it to its `max_area`, keeping the aspect."""


PROFILES: dict[str, Profile] = {
    "QwenImageEditPipeline": Profile(
        {"num_inference_steps": 50, "true_cfg_scale": 4.0, "negative_prompt": " "}
    ),
    "FluxKontextPipeline": Profile({"num_inference_steps": 28, "guidance_scale": 2.5}, size_from_input=True),
    "Flux2Pipeline": Profile({"num_inference_steps": 50, "guidance_scale": 4.0}),
}
"""Keyed on the pipeline class, not the model id: a mirror or local copy of a model is the same model."""


def _diffusers() -> Any:
    try:
        import diffusers
    except ImportError as exc:
        raise EditorError(
            "the diffusers editor needs diffusers: pip install 'banana-tests[diffusers]'"
        ) from exc
    return diffusers


def pipeline_class(model: str) -> type:
    """The class `model_index.json` of `model` (hub id or folder) names; no weights are read."""
    diffusers = _diffusers()
    try:
        name = diffusers.DiffusionPipeline.load_config(model)["_class_name"]
    except Exception as exc:  # the hub client raises many kinds; all mean the same to the user
        raise EditorError(f"cannot read model_index.json of {model!r}: {exc}") from None
    found = getattr(diffusers, name, None)
    if not isinstance(found, type):
        raise EditorError(f"{model!r} names pipeline class {name!r}, which this diffusers does not have")
    return found


def call_parameters(cls: type) -> dict[str, tuple[type, ...]]:
    """`__call__`'s named parameters that `--option` may set, each with the types it takes."""
    out = {}
    for name, param in inspect.signature(cls.__call__).parameters.items():
        if name in SET_BY_EDITOR or param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        kinds = scalar_types(param.annotation) if param.annotation is not param.empty else ()
        if not kinds and param.default not in (param.empty, None):
            kinds = scalar_types(type(param.default))
        out[name] = kinds
    return out


def parse_call_options(cls: type, texts: Mapping[str, str]) -> dict[str, Any]:
    """`--option` texts as typed `__call__` arguments of `cls`; a key it does not take is refused."""
    takes = call_parameters(cls)
    out = {}
    for key, text in texts.items():
        if key not in takes:
            close = difflib.get_close_matches(key, takes, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            known = ", ".join(sorted(takes))
            raise EditorError(f"{cls.__name__} takes no option {key!r}{hint}; its __call__ takes: {known}")
        if not takes[key]:
            raise EditorError(f"{cls.__name__} option {key!r} takes no value the command line can give")
        try:
            out[key] = parse_option(key, text, takes[key])
        except OptionError as exc:
            raise EditorError(f"{cls.__name__}: {exc}") from None
    return out


def load_pipeline(model: str, dtype: str, device: str) -> Any:
    """`DiffusionPipeline.from_pretrained(model)` in `dtype`, on `device`, without progress bars."""
    import torch

    diffusers = _diffusers()
    # diffusers with `_resolve_dtype` deprecates `torch_dtype` (a FutureWarning on every load).
    keyword = "dtype" if hasattr(diffusers.utils, "_resolve_dtype") else "torch_dtype"
    pipeline = diffusers.DiffusionPipeline.from_pretrained(model, **{keyword: getattr(torch, dtype)})
    pipeline.set_progress_bar_config(disable=True)  # one bar per edit would bury the run's own
    return pipeline.to(device)


class DiffusersEditor:
    name = "diffusers"
    accepts = frozenset({"seed"})

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str = "bfloat16",
        options: Mapping[str, str] | None = None,
    ) -> None:
        if dtype not in DTYPES:
            raise EditorError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.model, self.dtype, self.device = model, dtype, _device(device)
        self.pipeline_class = pipeline_class(model)
        self.profile = PROFILES.get(self.pipeline_class.__name__, Profile())
        self.call_options = {
            **self.profile.call_defaults,
            **parse_call_options(self.pipeline_class, options or {}),
        }
        self._pipeline: Any = None

    def settings(self) -> dict[str, Any]:
        """The device is left out on purpose: a run may be resumed on another machine."""
        return {
            "model": self.model,
            "pipeline": self.pipeline_class.__name__,
            "dtype": self.dtype,
            "call": self.call_options,
        }

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        """Without a request seed, a fresh one is drawn and returned, so the step can be redone."""
        import torch

        if self._pipeline is None:
            self._pipeline = load_pipeline(self.model, self.dtype, self.device)
        image = request.image.convert("RGB")
        seed = random.SystemRandom().randrange(2**32) if request.seed is None else request.seed
        generator = torch.Generator(device="cpu" if self.device == "mps" else self.device).manual_seed(seed)
        size: dict[str, int] = {}
        if self.profile.size_from_input and not {"height", "width"} & set(self.call_options):
            multiple = self._pipeline.vae_scale_factor * 2
            width, height = (max(multiple, side // multiple * multiple) for side in image.size)
            size = {"height": height, "width": width}
        out = self._pipeline(
            image=image, prompt=request.prompt, generator=generator, **size, **self.call_options
        )
        return EditResult(out.images[0].convert("RGB"), seed=None if request.seed is not None else seed)


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def make(config: EditorConfig) -> DiffusersEditor:
    """`--model` is a Hugging Face model id or folder (default Qwen/Qwen-Image-Edit); `--device`, `--dtype`,
    `--option` (any `__call__` parameter of the pipeline)."""
    return DiffusersEditor(
        config.model or QWEN_IMAGE_EDIT, device=config.device, dtype=config.dtype, options=config.options
    )
