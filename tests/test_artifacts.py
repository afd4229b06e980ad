"""The emulator's artifact families: each changes what it claims and nothing else, the composite
is their composition, and the per-artifact trial sets rebuild byte for byte as shipped."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from banana_tests.data import EMBEDDED, SEEDS
from PIL import Image
from scipy import ndimage

from banana_tests.cli import main
from banana_tests.editors.artifacts import FAMILIES, TRIALS, luma, ranges, stable_rng
from banana_tests.editors.embedded_sets import MANIFEST, RECIPE, build_images, load_recipe, shipped_seeds
from banana_tests.editors.offline_editors import EmulatorParams, ReplicaEmulator
from banana_tests.trajectories.records import ARTIFACTS, Artifact, parse_artifacts, split_trial, trial_id

RECIPE_PARAMS = load_recipe(EMBEDDED / RECIPE).params


def seed(name: str = "astronaut") -> np.ndarray:
    with Image.open(SEEDS / f"{name}.png") as image:
        return np.asarray(image.convert("RGB"), dtype=np.float64)


def rounds(family: str, x: np.ndarray, steps: int, **changes: float) -> np.ndarray:
    """`steps` rounds of one family alone (from step 2: no reframing), at the recipe's strength."""
    params = dataclasses.replace(getattr(RECIPE_PARAMS, family), **changes)
    for step in range(2, steps + 2):
        x = FAMILIES[family].apply(x, stable_rng("test", family, step), step, params)
    return x


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    return float(10 * np.log10(255.0**2 / np.mean((a - b) ** 2)))


def test_every_family_documents_its_parameters_and_refuses_values_outside_them() -> None:
    for name, family in FAMILIES.items():
        bounds = ranges(family.params)
        assert bounds, name
        assert family.paper and family.apply.__name__ == name
        default = family.params()
        for field, (lo, hi) in bounds.items():
            assert lo <= getattr(default, field) <= hi, (name, field)
            with pytest.raises(ValueError, match=rf"{name}\.{field}=.* is outside"):
                EmulatorParams(**{name: dataclasses.replace(default, **{field: hi + abs(hi) + 1})})


def test_tint_moves_colour_towards_green_and_keeps_luminance() -> None:
    x = seed("coffee")
    y = rounds("tint", x, 20)
    assert abs(float(luma(y).mean() - luma(x).mean())) < 1.0  # luma-neutral gains: light stays
    assert float(np.abs(luma(y) - luma(x)).mean()) < 1.5
    grey = np.full((8, 8, 3), 100.0)
    assert np.allclose(luma(rounds("tint", grey, 20)), 100.0, atol=0.1)  # grey: only second-order
    drift = (y - x).mean(axis=(0, 1))
    assert drift[1] > 1.5 and drift[0] < -1.5  # green up, red down: a tint of several levels


def test_static_keeps_the_mean_colour_and_adds_correlated_noise_of_its_amplitude() -> None:
    x = np.full((128, 160, 3), 128.0)
    y = rounds("static", x, 1, chroma=0.0)
    assert np.allclose(y.mean(axis=(0, 1)), 128.0, atol=1e-9)  # zero-mean by construction
    noise = y[..., 1] - 128.0
    assert noise.std() == pytest.approx(RECIPE_PARAMS.static.amplitude, rel=0.02)
    assert np.corrcoef(noise[:, :-1].ravel(), noise[:, 1:].ravel())[0, 1] > 0.3  # grain, not white
    piled = rounds("static", x, 16, chroma=0.0)[..., 1] - 128.0
    assert piled.std() > 3 * noise.std()  # it accumulates over rounds (about √n)
    natural = seed()
    assert np.abs(rounds("static", natural, 10).mean(axis=(0, 1)) - natural.mean(axis=(0, 1))).max() < 0.5


def test_scatter_touches_a_bounded_share_of_pixels() -> None:
    x = seed("chelsea")
    params = RECIPE_PARAMS.scatter
    y = rounds("scatter", x, 10)
    touched = float((np.abs(y - x).max(axis=2) > 0.5).mean())
    spot = np.pi * (3 * params.radius) ** 2  # pixels within 3 sigma of a point
    assert 0 < touched <= 10 * params.density * spot * 1.5
    assert float(np.abs(y - x).max()) > 0.5 * params.amplitude  # the points are plain to see


def band_energy(x: np.ndarray, block: int = 32) -> np.ndarray:
    """The fine band's RMS per block (the local energy), on luma."""
    g = luma(x)
    band = g - ndimage.gaussian_filter(g, 1.0)
    h, w = (s - s % block for s in band.shape)
    blocks = band[:h, :w].reshape(h // block, block, w // block, block)
    return np.sqrt((blocks**2).mean(axis=(1, 3)))


def spectrum(x: np.ndarray, bands: int = 6) -> np.ndarray:
    """Power of luma per octave of spatial frequency."""
    g = luma(x)
    power = np.abs(np.fft.fft2(g - g.mean())) ** 2
    fy, fx = np.meshgrid(np.fft.fftfreq(g.shape[0]), np.fft.fftfreq(g.shape[1]), indexing="ij")
    radius = np.hypot(fy, fx)
    edges = 0.5 / 2.0 ** np.arange(bands, -1, -1)
    return np.array([power[(radius >= lo) & (radius < hi)].sum() for lo, hi in itertools.pairwise(edges)])


def test_resynthesis_keeps_local_energy_and_spectrum_while_the_content_changes() -> None:
    x = seed("gravel")
    y = rounds("resynthesis", x, 10)
    ratio = band_energy(y) / band_energy(x)
    assert 0.8 < float(np.median(ratio)) < 1.2 and float(np.percentile(ratio, 90)) < 1.5
    assert np.allclose(spectrum(y), spectrum(x), rtol=0.25)
    assert psnr(x, y) < 30  # the texture is new: pixels moved well beyond rounding
    blurred = rounds("soften", x, 10)  # a blur would lose the energy instead
    assert float(np.median(band_energy(blurred) / band_energy(x))) < 0.7


def test_reframe_acts_at_step_one_only_and_each_family_off_is_the_identity() -> None:
    x = seed()
    reframe = FAMILIES["reframe"]
    assert reframe.apply(x, stable_rng(0), 2, RECIPE_PARAMS.reframe) is x
    first = reframe.apply(x, stable_rng(0), 1, RECIPE_PARAMS.reframe)
    assert max(first.shape[:2]) == RECIPE_PARAMS.reframe.long_side and first.shape[0] % 8 == 0
    quiet = EmulatorParams(soften=None, resynthesis=None, tint=None, static=None, scatter=None)
    image = Image.fromarray(x.astype(np.uint8))
    assert np.array_equal(np.asarray(ReplicaEmulator(quiet).edit(image, step=2, run=0, key="k")), x)


def test_the_composite_is_the_composition_of_the_families() -> None:
    image = Image.fromarray(seed("rocket").astype(np.uint8))
    emulator = ReplicaEmulator(RECIPE_PARAMS, seed=3)
    x, composed = image, np.asarray(image, dtype=np.float64)
    for step in (1, 2, 3):
        x = emulator.edit(x, step=step, run=1, key="rocket")
        for name, family in FAMILIES.items():
            params = getattr(RECIPE_PARAMS, name)
            if params is not None:  # a family the recipe has off
                composed = family.apply(composed, stable_rng(3, "rocket", 1, step, name), step, params)
        composed = np.clip(np.rint(composed), 0, 255)
        assert np.array_equal(np.asarray(x), composed.astype(np.uint8)), step


def test_one_artifact_alone_keeps_that_family_at_the_composite_strength() -> None:
    for name in TRIALS:
        alone = RECIPE_PARAMS.only(name)
        strength = getattr(RECIPE_PARAMS, name) or FAMILIES[name].params()  # its own defaults when off
        assert getattr(alone, name) == strength and alone.reframe == RECIPE_PARAMS.reframe
        assert [n for n in TRIALS if getattr(alone, n) is not None] == [name]
    assert RECIPE_PARAMS.only(Artifact.REPLICATE) == RECIPE_PARAMS
    tint = RECIPE_PARAMS.only(Artifact.TINT)
    assert EmulatorParams.from_json(tint.to_json()) == tint


def test_trial_ids_and_the_option_value() -> None:
    assert split_trial(trial_id("motorcycle_left", Artifact.STATIC)) == ("motorcycle_left", Artifact.STATIC)
    assert split_trial("astronaut") is None and split_trial("v1.2") is None
    assert parse_artifacts("all") == ARTIFACTS and parse_artifacts("tint, static,tint") == ("tint", "static")
    assert parse_artifacts("tint")[0] is Artifact.TINT  # typed from here on
    with pytest.raises(ValueError, match=r"--artifact=dust: 'dust' is not an artifact"):
        parse_artifacts("dust")


# The learned round trip runs TAEF2 on torch (over 2 min here) and the composite takes ~8 s: the slow tier.
HEAVY_SETS = (Artifact.VAE_ROUNDTRIP, Artifact.REPLICATE)


@pytest.mark.parametrize(
    "artifact", [pytest.param(a, marks=[pytest.mark.slow] if a in HEAVY_SETS else []) for a in ARTIFACTS]
)
def test_a_trial_set_rebuilds_byte_identical_to_the_shipped_sha256s(
    artifact: Artifact, tmp_path: Path
) -> None:
    """One seed image of each set, from the shipped seeds (the full sets are built on first use)."""
    recipe = dataclasses.replace(load_recipe(EMBEDDED / RECIPE), seed_images=("coffee",))
    rows = build_images(recipe, tmp_path, shipped_seeds(recipe), artifact)
    shipped = json.loads((EMBEDDED / MANIFEST).read_text())[artifact]
    assert len(rows) == len(recipe.runs) * len(recipe.stored_steps)
    assert {r["file_name"]: r["sha256"] for r in rows} == {
        k: v for k, v in shipped.items() if "/coffee/" in k
    }
    if artifact is Artifact.REPLICATE:  # the composite set is the embedded one
        embedded = [json.loads(line) for line in (EMBEDDED / "metadata.jsonl").read_text().splitlines()]
        assert {r["file_name"]: r["sha256"] for r in rows} == {
            r["file_name"]: r["sha256"] for r in embedded if r["seed_image"] == "coffee"
        }


@pytest.mark.slow
def test_the_artifact_option_runs_the_trial_sets_and_reports_misses_by_artifact(tmp_path: Path) -> None:
    """`--artifact=tint,scatter` builds those trial sets once into the image cache, runs their
    cases (seed images `<seed>.<artifact>`) and prints the metric × artifact table; `banana-tests
    report` puts it in summary.md, report.html and a figure."""
    xml, images = tmp_path / "junit.xml", tmp_path / "images"
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "banana_tests.families.degradation.test_degradation",
           "-p", "no:cacheprovider", "--banana-artifact=tint,scatter", "--metric=piqe",
           f"--dataset-cache={images}", "--no-cache",
           f"--junitxml={xml}", "-q"]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert "astronaut.tint " in out and "astronaut.scatter " in out  # the matrix's rows
    table = out[out.index("banana-tests misses by artifact") :].splitlines()
    rows = {line.split()[0]: line.split(maxsplit=1)[1] for line in table[3:5]}
    assert list(rows) == ["tint", "scatter"], table
    # the oracle reads grey levels, and the tint keeps them: its cases are not valid trials
    assert rows["tint"] == "I24" and rows["scatter"].endswith("/24"), table
    built = sorted(p.name for p in (images / "trials").iterdir() if not p.name.startswith("."))
    assert len(built) == 1 and built[0].startswith("tint+scatter-")
    report = tmp_path / "report"
    assert main(["report", str(xml), f"--out={report}", "--allow-incomplete"]) == 0  # one module: partial
    summary = (report / "summary.md").read_text()
    assert "### Misses by artifact" in summary and f"| tint | {rows['tint']} |" in summary
    assert (
        "Misses by artifact" in (report / "report.html").read_text() and (report / "artifacts.png").is_file()
    )
