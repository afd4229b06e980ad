"""Synthetic-parameter mode, for the project's tests and benchmarks only (never a user's run).

Offline, most of the paper's metrics cannot fetch their trained parameters, so their real code
path (the suite's adapter, batching and pyiqa's own forward) had never run here. `create_metric`
builds a metric exactly as `pyiqa.create_metric` does, but wherever the architecture would fetch
parameters it gets a deterministic random initialisation of the same shapes instead:

- pyiqa's `load_pretrained_network`: skipped, the freshly built (seeded) network is kept;
- pyiqa's `load_file_from_url`: a synthetic file of the right structure for the files that are
  not networks (ARNIQA's TorchScript regressor, QualiCLIP's checkpoint, NRQM's random forests),
  written to a temporary folder; any other file goes to pyiqa (real files, e.g. NIQE's in PI);
- timm `pretrained=True` (hub downloads): timm's `load_pretrained` is skipped;
- torchvision `weights=`: the weights' state dict is the model's own;
- `torch.hub.load_state_dict_from_url` (ARNIQA's encoder): a seeded ResNet-50's state dict;
- CLIP `load` (CLIPIQA, LIQE, QualiCLIP): pyiqa's CLIP class built with the OpenAI shapes.

Scores from this mode mean nothing about image quality: they test plumbing (finite scores, batch
invariance, determinism, device placement), so they must never reach a verdict, a snapshot or a
baseline. Nothing in the plugin or the CLI imports this module. Q-Align is left out: it is a 7B
vision-language model built by `transformers.from_pretrained` from a hub repository whose
configuration and tokenizer are files too, so there is nothing offline to build its shapes from.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

SEED = 0
UNSUPPORTED = {"qalign": "a 7B VLM whose config and tokenizer are hub files (transformers.from_pretrained)"}
# pyiqa's CLIP shapes (OpenAI's RN50 and ViT-B/32): embed_dim, image_resolution, vision_layers,
# vision_width, vision_patch_size, context_length, vocab_size, width, heads, layers.
CLIP_SHAPES: dict[str, tuple[Any, ...]] = {
    "RN50": (1024, 224, (3, 4, 6, 3), 64, None, 77, 49408, 512, 8, 12),
    "ViT-B/32": (512, 224, 12, 768, 32, 77, 49408, 512, 8, 12),
}
# the pyiqa modules that build the paper's metrics (pyiqa imports each on first use)
ARCH_MODULES = (
    *("arniqa_arch", "clipiqa_arch", "cnniqa_arch", "dbcnn_arch", "hypernet_arch", "liqe_arch"),
    *("maniqa_arch", "musiq_arch", "nima_arch", "nrqm_arch", "niqe_arch", "paq2piq_arch"),
    *("qualiclip_arch", "topiq_arch", "tres_arch", "wadiqam_arch", "arch_util"),
)
QUALICLIP_PROMPTS = 14  # QualiCLIP's antonym prompts, whose text features its checkpoint holds
NRQM_FEATURES = 3  # trees split on the first features only: every NRQM feature group has more


class _OwnStateDict(dict):  # type: ignore[type-arg]
    """torchvision's `weights.get_state_dict()` here: tells `load_state_dict` to keep the model's own."""


def clip_model(backbone: str) -> Any:
    """pyiqa's CLIP with OpenAI's shapes for `backbone`, seeded, in float32 as `load(.., 'cpu')`."""
    import torch
    from pyiqa.archs.clip_model import CLIP

    torch.manual_seed(SEED)
    return CLIP(*CLIP_SHAPES[backbone]).float().eval()


def _arniqa_encoder() -> dict[str, Any]:
    """ARNIQA.pth's layout: a ResNet-50 without its head, keys prefixed `model.`."""
    import torch
    import torchvision

    torch.manual_seed(SEED)
    trunk = torch.nn.Sequential(*list(torchvision.models.resnet50().children())[:-1])
    return {f"model.{k}": v for k, v in trunk.state_dict().items()}


def _arniqa_regressor(path: Path) -> None:
    """A TorchScript linear regressor over ARNIQA's two 2048-d ResNet-50 features, as the real one."""
    import torch

    torch.manual_seed(SEED)
    torch.jit.save(torch.jit.script(torch.nn.Linear(2 * 2048, 1)), str(path))


def _qualiclip_checkpoint(path: Path) -> None:
    """QualiCLIP's checkpoint: the CLIP RN50 state dict (keys `clip_model.`) and unit text features."""
    import torch

    state = {f"clip_model.{k}": v for k, v in clip_model("RN50").state_dict().items()}
    gen = torch.Generator().manual_seed(SEED)
    features = torch.randn(QUALICLIP_PROMPTS, CLIP_SHAPES["RN50"][0], generator=gen)
    state["prompts_features"] = features / features.norm(dim=-1, keepdim=True)
    torch.save(state, path)


def _nrqm_model(path: Path) -> None:
    """NRQM_model.mat's structure: `linear` (4, 1) and three random forests of 7-node trees (as
    MATLAB's TreeBagger fields: left/right child (1-based, 0 at a leaf), two unused, threshold,
    prediction, attribute), integer where pyiqa indexes with them."""
    import scipy.io

    rng = np.random.default_rng(SEED)
    nodes, trees = 7, 10
    left = np.zeros((nodes, trees), dtype=np.int32) + np.array([2, 4, 6, 0, 0, 0, 0], dtype=np.int32)[:, None]
    right = np.where(left > 0, left + 1, 0).astype(np.int32)
    forests = np.empty((1, 3), dtype=object)
    for i in range(3):
        forests[0, i] = {
            "ldau": left,
            "rdau": right,
            "unused_a": np.zeros((nodes, trees)),
            "unused_b": np.zeros((nodes, trees)),
            "threshold": 10.0 ** rng.uniform(-3.0, 2.0, (nodes, trees)),  # features' span here
            "pred": rng.uniform(0.0, 10.0, (nodes, trees)),
            "attribute": rng.integers(1, NRQM_FEATURES + 1, (nodes, trees)).astype(np.int32),
        }
    linear = np.array([[0.0], [0.4], [0.3], [0.3]])
    scipy.io.savemat(str(path), {"model": {"linear": linear, "rf": forests}})


# files that are not networks, by the name pyiqa fetches them under
SYNTHETIC_FILES: dict[str, Callable[[Path], None]] = {
    "regressor_koniq10k.pth": _arniqa_regressor,
    "QualiCLIP.pth": _qualiclip_checkpoint,
    "NRQM_model.mat": _nrqm_model,
}


@contextlib.contextmanager
def synthetic_parameters() -> Iterator[None]:
    """Within the block, pyiqa, timm, torchvision and CLIP builds get seeded random parameters."""
    import timm.models._builder as timm_builder
    import torch
    import torchvision.models._api as tv_api
    from pyiqa.utils import download_util

    for arch in ARCH_MODULES:  # pyiqa imports them lazily; their own names are patched below
        importlib.import_module(f"pyiqa.archs.{arch}")
    real_fetch = download_util.load_file_from_url
    real_load_state_dict = torch.nn.Module.load_state_dict

    with tempfile.TemporaryDirectory(prefix="banana-synthetic-") as tmp, pytest_free_patch() as patch:
        folder = Path(tmp)

        def fetch(
            url: str, model_dir: str | None = None, progress: bool = True, file_name: str | None = None
        ) -> str:
            name = file_name or url.rsplit("/", 1)[-1].split("?")[0]
            make = SYNTHETIC_FILES.get(name)
            if make is None:
                return str(real_fetch(url, model_dir=model_dir, progress=progress, file_name=file_name))
            path = folder / name
            if not path.exists():
                make(path)
            return str(path)

        def keep_own(self: torch.nn.Module, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(state_dict, _OwnStateDict):
                return real_load_state_dict(self, self.state_dict(), *args, **kwargs)
            return real_load_state_dict(self, state_dict, *args, **kwargs)

        def hub_fetch(url: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
            if url.rsplit("/", 1)[-1] != "ARNIQA.pth":
                raise NotImplementedError(f"no synthetic parameters for {url}")
            return _arniqa_encoder()

        for name, module in list(sys.modules.items()):
            if not name.startswith("pyiqa.") or module is None:
                continue
            if hasattr(module, "load_pretrained_network"):
                patch(module, "load_pretrained_network", lambda *a, **k: None)
            if hasattr(module, "load_file_from_url"):
                patch(module, "load_file_from_url", fetch)
            if name != "pyiqa.archs.clip_model" and getattr(module, "load", None) is _clip_load():
                patch(module, "load", lambda backbone, device="cpu", **k: clip_model(backbone).to(device))
            if hasattr(module, "DEFAULT_CACHE_DIR") and name == "pyiqa.archs.liqe_arch":
                patch(module, "DEFAULT_CACHE_DIR", tmp)  # LIQE caches its text features there
        patch(timm_builder, "load_pretrained", lambda *a, **k: None)
        patch(tv_api.WeightsEnum, "get_state_dict", lambda self, *a, **k: _OwnStateDict())
        patch(torch.nn.Module, "load_state_dict", keep_own)
        patch(torch.hub, "load_state_dict_from_url", hub_fetch)
        torch.manual_seed(SEED)
        yield


def _clip_load() -> Any:
    from pyiqa.archs import clip_model as clip_module

    return clip_module.load


@contextlib.contextmanager
def pytest_free_patch() -> Iterator[Callable[[object, str, object], None]]:
    """setattr that is undone on exit (the benchmarks run without pytest's monkeypatch)."""
    undo: list[tuple[object, str, object]] = []

    def patch(target: object, name: str, value: object) -> None:
        undo.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    try:
        yield patch
    finally:
        for target, name, value in reversed(undo):
            setattr(target, name, value)


def create_metric(name: str, **kwargs: Any) -> Any:
    """`pyiqa.create_metric` with synthetic parameters: a drop-in for PyiqaMetric's `create_metric`."""
    if name in UNSUPPORTED:
        raise NotImplementedError(f"{name}: no synthetic mode: {UNSUPPORTED[name]}")
    import pyiqa

    with synthetic_parameters():
        return pyiqa.create_metric(name, **kwargs)
