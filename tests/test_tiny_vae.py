"""The learned editor (issue 49): TAEF2 written from its description, its shipped weights checked,
its round trip reproducible, and the `flux2-tiny-vae` editor and `vae_roundtrip` family wired in."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from banana_tests.data import SEEDS
from PIL import Image

from banana_tests.cases import CaseKey
from banana_tests.cli import main
from banana_tests.editors import tiny_vae
from banana_tests.editors.artifacts import FAMILIES, stable_rng
from banana_tests.editors.base import EditorConfig, EditorError, EditRequest, create
from banana_tests.editors.offline_editors import EmulatorParams
from banana_tests.families.degradation.matrix_sections import artifact_lines, artifact_markdown
from banana_tests.trajectories.records import Artifact, parse_artifacts
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome

REFERENCE = Path(__file__).parent / "data" / "taef2_coffee_64x48.png"
"""The 8-bit round trip of a 64×48 crop of the shipped coffee seed, made on this project's
machines (x86_64, torch 2.14.1). Another CPU may round a few pixels the other way."""


def _crop() -> np.ndarray:
    with Image.open(SEEDS / "coffee.png") as image:
        return np.asarray(image.convert("RGB"), dtype=np.float64)[100:148, 150:214]


def _eight_bit(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def test_the_module_written_from_the_description_loads_the_shipped_weights_strictly() -> None:
    vae = tiny_vae.load()
    for module, file in ((vae.encoder, tiny_vae.ENCODER), (vae.decoder, tiny_vae.DECODER)):
        state = tiny_vae.checked_state(file)
        assert set(module.state_dict()) == set(state)  # strict: no key missing, none extra
        assert all(module.state_dict()[k].shape == v.shape for k, v in state.items())
        assert sum(p.numel() for p in module.parameters()) == pytest.approx(1.34e6, rel=0.01)
        assert not module.training
    latent = vae.encoder(torch.zeros(1, 3, 32, 48))
    assert tuple(latent.shape) == (1, 32, 4, 6)
    assert tuple(vae.decoder(latent).shape) == (1, 3, 32, 48)


def test_a_round_trip_reproduces_the_reference_and_is_the_same_at_one_and_two_threads() -> None:
    x = _crop()
    before = torch.get_num_threads()
    try:
        outputs = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            outputs.append(_eight_bit(tiny_vae.round_trip(x)))
            assert torch.get_num_threads() == threads  # the caller's setting is put back
    finally:
        torch.set_num_threads(before)
    assert outputs[0].tobytes() == outputs[1].tobytes()
    with Image.open(REFERENCE) as image:
        reference = np.asarray(image.convert("RGB"), dtype=np.int16)
    differ = np.abs(outputs[0].astype(np.int16) - reference)
    # the stated tolerance for another CPU: no pixel off by more than one level, under 1 % off at all
    assert differ.max() <= 1 and (differ > 0).mean() < 0.01
    psnr = 10 * np.log10(255.0**2 / np.mean((outputs[0] - x) ** 2))
    assert 25 < psnr < 40  # a real autoencoder's round trip: close, but not the input


def test_the_latent_noise_comes_from_the_given_generator() -> None:
    x = _crop()
    same = [_eight_bit(tiny_vae.round_trip(x, 0.5, stable_rng("t", 0))) for _ in range(2)]
    other = _eight_bit(tiny_vae.round_trip(x, 0.5, stable_rng("t", 1)))
    assert same[0].tobytes() == same[1].tobytes() != other.tobytes()
    with pytest.raises(ValueError, match="needs a random generator"):
        tiny_vae.round_trip(x, 0.5)


@pytest.mark.parametrize("spoil", ["truncated", "altered", "missing"])
def test_a_bad_weight_file_is_one_line_naming_the_file_and_its_sha256(spoil: str, tmp_path: Path) -> None:
    for file in (tiny_vae.ENCODER, tiny_vae.DECODER):
        shutil.copyfile(tiny_vae.weights_dir() / file.name, tmp_path / file.name)
    target = tmp_path / tiny_vae.DECODER.name
    data = target.read_bytes()
    if spoil == "truncated":
        target.write_bytes(data[: len(data) // 2])
    elif spoil == "altered":
        target.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    else:
        target.unlink()
    with pytest.raises(EditorError) as raised:
        tiny_vae.load(tmp_path)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"{target}: ") and f"expected sha256 {tiny_vae.DECODER.sha256}" in message


def test_the_shipped_weights_carry_their_licence() -> None:
    folder = tiny_vae.weights_dir()
    assert (
        "MIT License" in (folder / "LICENSE").read_text()
        and "Ollin Boer Bohan" in (folder / "LICENSE").read_text()
    )
    for file in (tiny_vae.ENCODER, tiny_vae.DECODER):
        assert hashlib.sha256((folder / file.name).read_bytes()).hexdigest() == file.sha256


def test_the_editor_is_the_family_behind_the_editor_protocol() -> None:
    editor = create("flux2-tiny-vae", EditorConfig(options={"strength": "0.5", "latent_noise": "0.2"}))
    family = FAMILIES["vae_roundtrip"]
    image = Image.fromarray(_eight_bit(_crop()))
    made = editor.edit(EditRequest(image, "copy it", step=3, run=1, key="coffee", seed=7)).image
    expected = family.apply(
        _crop(),
        stable_rng(7, "coffee", 1, 3, "vae_roundtrip"),
        3,
        family.params(strength=0.5, latent_noise=0.2),
    )
    assert made.tobytes() == _eight_bit(expected).tobytes()
    assert editor.settings()["weights"] == {f.name: f.sha256 for f in (tiny_vae.ENCODER, tiny_vae.DECODER)}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("strength=strong", "editor 'flux2-tiny-vae': option strength='strong' is not a float"),
        ("strength=1.5", "editor 'flux2-tiny-vae': vae_roundtrip.strength=1.5 is outside [0.0, 1.0]"),
        ("latent_noise=-1", "editor 'flux2-tiny-vae': vae_roundtrip.latent_noise=-1.0 is outside [0.0, 2.0]"),
        ("blend=0.5", "editor 'flux2-tiny-vae' has no option(s) blend (known: latent_noise, strength)"),
    ],
)
def test_a_bad_option_is_one_usage_error_before_any_edit(option: str, says: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "banana_tests.cli", "generate", "--editor=flux2-tiny-vae",
           f"--seed-images={SEEDS}", f"--out={out}", "--steps=2", "--option", option]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 1, run.stderr  # as every generate usage error
    assert run.stderr.strip().splitlines() == [f"banana-tests generate: error: {says}"]
    assert not out.exists()


def test_generate_makes_trajectories_with_the_learned_editor(tmp_path: Path) -> None:
    seeds, out = tmp_path / "seeds", tmp_path / "out"
    seeds.mkdir()
    Image.fromarray(_eight_bit(_crop())).save(seeds / "coffee.png")
    argv = ["generate", "--editor=flux2-tiny-vae", f"--seed-images={seeds}", f"--out={out}", "--steps=3",
            "--runs=1", "--option", "strength=0.5"]  # fmt: skip
    assert main(argv) == 0
    rows = [json.loads(line) for line in (out / "metadata.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3] and {r["editor"] for r in rows} == {"flux2-tiny-vae"}
    steps = [np.asarray(Image.open(out / r["file_name"]), dtype=np.float64) for r in rows]
    assert all(s.shape == (48, 64, 3) for s in steps)
    assert np.abs(steps[2] - steps[0]).mean() > 0  # it drifts, round after round


def test_the_family_is_an_artifact_and_gets_its_row_in_the_metric_by_artifact_table() -> None:
    assert "vae_roundtrip" in parse_artifacts("all")
    assert parse_artifacts("vae_roundtrip") == ("vae_roundtrip",)
    alone = EmulatorParams().only(Artifact.VAE_ROUNDTRIP)
    assert alone.vae_roundtrip is not None and alone.static is None and alone.soften is None
    matrix = Matrix.of(
        [
            Cell(CaseKey("piqe", "astronaut.vae_roundtrip", 5), Outcome.FAILED, 1.0),
            Cell(CaseKey("piqe", "astronaut.vae_roundtrip", 10), Outcome.PASSED, -1.0),
            Cell(CaseKey("piqe", "astronaut.static", 5), Outcome.PASSED, -1.0),
        ]
    )
    lines = artifact_lines(matrix)
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:]}
    assert rows == {"static": ["0/1"], "vae_roundtrip": ["1/2"]}  # the composite's order
    assert "| vae_roundtrip | 1/2 |" in artifact_markdown(matrix)


def _runs_of(tmp_path: Path, *options: str) -> list[bytes]:
    """Step 1 of two runs of the coffee crop made by `generate` with `options`."""
    seeds, out = tmp_path / "seeds", tmp_path / "out"
    seeds.mkdir()
    Image.fromarray(_eight_bit(_crop())).save(seeds / "coffee.png")
    argv = ["generate", "--editor=flux2-tiny-vae", f"--seed-images={seeds}", f"--out={out}", "--steps=1",
            "--runs=2", *(f"--option={o}" for o in options)]  # fmt: skip
    assert main(argv) == 0
    return [(out / f"images/coffee/run{r}/step001.png").read_bytes() for r in (0, 1)]


def test_replicate_runs_of_the_default_editor_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--runs 5` made five byte-identical copies (latent_noise 0 by default): the default draws
    latent noise per (seed image, run, step), so runs differ and no twin warning is needed."""
    runs = _runs_of(tmp_path)
    assert runs[0] != runs[1]
    assert "byte-identical" not in capsys.readouterr().out
    editor = create("flux2-tiny-vae", EditorConfig())
    image = Image.fromarray(_eight_bit(_crop()))
    again = [editor.edit(EditRequest(image, "copy it", step=1, run=r, key="coffee")).image for r in (0, 0)]
    assert again[0].tobytes() == again[1].tobytes()  # the same chain key draws the same noise


def test_runs_without_latent_noise_are_said_to_be_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = _runs_of(tmp_path, "latent_noise=0")
    assert runs[0] == runs[1]
    assert "'flux2-tiny-vae' is deterministic: its 2 runs will be byte-identical" in capsys.readouterr().out
