"""The `diffusers` editor: open image-editing pipelines, loaded by model id.

`DiffusionPipeline.from_pretrained` picks the pipeline class from the model's own index
(QwenImageEditPipeline, FluxKontextPipeline, Flux2Pipeline, ...); `CALL_DEFAULTS` holds the
call arguments each model card recommends, and `--option NAME=VALUE` overrides them (numbers
are parsed as numbers). Each edit is one pipeline call with a generator seeded by `--seed`.
Needs `pip install 'banana-tests[diffusers]'` and, for these models, a large GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from banana_tests.editors.base import EditorConfig, EditorError, EditRequest, EditResult

QWEN_IMAGE_EDIT = "Qwen/Qwen-Image-Edit"
FLUX1_KONTEXT = "black-forest-labs/FLUX.1-Kontext-dev"
FLUX2 = "black-forest-labs/FLUX.2-dev"
CALL_DEFAULTS: dict[str, dict[str, Any]] = {
    QWEN_IMAGE_EDIT: {"num_inference_steps": 50, "true_cfg_scale": 4.0, "negative_prompt": " "},
    FLUX1_KONTEXT: {"num_inference_steps": 28, "guidance_scale": 2.5},
    FLUX2: {"num_inference_steps": 50, "guidance_scale": 4.0},
}
DTYPES = ("bfloat16", "float16", "float32")

Loader = Callable[[str, str, str], Any]


def load_pipeline(model: str, dtype: str, device: str) -> Any:
    """`DiffusionPipeline.from_pretrained(model)` in `dtype`, moved to `device`."""
    try:
        import torch
        from diffusers import DiffusionPipeline
    except ImportError as exc:
        raise EditorError(
            "the diffusers editor needs diffusers: pip install 'banana-tests[diffusers]'"
        ) from exc
    return DiffusionPipeline.from_pretrained(model, torch_dtype=getattr(torch, dtype)).to(device)


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class DiffusersEditor:
    name = "diffusers"
    accepts = frozenset({"seed"})

    def __init__(
        self,
        model: str,
        *,
        device: str = "auto",
        dtype: str = "bfloat16",
        call_options: Mapping[str, Any] | None = None,
        loader: Loader = load_pipeline,
    ) -> None:
        if dtype not in DTYPES:
            raise EditorError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.model, self.dtype, self.device = model, dtype, _device(device)
        self.call_options = {**CALL_DEFAULTS.get(model, {}), **(call_options or {})}
        self._loader = loader
        self._pipeline: Any = None

    def settings(self) -> dict[str, Any]:
        """The device is left out on purpose: a run may be resumed on another machine."""
        return {"model": self.model, "dtype": self.dtype, "call": self.call_options}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        import torch

        if self._pipeline is None:
            self._pipeline = self._loader(self.model, self.dtype, self.device)
        generator = torch.Generator(device="cpu" if self.device == "mps" else self.device)
        generator.manual_seed(0 if request.seed is None else request.seed)
        out = self._pipeline(
            image=request.image.convert("RGB"),
            prompt=request.prompt,
            generator=generator,
            **self.call_options,
        )
        return EditResult(out.images[0].convert("RGB"))


def _device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def make(config: EditorConfig) -> DiffusersEditor:
    """`--model` is a Hugging Face model id (default Qwen/Qwen-Image-Edit); `--device`, `--dtype`."""
    options = {key: _number(value) for key, value in config.options.items()}
    return DiffusersEditor(
        config.model or QWEN_IMAGE_EDIT, device=config.device, dtype=config.dtype, call_options=options
    )
