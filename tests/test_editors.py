"""The editor protocol, its registry and the offline editors (emulate, jpeg, diffusers at its boundary)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageOps

from banana_tests.editors import base
from banana_tests.editors.diffusers_editor import QWEN_IMAGE_EDIT, DiffusersEditor
from banana_tests.editors.offline_editors import EmulateEditor, EmulatorParams, JpegEditor, ReplicaEmulator
from banana_tests.editors.prompts import FRUITS, REPLICATE, VARIANTS, apply_transform, resolve
from tests.conftest import needs, noisy_image


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
    assert base.available() == ["diffusers", "emulate", "flux2-tiny-vae", "gemini", "jpeg", "toy"]
    assert isinstance(base.create("toy", base.EditorConfig()), ToyEditor)
    assert isinstance(base.create("jpeg", base.EditorConfig()), JpegEditor)
    known = r"known: diffusers, emulate, flux2-tiny-vae, gemini"
    with pytest.raises(base.EditorError, match=rf"unknown editor 'nope'; {known}"):
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
    emulate = base.create(
        "emulate", base.EditorConfig(options={"reframe.long_side": "64", "artifact": "tint"})
    )
    assert isinstance(emulate, EmulateEditor) and emulate.params.long_side == 64
    assert emulate.params.tint is not None and emulate.params.static is None
    with pytest.raises(base.EditorError, match=r"unknown artifact 'dust'; known: replicate, soften"):
        base.create("emulate", base.EditorConfig(options={"artifact": "dust"}))
    with pytest.raises(base.EditorError, match=r"static.amplitude=99.0 is outside \[0.0, 16.0\]"):
        base.create("emulate", base.EditorConfig(options={"static.amplitude": "99"}))


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
        "reconstruct-patches",
        "recolour",
    }
    patches = resolve("reconstruct-patches")
    asked = [patches.for_step(step) for step in range(1, 5)]
    assert asked[3] == asked[0] and len(set(asked)) == 3 and "patches" in asked[0] and "edges" in asked[1]
    assert not patches.for_iqa and not resolve("recolour").for_iqa and resolve("replicate").for_iqa
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


def test_embedded_recipe_records_the_calibrated_defaults() -> None:
    """`recipe.json` is what `fixtures refresh` builds from: it must hold the defaults documented."""
    from banana_tests.editors.embedded_sets import DEFAULT_DIR, RECIPE, load_recipe

    assert load_recipe(DEFAULT_DIR / RECIPE).params == EmulatorParams()


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


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Tiny random FLUX.1-Kontext and InstructPix2Pix pipelines saved as local model folders."""
    needs("diffusers")
    from tests import tiny_pipelines

    root = tmp_path_factory.mktemp("pipelines")
    return {
        "kontext": str(tiny_pipelines.flux_kontext(root / "kontext")),
        "pix2pix": str(tiny_pipelines.instruct_pix2pix(root / "pix2pix")),
    }


FAST = {"num_inference_steps": "2"}
KONTEXT_FAST = {**FAST, "max_area": str(48 * 32), "_auto_resize": "False"}
"""Kontext at the seed's own scale: its default resizes the input to ~1 megapixel first."""


def diffusers_editor(model: str, **options: str) -> DiffusersEditor:
    return DiffusersEditor(model, device="cpu", dtype="float32", options=options)


@pytest.mark.slow
def test_kontext_keeps_a_non_square_seeds_size(pipelines: dict[str, str]) -> None:
    editor = diffusers_editor(pipelines["kontext"], **KONTEXT_FAST)
    seed = scene(48, 32)
    out = editor.edit(request(seed, seed=1)).image
    assert out.size == (48, 32)  # without the input's size Kontext makes its default square
    assert editor.edit(request(out, step=2, seed=1)).image.size == (48, 32)


def test_a_local_snapshot_gets_its_pipeline_class_defaults(pipelines: dict[str, str]) -> None:
    editor = base.create(
        "diffusers",
        base.EditorConfig(model=pipelines["kontext"], device="cpu", options={"guidance_scale": "3"}),
    )
    assert isinstance(editor, DiffusersEditor)
    assert editor.settings() == {
        "model": pipelines["kontext"],
        "pipeline": "FluxKontextPipeline",
        "dtype": "bfloat16",
        "call": {"num_inference_steps": 28, "guidance_scale": 3.0},
    }
    assert diffusers_editor(pipelines["pix2pix"]).call_options == {}  # a class without a profile
    with pytest.raises(base.EditorError, match="dtype must be one of"):
        DiffusersEditor(pipelines["kontext"], dtype="float8")
    with pytest.raises(base.EditorError, match=r"cannot read model_index\.json of '/nope'"):
        DiffusersEditor("/nope")


def test_options_are_typed_by_the_pipelines_own_signature(pipelines: dict[str, str]) -> None:
    kontext = diffusers_editor(pipelines["kontext"], _auto_resize="False", negative_prompt=" ", max_area="9")
    assert kontext.call_options["_auto_resize"] is False
    assert kontext.call_options["negative_prompt"] == " " and kontext.call_options["max_area"] == 9
    assert diffusers_editor(pipelines["kontext"], true_cfg_scale="2").call_options["true_cfg_scale"] == 2.0
    with pytest.raises(base.EditorError, match=r"option guidance_scale='abc' is not a float"):
        diffusers_editor(pipelines["kontext"], guidance_scale="abc")
    with pytest.raises(base.EditorError, match=r"option _auto_resize='maybe' is not a bool"):
        diffusers_editor(pipelines["kontext"], _auto_resize="maybe")


def test_a_misspelt_option_is_refused_though_call_takes_kwargs(pipelines: dict[str, str]) -> None:
    """InstructPix2Pix's __call__ swallows unknown keys in **kwargs: 100 steps would run, not 2."""
    with pytest.raises(
        base.EditorError,
        match=r"StableDiffusionInstructPix2PixPipeline takes no option 'num_inference_step'"
        r" \(did you mean num_inference_steps\?\); its __call__ takes: .*guidance_scale",
    ):
        diffusers_editor(pipelines["pix2pix"], num_inference_step="2")
    with pytest.raises(base.EditorError, match="takes no option 'generator'"):
        diffusers_editor(pipelines["pix2pix"], generator="1")  # the editor sets it per edit


def test_without_a_seed_each_edit_draws_one_and_reports_it(pipelines: dict[str, str]) -> None:
    editor = diffusers_editor(pipelines["pix2pix"], **FAST)
    image = scene(32, 24)
    first, second = editor.edit(request(image)), editor.edit(request(image))
    assert isinstance(first.seed, int) and isinstance(second.seed, int) and first.seed != second.seed
    again = editor.edit(request(image, seed=first.seed))
    assert again.seed is None  # the request's own seed is recorded as it is
    assert again.image.tobytes() == first.image.tobytes()
    assert again.image.tobytes() != second.image.tobytes()


def test_loading_and_editing_print_no_deprecation_or_step_bars(
    pipelines: dict[str, str], capfd: pytest.CaptureFixture[str]
) -> None:
    import warnings

    editor = diffusers_editor(pipelines["pix2pix"], num_inference_steps="3")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        editor.edit(request(scene(32, 24), seed=0))
    assert [str(w.message) for w in caught if "torch_dtype" in str(w.message)] == []
    assert "3/3" not in capfd.readouterr().err  # no bar over the 3 denoising steps


def test_generate_records_the_seed_drawn_and_keeps_spaces_in_options(
    pipelines: dict[str, str], tmp_path: Path
) -> None:
    """The command line path: no --seed, `negative_prompt= ` (one space), a boolean option."""
    import json

    from banana_tests.cli import main

    scene(48, 32).save(tmp_path / "wide.png")
    fast = [f"--option={key}={value}" for key, value in KONTEXT_FAST.items()]
    argv = ["generate", "--editor", "diffusers", "--model", pipelines["kontext"], "--device", "cpu",
            "--dtype", "float32", "--seed-images", str(tmp_path / "wide.png"), "--out", str(tmp_path / "set"),
            "--runs", "1", "--steps", "2", "--option=negative_prompt= ", *fast]  # fmt: skip
    assert main(argv) == 0
    settings = json.loads((tmp_path / "set" / "generate.json").read_text())
    call = settings["editor_settings"]["call"]
    assert (call["negative_prompt"], call["_auto_resize"], settings["seed"]) == (" ", False, None)
    rows = [json.loads(line) for line in (tmp_path / "set" / "metadata.jsonl").read_text().splitlines()]
    assert [row["output_size"] for row in rows] == [[48, 32], [48, 32]]
    assert all(isinstance(row["seed"], int) for row in rows)  # the seeds really used, not null
    editor = diffusers_editor(pipelines["kontext"], negative_prompt=" ", **KONTEXT_FAST)
    redo = editor.edit(request(scene(48, 32), seed=rows[0]["seed"])).image
    assert redo.tobytes() == Image.open(tmp_path / "set" / rows[0]["file_name"]).convert("RGB").tobytes()


@pytest.mark.skipif(importlib.util.find_spec("diffusers") is not None, reason="diffusers is installed")
def test_diffusers_missing_says_how_to_install() -> None:
    needs("torch")  # the editor module imports it before it looks for diffusers
    with pytest.raises(base.EditorError, match=r"pip install 'banana-tests\[diffusers\]'"):
        DiffusersEditor(QWEN_IMAGE_EDIT)
