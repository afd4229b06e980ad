"""RALI behind the protocol, scored as its released demo scores (Q-Insight's `demo_rali_score.py`).

RALI ("Reasoning as representation", ICLR 2026) is not a generative VLM: it has no prompt and no
decoding. A CLIP image encoder's projected features are standardised and projected by a PCA,
compared by cosine similarity with learnt prototypes, and the score is the softmax(similarity /
tau)-weighted mean of the prototypes' scores. The files are the `RALI/` folder of the hub
repository ByteDance/Q-Insight (the demo's `checkpoints/`): `pca.pkl` (a joblib pickle; only its
`mean_` survives the demo's loading), `basis.npz` (`vectors`, `scores`: they size the prototypes),
`ckpt.pt` (`state_dict`: the whole CLIP model under `clip.` and the scorer's tensors under
`scorer.`, loaded strictly, so it overrides the PCA scale and components, the prototypes, their
scores and tau) and `best/` (the CLIP config and image processor).

Same arithmetic as the demo, in float32; three differences of form, none of result:
- the CLIP model is built from `best/config.json` and takes every weight from `ckpt.pt` (the demo
  loads `best/`'s weights first, then overwrites all of them with the same strict load), so
  `best/`'s weight file is not needed;
- images go through the image half of the demo's `CLIPProcessor` (`AutoImageProcessor` on the
  same `best/` folder), the tokenizer half is never used for an image score;
- on transformers 5 `get_image_features` returns a model output, whose `pooler_output` is the
  projected feature the demo's transformers 4 returned as a tensor.
Loading is kept safe: `ckpt.pt` is read with `torch.load(weights_only=True)` (tensors only), the
files come from one pinned revision (`VlmModel.load_revision`, `BANANA_RALI_REVISION`), and
`pca.pkl`, a pickle that can run any code when loaded, is loaded only when its sha256 is trusted
(TRUSTED_PICKLES, or the user's `BANANA_TRUSTED_PICKLES`); else it is refused, naming it.

Not verified here (the files cannot be downloaded on this machine): the prototype scores' scale
(the paper's Table 2 gives RALI's range as [1, 5], which the suite normalises with) and the CLIP
variant (the demo probes it with a 336 px image).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics_under_test.protocol import Image, MetricError
from metrics_under_test.vlm_catalog import RALI, check_files, hf_hub_cache
from metrics_under_test.weights import MissingWeights, offline

SCORER_KEYS = ("pca_scale", "pca_components", "prototypes", "proto_scores", "logit_scale")
TRUSTED_PICKLES: frozenset[str] = frozenset()
"""sha256 of the released `RALI/pca.pkl` files known to be safe. None is recorded yet: no copy
could be downloaded and checked from this project's machine, and a hash read off the hub would
only repeat what a compromised hub says. Until one is, a user opts in (TRUST_VARIABLE)."""
TRUST_VARIABLE = "BANANA_TRUSTED_PICKLES"  # comma-separated sha256 of pickles the user trusts


def load_trusted_pickle(path: Path, shown: str) -> Any:
    """`joblib.load(path)` when the file's sha256 is trusted, else a MetricError naming `shown`,
    its sha256 and the opt-in: unpickling runs whatever code the file holds."""
    import joblib

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    trusted = TRUSTED_PICKLES | {h.strip().lower() for h in os.environ.get(TRUST_VARIABLE, "").split(",")}
    if digest not in trusted:
        raise MetricError(
            f"rali: refusing to load {shown} ({path}), a pickle with sha256 {digest} that is not a "
            f"known release: loading a pickle runs any code it holds. If you trust this file, set "
            f"{TRUST_VARIABLE}={digest} (several: comma-separated)"
        )
    return joblib.load(path)


@dataclass(frozen=True)
class PrototypeScorer:
    """The demo's `PrototypeScorer` at inference: the PCA, the prototypes and their scores, and
    the softmax's inverse temperature (`logit_scale`, tau = 1 / logit_scale)."""

    pca_mean: Any  # torch tensors, float32
    pca_scale: Any
    pca_components: Any
    prototypes: Any
    proto_scores: Any
    logit_scale: Any

    def __call__(self, features: Any) -> Any:
        import torch
        from torch.nn import functional

        standardised = (features - self.pca_mean) / torch.abs(self.pca_scale)
        projected = functional.normalize(standardised @ self.pca_components.T, dim=-1)
        similarity = projected @ functional.normalize(self.prototypes, dim=-1).T
        tau = 1.0 / self.logit_scale.clamp(min=1e-6)
        return functional.softmax(similarity / tau, dim=-1) @ self.proto_scores


def read_scorer(pca: Any, state: Mapping[str, Any], device: str) -> PrototypeScorer:
    """The scorer the demo ends with: `pca.pkl`'s mean (no parameter of the demo's module, so the
    checkpoint cannot hold it) and the checkpoint's tensors, which its strict load puts over the
    PCA's scale and components and over `basis.npz`'s prototypes and scores."""
    import numpy as np
    import torch

    def tensor(value: Any) -> Any:
        return torch.as_tensor(value if torch.is_tensor(value) else np.asarray(value)).to(
            device=device, dtype=torch.float32
        )

    return PrototypeScorer(
        pca_mean=tensor(pca.mean_), **{key: tensor(state[f"scorer.{key}"]) for key in SCORER_KEYS}
    )


def check_checkpoint(state: Mapping[str, Any], clip_keys: set[str], basis: Mapping[str, Any]) -> None:
    """The demo's `load_state_dict(strict=True)`: exactly the CLIP model's and the scorer's keys,
    and as many prototypes as `basis.npz` has; else an error naming `ckpt.pt`."""
    expected = {f"clip.{k}" for k in clip_keys} | {f"scorer.{k}" for k in SCORER_KEYS}
    missing, unexpected = sorted(expected - state.keys()), sorted(state.keys() - expected)
    if missing or unexpected:
        raise MetricError(
            f"rali: RALI/ckpt.pt does not match the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    if tuple(state["scorer.prototypes"].shape) != tuple(basis["vectors"].shape):
        raise MetricError(
            f"rali: RALI/ckpt.pt has prototypes of shape {tuple(state['scorer.prototypes'].shape)}, "
            f"RALI/basis.npz {tuple(basis['vectors'].shape)}"
        )


def fetch(filename: str) -> Path:
    """One file of the repository: from the cache, or downloaded into it when online; a file that
    cannot be had is `MissingWeights` naming it (offline and not cached, not on the hub, no network)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError

    try:
        path = hf_hub_download(
            RALI.repo,
            filename,
            revision=RALI.load_revision(),
            cache_dir=str(hf_hub_cache()),
            local_files_only=offline(),
        )
    except (OSError, HfHubHTTPError) as exc:  # LocalEntryNotFoundError is an OSError
        raise MissingWeights(
            f"rali: cannot get {filename} of {RALI.repo} ({exc}); {RALI.how_to_provide()}"
        ) from exc
    return Path(str(path))


class Rali:
    """RALI: a CLIP image encoder and a prototype scorer; images of a batch scored together."""

    name = RALI.metric
    lower_better = False
    score_range = (RALI.low, RALI.high)
    cost = "vlm"

    def __init__(self, clip: Any, image_processor: Any, scorer: PrototypeScorer, device: str) -> None:
        self.clip, self.image_processor, self.scorer, self.device = clip, image_processor, scorer, device

    @classmethod
    def load(cls, device: str) -> Rali:

        check_files(RALI)
        paths = {f: fetch(f) for f in RALI.files}
        try:
            import joblib  # noqa: F401  (load_trusted_pickle's; checked before anything loads)
        except ImportError as exc:
            raise MetricError(
                "rali: reading RALI/pca.pkl needs joblib, and scikit-learn for the PCA it likely "
                "holds: pip install 'banana-tests[vlm]' (or joblib scikit-learn)"
            ) from exc
        pca = load_trusted_pickle(paths["RALI/pca.pkl"], f"{RALI.repo} RALI/pca.pkl")  # before the model
        import numpy as np
        import torch
        from transformers import AutoImageProcessor, CLIPConfig, CLIPModel

        best = paths["RALI/best/config.json"].parent
        clip: Any = CLIPModel(CLIPConfig.from_pretrained(best))
        state = torch.load(paths["RALI/ckpt.pt"], map_location="cpu", weights_only=True)["state_dict"]
        with np.load(paths["RALI/basis.npz"]) as npz:
            basis = {k: npz[k] for k in npz.files}
        check_checkpoint(state, set(clip.state_dict()), basis)
        clip.load_state_dict({k[len("clip.") :]: v for k, v in state.items() if k.startswith("clip.")})
        scorer = read_scorer(pca, state, device)
        return cls(clip.to(device).eval(), AutoImageProcessor.from_pretrained(best), scorer, device)

    def features(self, images: Sequence[Image]) -> Any:
        """CLIP's projected image features, as `get_image_features` gives them."""
        import torch
        from PIL import Image as PILImage

        pixels = self.image_processor(
            images=[PILImage.fromarray(image) for image in images], return_tensors="pt"
        )["pixel_values"].to(self.device)
        with torch.inference_mode():
            out = self.clip.get_image_features(pixel_values=pixels)
        return out if torch.is_tensor(out) else out.pooler_output

    def __call__(self, images: Sequence[Image]) -> list[float]:
        import torch

        with torch.inference_mode():
            scores = self.scorer(self.features(images).float())
        return [float(s) for s in scores.tolist()]
