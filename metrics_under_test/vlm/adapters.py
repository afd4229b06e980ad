"""The VLM metrics behind the protocol: VisualQuality-R1, RALI (`rali`) and Q-Align (pyiqa's,
with `qalign_compat` on transformers 5).

Imported only when one of them is first scored. Each is built lazily and offline it fails fast,
before torch or transformers load, with `MissingWeights` naming the files it lacks.

VisualQuality-R1 is run as its model card runs it (thinking mode): the card's prompt in a chat
turn with the image, sampling with top-k 50 and top-p 1 for up to 2048 new tokens, and the score
is the number in the last `<answer>…</answer>`. Two deliberate differences, both so that a gate
is reproducible: each image is generated alone from a fixed seed (a score does not depend on its
batch neighbours or on the run's order), and an answer with no score is an error naming the
image where the card would draw a random score.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from metrics_under_test.protocol import Image, MetricError, UnscoredImages
from metrics_under_test.spec import Backend, MetricSpec
from metrics_under_test.vlm_catalog import BY_METRIC, Q_ALIGN, RALI, VISUALQUALITY_R1, check_files
from metrics_under_test.weights import MissingWeights

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
        from metrics_under_test.vlm.rali import Rali

        return Rali.load(device)
    if spec.name == Q_ALIGN.metric:
        from metrics_under_test.pyiqa_backend import PyiqaMetric, missing_extra

        try:
            import icecream  # noqa: F401  (pyiqa's mPLUG-Owl2 imports it and does not declare it)
        except ImportError as exc:
            raise missing_extra(spec.name, "icecream") from exc
        check_files(Q_ALIGN)
        from metrics_under_test.vlm import qalign_compat

        qalign_compat.apply()
        return PyiqaMetric(dataclasses.replace(spec, backend=Backend.PYIQA), device)
    raise MetricError(f"{spec.name!r} is not a VLM metric ({', '.join(BY_METRIC)} are)")


def revision(spec: MetricSpec) -> str:
    """The hub revision a VLM metric's score cache key holds (`VlmModel.identity`)."""
    return BY_METRIC[spec.name].identity()
