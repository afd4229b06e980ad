"""The editor protocol, its registry and the offline editors (emulate, jpeg, diffusers at its boundary)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageOps

from banana_tests.editors import base
from banana_tests.editors.diffusers_editor import QWEN_IMAGE_EDIT, DiffusersEditor, load_pipeline
from banana_tests.editors.emulate import ReplicaEmulator
from banana_tests.editors.jpeg import JpegEditor
from banana_tests.editors.replica import EmulateEditor
from banana_tests.prompts import FRUITS, REPLICATE, VARIANTS, apply_transform, resolve
from tests.conftest import noisy_image


def scene(w: int = 96, h: int = 64) -> Image.Image:
    """An asymmetric picture, so a missing flip or rotation cannot go unnoticed."""
    y, x = np.mgrid[0:h, 0:w]
    rgb = np.stack([255 * x / w, 255 * (y / h) ** 2, 128 + 0 * x], axis=-1)
    return Image.fromarray(rgb.astype(np.uint8))


def request(image: Image.Image, step: int = 1, **kwargs: Any) -> base.EditRequest:
    return base.EditRequest(image, kwargs.pop("prompt", REPLICATE), step, kwargs.pop("run", 0), "k", **kwargs)


def mad(a: Image.Image, b: Image.Image) -> float:
    assert a.size == b.size
    return float(np.abs(np.asarray(a, float) - np.asarray(b, float)).mean())


class ToyEditor:
    name, model, accepts = "toy", "toy-1", frozenset[str]()

    def settings(self) -> dict[str, Any]:
        return {"model": self.model}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: base.EditRequest) -> base.EditResult:
        return base.EditResult(request.image)


def make_toy(config: base.EditorConfig) -> ToyEditor:
    return ToyEditor()


def test_registry_builds_builtins_and_entry_point_editors(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = importlib.metadata.EntryPoint("toy", "tests.test_editors:make_toy", base.ENTRY_POINT_GROUP)
    monkeypatch.setattr(base, "_entry_points", lambda: [ep])
    assert base.available() == ["diffusers", "emulate", "gemini", "jpeg", "toy"]
    assert isinstance(base.create("toy", base.EditorConfig()), ToyEditor)
    assert isinstance(base.create("jpeg", base.EditorConfig()), JpegEditor)
    with pytest.raises(base.EditorError, match=r"unknown editor 'nope'; known: diffusers, emulate, gemini"):
        base.create("nope", base.EditorConfig())


def test_editor_options_are_typed_and_unknown_ones_refused() -> None:
    editor = base.create("jpeg", base.EditorConfig(options={"quality": "90", "resize": "0.5"}))
    assert isinstance(editor, JpegEditor) and (editor.quality, editor.resize) == (90, 0.5)
    with pytest.raises(
        base.EditorError, match=r"'jpeg' has no option\(s\) qualty \(known: quality, resize\)"
    ):
        base.create("jpeg", base.EditorConfig(options={"qualty": "90"}))
    with pytest.raises(base.EditorError, match="quality='high' is not a int"):
        base.create("jpeg", base.EditorConfig(options={"quality": "high"}))
    emulate = base.create("emulate", base.EditorConfig(options={"long_side": "64"}))
    assert isinstance(emulate, EmulateEditor) and emulate.params.long_side == 64


def test_redact_hides_secrets_but_not_trivial_strings() -> None:
    assert base.redact("key=abcd1234 failed", ["abcd1234", ""]) == "key=<redacted> failed"
    assert base.redact("a b", ["a"]) == "a b"


def test_prompts_are_the_papers_variants() -> None:
    assert resolve("replicate").for_step(7) == REPLICATE
    assert REPLICATE == "Produce an exact replica of the provided image, with no alterations."
    assert set(VARIANTS) == {
        "replicate",
        "rephrase",
        "mirror",
        "rotate",
        "add-apples",
        "add-fruits",
        "denoise",
    }
    fruits = [resolve("add-fruits").for_step(s) for s in range(1, len(FRUITS) + 1)]
    assert len(set(fruits)) == len(FRUITS) and "a banana" in fruits[1]
    assert resolve("custom", "Make it pop.").text == "Make it pop."
    with pytest.raises(ValueError, match="unknown prompt 'mirrror'"):
        resolve("mirrror")


def test_transforms_are_exact_round_trips() -> None:
    image = scene()
    mirrored = apply_transform(image, "mirror")
    assert np.array_equal(np.asarray(mirrored), np.asarray(image)[:, ::-1])
    rotated = apply_transform(image, "rotate")
    assert rotated.size == (64, 96)
    assert rotated.getpixel((63, 0)) == image.getpixel((0, 0))  # top-left goes to top-right: clockwise
    back = image
    for _ in range(4):
        back = apply_transform(back, "rotate")
    assert np.array_equal(np.asarray(back), np.asarray(image))


def test_emulate_editor_is_the_emulator_after_the_prompted_transform() -> None:
    image, editor = scene(), EmulateEditor()
    direct = ReplicaEmulator(seed=3).edit(image, step=1, run=2, key="k")
    got = editor.edit(request(image, seed=3, run=2)).image
    assert np.array_equal(np.asarray(got), np.asarray(direct))
    flipped = editor.edit(request(image, seed=3, run=2, transform="mirror")).image
    expected = ReplicaEmulator(seed=3).edit(ImageOps.mirror(image), step=1, run=2, key="k")
    assert np.array_equal(np.asarray(flipped), np.asarray(expected))


def test_jpeg_editor_loses_more_at_low_quality_and_keeps_geometry() -> None:
    image = noisy_image("j", 0, 3)
    high, low = JpegEditor(95), JpegEditor(20)
    assert mad(high.edit(request(image)).image, image) < mad(low.edit(request(image)).image, image)
    shrunk = JpegEditor(95, resize=0.5).edit(request(image)).image
    assert shrunk.size == image.size and mad(shrunk, image) > mad(high.edit(request(image)).image, image)
    editor, step = JpegEditor(100), scene()
    for i in range(2):
        step = editor.edit(request(step, step=i + 1, transform="mirror")).image
    assert mad(step, scene()) < 1.0  # mirror twice = identity, up to quality-100 rounding
    for i in range(4):
        step = editor.edit(request(step, step=i + 1, transform="rotate")).image
    assert mad(step, scene()) < 1.5
    with pytest.raises(base.EditorError, match=r"quality must lie in 1\.\.100"):
        JpegEditor(0)


class FakePipeline:
    """Stands in for a diffusers pipeline at its call boundary: records calls, mirrors the image."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> SimpleNamespace:
        self.calls.append(kwargs)
        return SimpleNamespace(images=[ImageOps.mirror(kwargs["image"])])


def test_diffusers_editor_loads_lazily_and_calls_the_pipeline_with_seed_and_defaults() -> None:
    loads: list[tuple[str, str, str]] = []
    pipe = FakePipeline()

    def loader(model: str, dtype: str, device: str) -> FakePipeline:
        loads.append((model, dtype, device))
        return pipe

    editor = DiffusersEditor(
        QWEN_IMAGE_EDIT, device="cpu", call_options={"num_inference_steps": 4}, loader=loader
    )
    assert loads == []  # nothing loaded before the first edit
    image = scene()
    first = editor.edit(request(image, seed=11, prompt="replicate it")).image
    second = editor.edit(request(first, step=2, seed=12)).image
    assert loads == [(QWEN_IMAGE_EDIT, "bfloat16", "cpu")]
    call = pipe.calls[0]
    assert call["prompt"] == "replicate it" and call["generator"].initial_seed() == 11
    assert (call["num_inference_steps"], call["true_cfg_scale"], call["negative_prompt"]) == (4, 4.0, " ")
    assert np.array_equal(np.asarray(pipe.calls[1]["image"]), np.asarray(first))
    assert pipe.calls[1]["generator"].initial_seed() == 12
    assert np.array_equal(np.asarray(second), np.asarray(image))
    assert editor.settings() == {
        "model": QWEN_IMAGE_EDIT,
        "dtype": "bfloat16",
        "call": {"num_inference_steps": 4, "true_cfg_scale": 4.0, "negative_prompt": " "},
    }


def test_diffusers_factory_parses_options_and_checks_dtype() -> None:
    config = base.EditorConfig(
        model="black-forest-labs/FLUX.1-Kontext-dev", device="cpu", options={"guidance_scale": "3"}
    )
    editor = base.create("diffusers", config)
    assert isinstance(editor, DiffusersEditor)
    assert editor.call_options == {"num_inference_steps": 28, "guidance_scale": 3}
    with pytest.raises(base.EditorError, match="dtype must be one of"):
        DiffusersEditor(QWEN_IMAGE_EDIT, dtype="float8")


@pytest.mark.skipif(importlib.util.find_spec("diffusers") is not None, reason="diffusers is installed")
def test_diffusers_missing_says_how_to_install() -> None:
    with pytest.raises(base.EditorError, match=r"pip install 'banana-tests\[diffusers\]'"):
        load_pipeline(QWEN_IMAGE_EDIT, "float32", "cpu")
