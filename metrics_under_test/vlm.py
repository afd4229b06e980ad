"""The VLM metrics behind the protocol: VisualQuality-R1, RALI and Q-Align (pyiqa's, with the one
transformers 4 helper it needs on transformers 5). Which VLM metrics exist, and their files, is
metrics_under_test.vlm_catalog, light, for the registry and `banana-tests metrics`; this module is
imported only when one of them is built or its cache key is read.

Each is built lazily and offline it fails fast, before torch or transformers load, with
`MissingWeights` naming the files it lacks.

VisualQuality-R1 is run as its model card runs it (thinking mode): the card's prompt in a chat
turn with the image, sampling with top-k 50 and top-p 1 for up to 2048 new tokens, and the score
is the number in the last `<answer>…</answer>`. Two deliberate differences, both so that a gate
is reproducible: each image is generated alone from a fixed seed (a score does not depend on its
batch neighbours or on the run's order), and an answer with no score is an error naming the
image where the card would draw a random score.

Q-Align's mPLUG-Owl2 (pyiqa 0.1.16) calls `invert_attention_mask`, a `ModuleUtilsMixin` method
transformers 5 removed: `restore_invert_attention_mask` puts transformers 4's method back on that
class alone, only when it lacks it, and only when the suite loads Q-Align.

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

import dataclasses
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metrics_under_test.protocol import Image, MetricError, UnscoredImages
from metrics_under_test.spec import Backend, MetricSpec
from metrics_under_test.vlm_catalog import (
    BY_METRIC,
    Q_ALIGN,
    RALI,
    VISUALQUALITY_R1,
    check_files,
    hf_hub_cache,
)
from metrics_under_test.weights import MissingWeights, offline

PROMPT = (
    "You are doing the image quality assessment task. Here is the question: "
    "What is your overall rating on the quality of this picture? "
    "The rating should be a float between 1 and 5, rounded to two decimal places, "
    "with 1 representing very poor quality and 5 representing excellent quality."
)
QUESTION_TEMPLATE = (
    "{Question} First output the thinking process in <think> </think> tags and then output the final "
    "answer with only one score in <answer> </answer> tags."
)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_NUMBER = re.compile(r"\d+(\.\d+)?")


@dataclass(frozen=True)
class Decoding:
    """The model card's sampling settings, and the seed each image is generated from."""

    max_new_tokens: int = 2048
    do_sample: bool = True
    top_k: int = 50
    top_p: float = 1.0
    seed: int = 0


def parse_score(output: str) -> float:
    """The score in the last `<answer>…</answer>` of a model's output (the card's rule), or a
    ValueError quoting the output."""
    answers = _ANSWER.findall(output)
    if not answers:
        raise ValueError(f"no <answer>…</answer> in the model's output: {_clip(output)!r}")
    number = _NUMBER.search(answers[-1])
    if number is None:
        raise ValueError(f"no number in the answer {_clip(answers[-1])!r}")
    return float(number.group())


def _clip(text: str, keep: int = 200) -> str:
    text = text.strip()
    return text if len(text) <= keep else f"{text[: keep // 2]} … {text[-keep // 2 :]}"


class VisualQualityR1:
    """VisualQuality-R1-7B (Qwen2.5-VL) scoring one image per generation."""

    name = VISUALQUALITY_R1.metric
    lower_better = False
    score_range = (VISUALQUALITY_R1.low, VISUALQUALITY_R1.high)
    cost = "vlm"

    def __init__(
        self, model: Any, processor: Any, device: str, decoding: Decoding = Decoding(), **generate: Any
    ) -> None:
        """`generate` adds keyword arguments to `model.generate` (a logits processor, say)."""
        self.model, self.processor, self.device = model, processor, device
        self.decoding, self.generate_extra = decoding, generate
        self.outputs: list[str] = []  # the last batch's decoded outputs, reasoning included

    @classmethod
    def load(cls, device: str) -> VisualQualityR1:
        check_files(VISUALQUALITY_R1)
        import torch
        from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

        repo, revision = VISUALQUALITY_R1.repo, VISUALQUALITY_R1.load_revision()
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        try:
            loaded: Any = Qwen2_5_VLForConditionalGeneration.from_pretrained(
                repo, revision=revision, dtype=dtype
            )
            model = loaded.to(device).eval()
            processor = AutoProcessor.from_pretrained(repo, revision=revision)
        except OSError as exc:
            raise MissingWeights(
                f"{cls.name}: cannot load {repo} ({exc}); {VISUALQUALITY_R1.how_to_provide()}"
            ) from exc
        processor.tokenizer.padding_side = "left"
        return cls(model, processor, device)

    def messages(self, image: Any) -> list[dict[str, Any]]:
        text = QUESTION_TEMPLATE.format(Question=PROMPT)
        return [
            {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": text}]}
        ]

    def inputs(self, image: Image) -> Any:
        """The processor's tensors for one image: the chat prompt's tokens and the image's patches."""
        from PIL import Image as PILImage

        picture = PILImage.fromarray(image)
        chat = self.processor.apply_chat_template(
            self.messages(picture), tokenize=False, add_generation_prompt=True, add_vision_id=True
        )
        return self.processor(text=[chat], images=[picture], padding=True, return_tensors="pt").to(
            self.device
        )

    def __call__(self, images: Sequence[Image]) -> list[float]:
        import torch

        scores: list[float | None] = []
        reasons: dict[int, str] = {}
        self.outputs = []
        d = self.decoding
        for i, image in enumerate(images):
            inputs = self.inputs(image)
            with torch.inference_mode(), torch.random.fork_rng(devices=_cuda_devices(self.device)):
                torch.manual_seed(d.seed)
                generated = self.model.generate(
                    **inputs,
                    use_cache=True,
                    max_new_tokens=d.max_new_tokens,
                    do_sample=d.do_sample,
                    top_k=d.top_k,
                    top_p=d.top_p,
                    **self.generate_extra,
                )
            new_tokens = generated[:, inputs["input_ids"].shape[1] :]
            output = self.processor.batch_decode(
                new_tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )[0]
            self.outputs.append(output)
            try:
                scores.append(parse_score(output))
            except ValueError as exc:
                scores.append(None)
                reasons[i] = str(exc)
        if reasons:
            raise UnscoredImages(self.name, scores, reasons)
        return [s for s in scores if s is not None]


def _cuda_devices(device: str) -> list[int]:
    if not device.startswith("cuda"):
        return []
    index = device.partition(":")[2]
    return [int(index) if index else 0]


def build(spec: MetricSpec, device: str) -> Any:
    """The metric behind a `vlm` spec, loaded now."""
    if spec.name == VISUALQUALITY_R1.metric:
        return VisualQualityR1.load(device)
    if spec.name == RALI.metric:
        return Rali.load(device)
    if spec.name == Q_ALIGN.metric:
        from metrics_under_test.pyiqa_backend import PyiqaMetric, missing_extra

        try:
            import icecream  # noqa: F401  (pyiqa's mPLUG-Owl2 imports it and does not declare it)
        except ImportError as exc:
            raise missing_extra(spec.name, "icecream") from exc
        check_files(Q_ALIGN)
        apply_qalign_compat()
        return PyiqaMetric(dataclasses.replace(spec, backend=Backend.PYIQA), device)
    raise MetricError(f"{spec.name!r} is not a VLM metric ({', '.join(BY_METRIC)} are)")


def revision(spec: MetricSpec) -> str:
    """The hub revision a VLM metric's score cache key holds (`VlmModel.identity`)."""
    return BY_METRIC[spec.name].identity()


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


def invert_attention_mask(self: Any, encoder_attention_mask: Any) -> Any:
    """transformers 4.x `ModuleUtilsMixin.invert_attention_mask`: a 2-D or 3-D mask of 1 (attend)
    and 0 (masked) becomes an additive mask broadcast over the heads, 0 where attended and the
    dtype's lowest value where masked, in the model's dtype."""
    import torch

    if encoder_attention_mask.dim() == 3:
        extended = encoder_attention_mask[:, None, :, :]
    if encoder_attention_mask.dim() == 2:
        extended = encoder_attention_mask[:, None, None, :]
    extended = extended.to(dtype=self.dtype)  # fp16 compatibility
    return (1.0 - extended) * torch.finfo(self.dtype).min


def restore_invert_attention_mask(model_class: type) -> bool:
    """Give `model_class` transformers 4's `invert_attention_mask` if it has none; True if added."""
    if hasattr(model_class, "invert_attention_mask"):
        return False
    model_class.invert_attention_mask = invert_attention_mask  # type: ignore[attr-defined]
    return True


def apply_qalign_compat() -> None:
    """Make pyiqa's Q-Align run on the installed transformers (a no-op on transformers<5)."""
    from pyiqa.archs.q_align.visual_encoder import MplugOwlVisualAbstractorModel

    restore_invert_attention_mask(MplugOwlVisualAbstractorModel)
