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
import sys
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
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import lookup, resolve
from metrics_under_test.spec import Backend
from metrics_under_test.vlm_catalog import Q_ALIGN, RALI, VISUALQUALITY_R1
from metrics_under_test.weights import MissingWeights
from tests.conftest import needs, write_crops

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
    needs("transformers")
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
            Backend.VLM,
            1.0,
            5.0,
            False,
        )


@pytest.mark.parametrize("model", [VISUALQUALITY_R1, RALI, Q_ALIGN], ids=lambda m: m.metric)
def test_missing_files_fail_fast_naming_them(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline with empty caches: MissingWeights naming the files, before torch is needed."""
    if model is Q_ALIGN:
        needs("icecream")  # pyiqa's Q-Align imports it: the vlm extra
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    with pytest.raises(MissingWeights) as info:
        vlm.build(lookup(model.metric), "cpu")
    message = str(info.value)
    assert all(f in message for f in model.files) and model.repo in message and str(model.folder) in message


def test_q_align_without_icecream_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """icecream is Q-Align's extra, not a default dependency (its wheel installs a top-level
    `tests` package that hides a user's own): without it, one message names the extra."""
    monkeypatch.setitem(sys.modules, "icecream", None)  # what `import icecream` meets when absent
    with pytest.raises(MetricError, match=r"pip install 'banana-tests\[vlm\]'"):
        vlm.build(lookup(Q_ALIGN.metric), "cpu")


def test_files_in_the_cache_count_as_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Present means in the snapshot of the revision that loads: the commit `refs/main` names."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = VISUALQUALITY_R1.folder / "snapshots" / ("0123abc" * 6)[:40]
    snapshot.mkdir(parents=True)
    assert VISUALQUALITY_R1.missing() == list(VISUALQUALITY_R1.files)  # no ref: nothing loads
    (VISUALQUALITY_R1.folder / "refs").mkdir()
    (VISUALQUALITY_R1.folder / "refs" / "main").write_text(snapshot.name)
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

    import torch
    from pyiqa.archs.q_align.configuration_mplug_owl2 import MPLUGOwl2Config
    from pyiqa.archs.q_align.modeling_mplug_owl2 import MPLUGOwl2LlamaForCausalLM
    from tokenizers import Tokenizer, models

    repo = cache / "models--q-future--one-align"
    snapshot = repo / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    merges = []
    for char in sorted(set(Q_ALIGN_WORDS.replace(" ", "\u2581")) | {"\u2581", "\n"}):
        vocab.setdefault(char, len(vocab))
    for word in sorted(set(Q_ALIGN_WORDS.split())):  # "\u2581word" built one merge at a time
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
    layers = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    visual = {  # 28 px in 14 px patches: a 2x2 grid for the abstractor's key positions
        "visual_model": {**layers, "projection_dim": 32, "image_size": 28, "patch_size": 14},
        "visual_abstractor": {
            **layers,
            "num_learnable_queries": 4,
            "encoder_hidden_size": 32,
            "grid_size": 2,
        },
    }
    config = MPLUGOwl2Config(
        visual_config=visual, vocab_size=200, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
    )  # fmt: skip
    config.save_pretrained(snapshot)
    torch.manual_seed(0)
    MPLUGOwl2LlamaForCausalLM(config).save_pretrained(snapshot)  # it reads the tokenizer from the cache
    return snapshot


Q_ALIGN_WORDS = (
    "USER: How would you rate the quality of this image? ASSISTANT: The is excellent good fair poor bad"
)
Q_ALIGN_PROMPT = "USER: How would you rate the quality of this image?\n"  # the card's, as pyiqa sends it
Q_ALIGN_LEVELS = ("excellent", "good", "fair", "poor", "bad")  # weighted 5, 4, 3, 2, 1


def q_align_on_a_tiny_model(cache: Path, crops_folder: Path) -> dict[str, Any]:
    """In this process (HF_HUB_CACHE=cache, offline): build a tiny random one-align in the cache,
    then score crops through ScoreBook and the adapter's real loading path (pyiqa's QAlign,
    `from_pretrained("q-future/one-align")`), watching what reaches the model and what it returns."""
    from importlib import metadata

    import torch
    from pyiqa.archs.q_align.modeling_mplug_owl2 import MPLUGOwl2LlamaForCausalLM
    from pyiqa.archs.q_align.visual_encoder import MplugOwlVisualAbstractorModel

    tiny_one_align(cache)
    out: dict[str, Any] = {
        "missing": Q_ALIGN.missing(),
        "transformers": metadata.version("transformers"),
        "had_invert_attention_mask": hasattr(MplugOwlVisualAbstractorModel, "invert_attention_mask"),
    }
    seen: list[dict[str, Any]] = []

    def spy(_module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        seen.append(
            {"input_ids": args[0][0].tolist(), "images": kwargs["images"], "logits": output["logits"]}
        )

    def loader(spec: Any, device: str) -> Any:
        metric = vlm.build(spec, device)
        (model,) = [m for m in metric._model.modules() if isinstance(m, MPLUGOwl2LlamaForCausalLM)]
        model.register_forward_hook(spy, with_kwargs=True)
        out["tokenizer"] = model.tokenizer
        return metric

    crops = (("astronaut", 5, 40, 60, 40, 56), ("brick", 20, 10, 10, 40, 56), ("chelsea", 10, 0, 0, 48, 30))
    crops_folder.mkdir()
    records = write_crops(crops_folder, crops)
    book = ScoreBook("cpu", ImageStore(), loader=loader)
    start = time.process_time()
    out["scores"] = book.scores(lookup("Q-Align"), records)
    out["cpu_seconds"] = time.process_time() - start
    out["calls"] = len(seen)
    tokenizer = out.pop("tokenizer")
    levels = [tokenizer(word)["input_ids"][-1] for word in Q_ALIGN_LEVELS]
    from PIL import Image
    from pyiqa.archs.qalign_arch import expand2square
    from transformers import CLIPImageProcessor

    from banana_tests.trajectories.images import decode

    processor = CLIPImageProcessor.from_pretrained("q-future/one-align")
    order = sorted(range(len(records)), key=lambda i: crops[i][4:])  # ScoreBook batches by shape
    checks = []
    for call, i in zip(seen, order, strict=True):
        ids = call["input_ids"]
        square = expand2square(Image.fromarray(decode(records[i])[0]))  # what the suite handed the metric
        expected = processor.preprocess(square, return_tensors="pt")["pixel_values"].half()
        weights = torch.softmax(call["logits"][0, -1, levels].float(), -1)
        checks.append(
            {
                "image_tokens": ids.count(-200),  # pyiqa's IMAGE_TOKEN_INDEX
                "text": tokenizer.decode([t for t in ids if t >= 0]),
                "pixels_match": bool(torch.equal(call["images"].cpu(), expected)),
                "level_score": float(weights @ torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])),
                "path": str(records[i].path),
            }
        )
    out["checks"] = checks
    out["paths"] = [str(r.path) for r in records]
    return out


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("BANANA_PAPER_METRICS"),
    reason="pyiqa and a tiny mPLUG-Owl2 in a process of its own: run by the README's second test command",
)
def test_q_align_on_a_tiny_model_through_pyiqa(tmp_path: Path) -> None:
    """The real loading path on a tiny random model from a local hub cache, in a process of its
    own (huggingface_hub fixes its cache folder at import): the card's prompt and each image reach
    the model, and each score is the softmax over the five level words' logits weighted 5..1,
    through the suite's batching. On transformers 5 this needs `apply_qalign_compat`."""
    import json
    import subprocess
    import sys

    from tests.conftest import PROJECT

    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path / "hf"),
        "TORCH_HOME": str(tmp_path / "torch"),
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    cmd = [sys.executable, "-m", "tests.test_vlm_adapters", str(tmp_path / "hf"), str(tmp_path / "crops")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=PROJECT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"tiny Q-Align: {result['cpu_seconds']:.2f} s CPU for 3 images, transformers {result['transformers']}"
    )
    assert result["missing"] == [], "the tiny repository is not where the adapter looks"
    if int(result["transformers"].split(".")[0]) >= 5:  # the helper pyiqa calls is gone: the shim runs
        assert not result["had_invert_attention_mask"]
    assert result["calls"] == 3, "one forward per image"
    scores = dict(zip(result["paths"], result["scores"], strict=True))
    for check in result["checks"]:
        assert check["image_tokens"] == 1 and check["pixels_match"], check
        assert (
            Q_ALIGN_PROMPT.strip() in check["text"]
            and "ASSISTANT: The quality of the image is" in check["text"]
        )
        assert 1.0 <= scores[check["path"]] <= 5.0
        assert scores[check["path"]] == pytest.approx(check["level_score"], abs=2e-3)  # fp16 model


def test_the_q_align_shim_is_transformers_4s_helper() -> None:
    """`invert_attention_mask` as transformers 4 defined it: 1 attends (0 added), 0 is masked (the
    dtype's lowest value added), broadcast over heads; added only to a class that lacks it."""
    import torch

    from metrics_under_test import vlm

    class Owner:
        dtype = torch.float16

    mask = torch.tensor([[1, 1, 0]])
    inverted = vlm.invert_attention_mask(Owner(), mask)
    assert inverted.shape == (1, 1, 1, 3) and inverted.dtype == torch.float16
    assert inverted.flatten().tolist() == [0.0, 0.0, torch.finfo(torch.float16).min]
    square = vlm.invert_attention_mask(Owner(), torch.ones(2, 3, 3))
    assert square.shape == (2, 1, 3, 3) and not square.any()
    assert vlm.restore_invert_attention_mask(Owner) is True
    assert Owner.invert_attention_mask is vlm.invert_attention_mask  # type: ignore[attr-defined]
    assert vlm.restore_invert_attention_mask(Owner) is False


RALI_PROTOTYPES = 5


def tiny_rali(cache: Path, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """A hub cache holding a tiny random ByteDance/Q-Insight `RALI/` folder laid out as the demo's
    `checkpoints/`: a CLIP config and image processor in `best/`, the whole model in `ckpt.pt`
    (without the keys in `drop`), a joblib `pca.pkl` and `basis.npz`. Returns what was written,
    for the test's own arithmetic."""
    from types import SimpleNamespace

    import joblib
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    repo = cache / "models--ByteDance--Q-Insight"
    folder = repo / "snapshots" / ("1" * 40) / "RALI"
    (folder / "best").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("1" * 40)
    layers = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4}
    config = CLIPConfig(
        text_config={
            **layers,
            "vocab_size": 64,
            "max_position_embeddings": 16,
            "bos_token_id": 1,
            "eos_token_id": 2,
        },
        vision_config={**layers, "image_size": 28, "patch_size": 14},
        projection_dim=16,
    )
    config.save_pretrained(folder / "best")
    CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}).save_pretrained(
        folder / "best"
    )
    torch.manual_seed(7)
    clip = CLIPModel(config).eval()
    rng = np.random.default_rng(7)
    pca = SimpleNamespace(
        mean_=rng.normal(size=16), var_=rng.uniform(0.5, 2, 16), components_=rng.normal(size=(8, 16))
    )
    joblib.dump(pca, folder / "pca.pkl")
    np.savez(
        folder / "basis.npz",
        vectors=rng.normal(size=(RALI_PROTOTYPES, 8)),
        scores=rng.uniform(1, 5, RALI_PROTOTYPES),
    )
    scorer = {  # the checkpoint's scorer, not the PCA's or the basis's: its strict load wins
        "pca_scale": torch.rand(16) + 0.5,
        "pca_components": torch.randn(8, 16),
        "prototypes": torch.randn(RALI_PROTOTYPES, 8),
        "proto_scores": torch.rand(RALI_PROTOTYPES) * 4 + 1,
        "logit_scale": torch.tensor(1 / 0.07),  # the demo's default tau
    }
    state = {f"clip.{k}": v for k, v in clip.state_dict().items()} | {
        f"scorer.{k}": v for k, v in scorer.items()
    }
    torch.save({"state_dict": {k: v for k, v in state.items() if k not in drop}}, folder / "ckpt.pt")
    return {"clip": clip, "pca_mean": pca.mean_, "folder": folder, **scorer}


def rali_by_hand(written: dict[str, Any], pixels: Any) -> list[float]:
    """The demo's arithmetic, written out: CLIP's projected features, standardised and projected,
    cosine similarity to the prototypes, softmax at tau = 1 / logit_scale, mean prototype score."""
    import torch

    with torch.inference_mode():
        out = written["clip"].get_image_features(pixel_values=pixels)
    features = (out if torch.is_tensor(out) else out.pooler_output).double().numpy()
    x = (features - written["pca_mean"]) / written["pca_scale"].double().numpy()
    x = x @ written["pca_components"].double().numpy().T
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    prototypes = written["prototypes"].double().numpy()
    similarity = x @ (prototypes / np.linalg.norm(prototypes, axis=1, keepdims=True)).T
    logits = similarity * float(written["logit_scale"])
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    return list(weights @ written["proto_scores"].double().numpy())


def trust_pickles(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    """Opt in to the tiny RALI's own `pca.pkl` files, as a user opts in to one they trust."""
    import hashlib

    digests = [hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(cache.rglob("pca.pkl"))]
    monkeypatch.setenv("BANANA_TRUSTED_PICKLES", ",".join(digests))


@pytest.fixture
def rali_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    pytest.importorskip("joblib")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    written = tiny_rali(tmp_path / "hf")
    trust_pickles(monkeypatch, tmp_path / "hf")
    return written


def test_rali_scores_as_its_demo_through_the_suites_batching(
    rali_cache: dict[str, Any], tmp_path: Path
) -> None:
    """Loaded the real way (the hub cache, offline), RALI's scores come back through ScoreBook,
    each the demo's arithmetic on the image the suite decoded; a batch of two scores as the two
    images alone do."""
    from PIL import Image

    from banana_tests.trajectories.images import decode

    assert RALI.missing() == []
    seen: list[Any] = []
    calls: list[int] = []
    metrics: list[Any] = []

    def loader(spec: Any, device: str) -> Any:
        metric = vlm.build(spec, device)
        metric.clip.vision_model.register_forward_pre_hook(
            lambda _m, args, kwargs: seen.append(kwargs.get("pixel_values", args[0] if args else None)),
            with_kwargs=True,
        )
        metrics.append(metric)

        def batch(images: list[np.ndarray]) -> list[float]:
            calls.append(len(images))
            return metric(images)

        batch.name, batch.lower_better, batch.score_range = metric.name, False, metric.score_range  # type: ignore[attr-defined]
        return batch

    crops = (("astronaut", 5, 40, 60, 40, 56), ("brick", 20, 10, 10, 40, 56), ("chelsea", 10, 0, 0, 48, 30))
    (tmp_path / "crops").mkdir()
    records = write_crops(tmp_path / "crops", crops)
    start = time.process_time()
    scores = ScoreBook("cpu", ImageStore(), loader=loader).scores(lookup("RALI"), records)
    print(f"tiny RALI: {time.process_time() - start:.2f} s CPU for 3 images, load included")
    assert sorted(calls) == [1, 2] and len(metrics) == 1
    (metric,) = metrics
    pictures = [Image.fromarray(decode(r)[0]) for r in records]
    pixels = metric.image_processor(images=pictures, return_tensors="pt")["pixel_values"]
    reached = np.concatenate([p.numpy() for p in seen])
    assert sorted(map(bytes, reached)) == sorted(map(bytes, pixels.numpy())), "not the suite's images"
    assert scores == pytest.approx(rali_by_hand(rali_cache, pixels), abs=1e-5)
    assert all(1.0 <= s <= 5.0 for s in scores)  # a convex mix of prototype scores in [1, 5]
    alone = [metric([np.asarray(p)])[0] for p in pictures]
    assert scores == pytest.approx(alone, abs=1e-5)


def test_a_rali_checkpoint_that_does_not_fit_is_named(rali_cache: dict[str, Any]) -> None:
    import torch

    path = rali_cache["folder"] / "ckpt.pt"
    state = torch.load(path, weights_only=True)["state_dict"]
    del state["scorer.logit_scale"]
    torch.save({"state_dict": state}, path)
    with pytest.raises(
        vlm.MetricError, match=r"RALI/ckpt.pt does not match the model: missing \['scorer.logit_scale'\]"
    ):
        vlm.build(lookup("rali"), "cpu")


def tiny_rali_in_a_process(cache: Path, *drop: str) -> None:
    """`tiny_rali` in a process of its own, for tests under pytester: pytester drops the modules a
    test imported when it ends, and torch imported again in one process crashed it (SIGSEGV)."""
    import subprocess
    import sys

    from tests.conftest import PROJECT

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "tests.test_vlm_adapters", "rali", str(cache), *drop]
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=PROJECT, timeout=300)


@pytest.mark.slow
def test_rali_runs_through_the_shipped_suite_by_its_paper_name(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pytest --pyargs banana_tests --metric=RALI`, as a user runs it, offline on a tiny RALI in
    the hub cache: every Δ case reaches a verdict (a random model's, so passed or failed)."""
    from tests.conftest import junit_cases, suite_folder

    pytest.importorskip("joblib")
    suite = suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5, 10, 20))
    monkeypatch.setenv("HF_HUB_CACHE", str(suite.path / "hf"))
    tiny_rali_in_a_process(suite.path / "hf")
    trust_pickles(monkeypatch, suite.path / "hf")
    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=RALI", "--no-cache",
        "-k", "test_detects_degradation", "--junitxml=j.xml",
    )  # fmt: skip
    cases = junit_cases(suite.path / "j.xml")
    assert cases.keys() == {f"test_detects_degradation[rali-alpha-step{i}]" for i in (5, 10, 20)}
    for outcome, facts in cases.values():
        assert outcome in ("passed", "failure") and facts["metric"] == "rali", facts
        assert 1.0 <= float(facts["score_reference"]) <= 5.0 and 1.0 <= float(facts["score_step"]) <= 5.0
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()[-2000:]
    assert not {"error", "errors"} & result.parseoutcomes().keys(), result.stdout.str()[-2000:]


def test_an_untrusted_pickle_is_refused_naming_its_sha256_and_the_opt_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34: `joblib.load` of the hub's `pca.pkl` ran whatever code the file holds. A real
    joblib pickle: refused unless its sha256 is trusted, then loaded."""
    import hashlib

    joblib = pytest.importorskip("joblib")
    from metrics_under_test.vlm import TRUST_VARIABLE, load_trusted_pickle

    path = tmp_path / "pca.pkl"
    joblib.dump({"mean_": [1.0, 2.0]}, path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    monkeypatch.delenv(TRUST_VARIABLE, raising=False)
    with pytest.raises(vlm.MetricError) as info:
        load_trusted_pickle(path, "RALI/pca.pkl")
    message = str(info.value)
    assert "RALI/pca.pkl" in message and str(path) in message and f"{TRUST_VARIABLE}={digest}" in message
    monkeypatch.setenv(TRUST_VARIABLE, f"{'0' * 64}, {digest.upper()}")
    assert load_trusted_pickle(path, "RALI/pca.pkl") == {"mean_": [1.0, 2.0]}


def test_rali_refuses_its_hubs_pickle_until_trusted(
    rali_cache: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BANANA_TRUSTED_PICKLES")
    with pytest.raises(
        vlm.MetricError, match=r"refusing to load ByteDance/Q-Insight RALI/pca.pkl \(.*snapshots"
    ):
        vlm.build(lookup("rali"), "cpu")


class Payload:
    """Not a tensor: a pickle that `weights_only` will not rebuild."""


def test_a_checkpoint_holding_more_than_tensors_is_not_unpickled(rali_cache: dict[str, Any]) -> None:
    import pickle

    import torch

    path = rali_cache["folder"] / "ckpt.pt"
    state = torch.load(path, weights_only=True)
    torch.save({**state, "payload": Payload()}, path)
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        vlm.build(lookup("rali"), "cpu")


def test_a_vlm_is_keyed_and_loaded_by_the_hub_commit_of_its_pin(
    rali_cache: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The score cache keys a VLM metric by the commit its files come from (`refs/main` in the
    hub cache, or the pin `BANANA_RALI_REVISION`), and the adapter loads that commit's files."""
    import shutil

    from banana_tests.scoring.score_identity import identity
    from metrics_under_test import vlm

    main, pinned = "1" * 40, "2" * 40
    assert identity(lookup("rali"), "cpu")["revision"] == main
    assert vlm.fetch("RALI/pca.pkl").parent.parent.name == main
    shutil.copytree(RALI.folder / "snapshots" / main, RALI.folder / "snapshots" / pinned)
    monkeypatch.setenv("BANANA_RALI_REVISION", pinned)
    assert identity(lookup("rali"), "cpu")["revision"] == pinned
    assert vlm.fetch("RALI/pca.pkl").parent.parent.name == pinned
    monkeypatch.setenv("BANANA_RALI_REVISION", "3" * 40)  # pinned to a commit not downloaded
    assert identity(lookup("rali"), "cpu")["revision"] == f"{'3' * 40} (not in the cache)"
    with pytest.raises(MissingWeights, match=f"--revision {'3' * 40}"):
        vlm.build(lookup("rali"), "cpu")


def test_the_score_cache_keys_a_vlm_metric_by_its_adapter_code() -> None:
    """A VLM metric is no installed package: its identity is the adapters' source, every module
    of it, and the libraries that run the model (metadata.version("vlm") would raise)."""
    from banana_tests.scoring.score_identity import identity, module_file
    from metrics_under_test.own_code import file_sha256

    description = identity(lookup("visualquality_r1"), "cpu")
    version = str(description["version"])
    assert version.startswith("vlm; ") and "transformers " in version and "torch " in version
    suite = description["suite"]
    assert isinstance(suite, dict)
    adapters = {m: h for m, h in suite.items() if m.startswith("metrics_under_test.")}
    assert {m.rpartition(".")[2] for m in adapters} == {"vlm", "vlm_catalog", "protocol"}
    for module, digest in adapters.items():
        assert digest == file_sha256(module_file(module)), "an adapter module's code is not in the key"


if __name__ == "__main__":
    import json
    import sys

    if sys.argv[1] == "rali":
        tiny_rali(Path(sys.argv[2]), drop=tuple(sys.argv[3:]))
    else:
        print(json.dumps(q_align_on_a_tiny_model(Path(sys.argv[1]), Path(sys.argv[2]))))
