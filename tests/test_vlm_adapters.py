"""The VLM metrics' adapters (metrics_under_test/vlm.py), offline.

VisualQuality-R1 runs on a tiny randomly initialised Qwen2.5-VL built from a config, with the real
transformers processor around a small word-level tokenizer built in code: the model card's chat
prompt and the image go through the real processor and `generate`. A random model writes noise,
so a real `LogitsProcessor` steers its sampling to a scripted answer per image; the score then
comes back through ScoreBook's batching. Missing files fail fast, naming them.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from banana_tests.scoring.score_book import ScoreBook
from banana_tests.trajectories.images import ImageStore
from banana_tests.trajectories.records import DataError
from metrics_under_test import vlm
from metrics_under_test.registry import lookup, resolve
from metrics_under_test.vlm_catalog import Q_ALIGN, RALI, VISUALQUALITY_R1
from metrics_under_test.weights import MissingWeights
from tests.conftest import write_crops

# Outputs in the model card's format (thinking mode), as VisualQuality-R1 writes them.
CARD_OUTPUTS = {
    "<think>The image shows fine static noise over the sky and a green cast in the shadows; the edges are"
    " still sharp.</think><answer>3.72</answer>": 3.72,
    "<think>Sharp, well exposed, no visible artefacts.</think>\n<answer> 4.50 </answer>": 4.5,
    "<think>first guess <answer>2</answer>, but the noise is heavy</think><answer>1.85</answer>": 1.85,
    "<answer>Rating: 3</answer>": 3.0,
}
UNPARSEABLE = {
    "<think>The image has a lot of noise and the colours are shifted, so": "no <answer>",
    "<think>Looks fine.</think><answer>excellent</answer>": "no number in the answer 'excellent'",
    "": "no <answer>",
}
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>")
PADS = ("<|image_pad|>", "<|video_pad|>")
TAGS = ("<think>", "</think>", "<answer>", "</answer>")
SCRIPTED = ("3.72", "1.85", "4.5", "excellent")  # one answer per generate call, in call order
# Chat format of Qwen2.5-VL's own template, reduced to what one user turn with an image needs.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}{% if add_vision_id %}Picture 1: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.mark.parametrize("output", CARD_OUTPUTS)
def test_scores_parse_from_model_card_outputs(output: str) -> None:
    assert vlm.parse_score(output) == CARD_OUTPUTS[output]


@pytest.mark.parametrize("output", UNPARSEABLE)
def test_an_output_without_a_score_is_a_clear_error(output: str) -> None:
    with pytest.raises(ValueError, match=re.escape(UNPARSEABLE[output])):
        vlm.parse_score(output)


def tiny_processor() -> Any:
    """The real Qwen2.5-VL processor around a word-level tokenizer of the prompt's words."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    words = re.findall(
        r"\w+|[^\w\s]", vlm.QUESTION_TEMPLATE.format(Question=vlm.PROMPT) + " user assistant Picture"
    )
    vocab = {token: i for i, token in enumerate((*SPECIALS, *PADS, "[UNK]", *TAGS, *SCRIPTED))}
    for word in sorted(set(words)):
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    tokenizer.add_special_tokens({"additional_special_tokens": [*SPECIALS, *PADS]})
    tokenizer.add_tokens([*TAGS, *SCRIPTED])
    tokenizer.padding_side = "left"
    images = Qwen2VLImageProcessor(min_pixels=56 * 56, max_pixels=112 * 112)
    return Qwen2_5_VLProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=CHAT_TEMPLATE,
    )


def tiny_model(tokenizer: Any) -> Any:
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ids = tokenizer.convert_tokens_to_ids
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]},
            "bos_token_id": ids("<|endoftext|>"),
            "eos_token_id": ids("<|im_end|>"),
            "pad_token_id": ids("<|endoftext|>"),
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 4,
            "out_hidden_size": 32,
            "fullatt_block_indexes": [1],
        },
        image_token_id=ids("<|image_pad|>"),
        video_token_id=ids("<|video_pad|>"),
        vision_start_token_id=ids("<|vision_start|>"),
    )
    torch.manual_seed(0)
    return Qwen2_5_VLForConditionalGeneration(config).eval()


class ScriptedAnswer:
    """A real `LogitsProcessor`: steers each generation to `<answer> X </answer>`, X the next of
    SCRIPTED, then to the end token, whatever the random model's logits."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer, self.calls = tokenizer, 0
        self.prompt_length: int | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self.prompt_length is None or input_ids.shape[1] <= self.prompt_length:
            self.prompt_length, self.calls = input_ids.shape[1], self.calls + 1
        answer = SCRIPTED[(self.calls - 1) % len(SCRIPTED)]
        plan = self.tokenizer.convert_tokens_to_ids(["<answer>", answer, "</answer>", "<|im_end|>"])
        token = plan[min(input_ids.shape[1] - self.prompt_length, len(plan) - 1)]
        forced = torch.full_like(scores, -float("inf"))
        forced[:, token] = 0.0
        return forced


@pytest.fixture(scope="module")
def adapter() -> Iterator[tuple[vlm.VisualQualityR1, ScriptedAnswer, list[dict[str, Any]]]]:
    pytest.importorskip("transformers")
    from transformers import LogitsProcessorList

    processor = tiny_processor()
    model = tiny_model(processor.tokenizer)
    script = ScriptedAnswer(processor.tokenizer)
    seen: list[dict[str, Any]] = []

    def image_spy(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """generate() encodes the image first, then runs the prompt through the model."""
        pixels = args[0] if args else kwargs["hidden_states"]
        grid = args[1] if len(args) > 1 else kwargs["grid_thw"]
        seen.append({"pixel_values": pixels.clone(), "image_grid_thw": grid.clone()})

    def prompt_spy(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if kwargs["input_ids"].shape[1] > 1:  # the prefill step (later steps feed one new token)
            seen[-1]["input_ids"] = kwargs["input_ids"].clone()

    hooks = [
        model.register_forward_pre_hook(prompt_spy, with_kwargs=True),
        model.model.visual.register_forward_pre_hook(image_spy, with_kwargs=True),
    ]
    metric = vlm.VisualQualityR1(
        model,
        processor,
        "cpu",
        vlm.Decoding(max_new_tokens=8),
        logits_processor=LogitsProcessorList([script]),
    )
    yield metric, script, seen
    for hook in hooks:
        hook.remove()


def test_the_prompt_and_the_image_reach_the_model(adapter: Any) -> None:
    metric, script, seen = adapter
    from PIL import Image

    image = np.random.default_rng(1).integers(0, 256, (60, 90, 3), dtype=np.uint8)
    seen.clear()
    script.prompt_length = None
    start = time.process_time()
    assert metric([image]) == [3.72]
    print(f"tiny VisualQuality-R1: {time.process_time() - start:.2f} s CPU for one image")
    (call,) = seen
    tokenizer = metric.processor.tokenizer
    prompt = tokenizer(vlm.QUESTION_TEMPLATE.format(Question=vlm.PROMPT), add_special_tokens=False).input_ids
    ids = call["input_ids"][0].tolist()
    assert any(ids[i : i + len(prompt)] == prompt for i in range(len(ids))), (
        "the card's prompt is not in input_ids"
    )
    expected = metric.processor.image_processor(images=[Image.fromarray(image)], return_tensors="pt")
    assert call["pixel_values"].shape == expected["pixel_values"].shape
    assert np.array_equal(call["pixel_values"].numpy(), expected["pixel_values"].numpy()), (
        "pixels not the image's"
    )
    merged = int(call["image_grid_thw"].prod()) // 4  # 2x2 patches per visual token
    assert ids.count(tokenizer.convert_tokens_to_ids("<|image_pad|>")) == merged
    assert "Picture 1 :" in tokenizer.decode(ids), "the card's add_vision_id=True did not reach the template"
    assert [vlm.parse_score(o) for o in metric.outputs] == [3.72]


def test_scores_come_back_through_the_suites_batching(adapter: Any, tmp_path: Path) -> None:
    """Two crops of one size share a batch, a third is alone; the fourth generation answers
    `excellent`: that image alone fails, naming its file and the answer."""
    metric, script, seen = adapter
    seen.clear()
    script.prompt_length, script.calls = None, 0
    crops = (
        ("astronaut", 5, 40, 60, 64, 64),
        ("brick", 20, 10, 10, 64, 64),
        ("chelsea", 10, 0, 0, 56, 84),
        ("hubble_deep_field", 10, 0, 0, 70, 70),
    )
    records = write_crops(tmp_path, crops)
    calls: list[int] = []

    def loader(spec: Any, device: str) -> Any:
        def batch(images: list[np.ndarray]) -> list[float]:
            calls.append(len(images))
            return metric(images)

        batch.name, batch.lower_better, batch.score_range = metric.name, False, metric.score_range  # type: ignore[attr-defined]
        return batch

    book = ScoreBook("cpu", ImageStore(), loader=loader)
    spec = lookup("VisualQuality-R1")
    order = sorted(range(len(records)), key=lambda i: crops[i][4:])  # ScoreBook batches by shape
    expected = {records[i].path: SCRIPTED[n] for n, i in enumerate(order)}
    good = [r for r in records if expected[r.path] != "excellent"]
    bad = next(r for r in records if expected[r.path] == "excellent")
    assert book.scores(spec, good, upcoming=[bad]) == [float(expected[r.path]) for r in good]
    assert sorted(calls) == [1, 1, 2]
    with pytest.raises(DataError) as info:
        book.scores(spec, [bad])
    assert str(bad.path) in str(info.value) and "no number in the answer 'excellent'" in str(info.value)
    assert len(seen) == 4, "one generation per image"


def test_the_vlm_metrics_resolve_by_paper_name_with_table_2_ranges() -> None:
    for paper_name, name in (
        ("VisualQuality-R1", "visualquality_r1"),
        ("RALI", "rali"),
        ("Q-Align", "qalign"),
    ):
        (spec,) = resolve(paper_name)
        assert (spec.name, spec.backend, spec.low, spec.high, spec.lower_better) == (
            name,
            "vlm",
            1.0,
            5.0,
            False,
        )


@pytest.mark.parametrize("model", [VISUALQUALITY_R1, RALI, Q_ALIGN], ids=lambda m: m.metric)
def test_missing_files_fail_fast_naming_them(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline with empty caches: MissingWeights naming the files, before torch is needed."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    start = time.perf_counter()
    with pytest.raises(MissingWeights) as info:
        vlm.build(lookup(model.metric), "cpu")
    assert time.perf_counter() - start < 1.0
    message = str(info.value)
    assert all(f in message for f in model.files) and model.repo in message and str(model.folder) in message


def test_files_in_the_cache_count_as_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = VISUALQUALITY_R1.folder / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    for name in VISUALQUALITY_R1.files[:-1]:
        (snapshot / name).write_text("{}")
    assert VISUALQUALITY_R1.missing() == ["tokenizer.json"]
    (snapshot / "tokenizer.json").write_text("{}")
    assert VISUALQUALITY_R1.missing() == []
    assert os.environ["HF_HUB_CACHE"] == str(tmp_path)


def tiny_one_align(cache: Path) -> Path:
    """A hub cache holding a tiny random `q-future/one-align`: an mPLUG-Owl2 config, a LLaMA-style
    BPE tokenizer of the Q-Align prompt's words, a CLIP image processor and the saved weights."""
    import json

    from tokenizers import Tokenizer, models

    repo = cache / "models--q-future--one-align"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    words = (
        "USER: How would you rate the quality of this image? ASSISTANT: The is excellent good fair poor bad"
    )
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    merges = []
    for char in sorted(set(words.replace(" ", "\u2581")) | {"\u2581", "\n"}):
        vocab.setdefault(char, len(vocab))
    for word in sorted(set(words.split())):  # "\u2581word" built one merge at a time
        piece = "\u2581"
        for char in word:
            if piece + char not in vocab:
                merges.append((piece, char))
                vocab[piece + char] = len(vocab)
            piece += char
    Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True)).save(
        str(snapshot / "tokenizer.json")
    )
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (snapshot / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "LlamaTokenizer", **special})
    )
    clip = {
        "image_processor_type": "CLIPImageProcessor",
        "size": {"shortest_edge": 28},
        "crop_size": 28,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
    }
    (snapshot / "preprocessor_config.json").write_text(json.dumps(clip))
    return snapshot


def q_align_on_a_tiny_model(cache: Path) -> dict[str, Any]:
    """In this process (HF_HUB_CACHE=cache, offline): build a tiny random one-align in the cache,
    then load it the real way (pyiqa's QAlign, `from_pretrained("q-future/one-align")`) and score."""
    from importlib import metadata

    import torch
    from pyiqa.archs.q_align.configuration_mplug_owl2 import MPLUGOwl2Config
    from pyiqa.archs.q_align.modeling_mplug_owl2 import MPLUGOwl2LlamaForCausalLM

    snapshot = tiny_one_align(cache)
    layers = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    visual = {
        "visual_model": {**layers, "projection_dim": 32, "image_size": 28, "patch_size": 14},
        "visual_abstractor": {**layers, "num_learnable_queries": 4, "encoder_hidden_size": 32},
    }
    config = MPLUGOwl2Config(
        visual_config=visual, vocab_size=200, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
    )  # fmt: skip
    config.save_pretrained(snapshot)
    torch.manual_seed(0)
    MPLUGOwl2LlamaForCausalLM(config).save_pretrained(snapshot)  # it reads the tokenizer from the cache
    out: dict[str, Any] = {"missing": Q_ALIGN.missing(), "transformers": metadata.version("transformers")}
    import pyiqa

    model = pyiqa.create_metric("qalign", device="cpu")
    try:
        out["pyiqa_score"] = float(model(torch.rand(1, 3, 40, 56)))
    except AttributeError as exc:
        out["pyiqa_error"] = str(exc)
    try:
        out["scores"] = vlm.build(lookup("qalign"), "cpu")([np.zeros((40, 56, 3), np.uint8)])
    except vlm.MetricError as exc:
        out["adapter_error"] = str(exc)
    return out


@pytest.mark.skipif(
    not os.environ.get("BANANA_PAPER_METRICS"),
    reason="pyiqa and a tiny mPLUG-Owl2 in a process of its own: run by the README's second test command",
)
def test_q_align_on_a_tiny_model_through_pyiqa(tmp_path: Path) -> None:
    """The real loading path on a tiny random model from a local hub cache, in a process of its
    own (huggingface_hub fixes its cache folder at import). With transformers 5 pyiqa's forward
    breaks, so the adapter refuses before any download, saying why; with transformers<5 a score
    in [1, 5] comes back."""
    import json
    import subprocess
    import sys

    from tests.conftest import PROJECT

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "tests.test_vlm_adapters", str(tmp_path / "hf")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=PROJECT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["missing"] == [], "the tiny repository is not where the adapter looks"
    if int(result["transformers"].split(".")[0]) >= 5:
        assert "invert_attention_mask" in result["pyiqa_error"], result
        refusal = result["adapter_error"]
        assert "invert_attention_mask" in refusal and "transformers<5" in refusal, result
    else:
        assert 1.0 <= result["pyiqa_score"] <= 5.0 and len(result["scores"]) == 1, result


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(q_align_on_a_tiny_model(Path(sys.argv[1]))))


def test_the_score_cache_keys_a_vlm_metric_by_its_adapter_code() -> None:
    """A VLM metric is no installed package: its identity is the adapter's source and the
    libraries that run the model (metadata.version("vlm") would raise)."""
    from banana_tests.scoring.cache import identity

    version = str(identity(lookup("visualquality_r1"), "cpu")["version"])
    assert version.startswith("vlm+src.") and "transformers " in version and "torch " in version
