"""The degradation oracle end to end: a trajectory whose steps equal its reference step is "not a
valid trial" (its own outcome, with the PSNR), while a degraded one is judged as usual and records
its PSNR and SSIM beside the Δ."""

from __future__ import annotations

import hashlib
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from banana_tests.reports.junit import read_junit
from banana_tests.scoring.oracle import UNCHANGED_PSNR, change
from tests.conftest import SUITE_MODULE, noisy_image, offline, parse_matrix
from tests.test_strict_mode import METRICS

STEPS = (1, 5, 10)


def write_set(root: Path) -> None:
    """`frozen`: every step a copy of step 1's pixels (in its own file); `noisy`: noise grows."""
    lines = []
    for seed in ("frozen", "noisy"):
        for step in STEPS:
            image = noisy_image(seed, 0, 1 if seed == "frozen" else step)
            name = f"images/{seed}/run0/step{step:03d}.png"
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            image.save(root / name)
            sha = hashlib.sha256((root / name).read_bytes()).hexdigest()
            row = {"file_name": name, "seed_image": seed, "variant": "replicate", "run": 0, "step": step}
            lines.append(json.dumps({**row, "sha256": sha}) + "\n")
    (root / "metadata.jsonl").write_text("".join(lines))


@pytest.mark.slow
def test_steps_equal_to_the_reference_are_not_a_valid_trial(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_set(pytester.path / "data")
    pytester.makepyfile(test_suite=SUITE_MODULE, usermetrics=METRICS)
    offline(monkeypatch, pytester.path)

    result = pytester.runpytest_subprocess(
        "--dataset=data",
        "--steps=5,10",
        "--metric=usermetrics:Inverter",
        "--junitxml=j.xml",
        "-p",
        "no:randomly",
    )

    outcomes = result.parseoutcomes()
    assert (outcomes.get("invalid"), outcomes.get("missed")) == (2, 2), outcomes  # noisy: inverted
    matrix = parse_matrix(result.stdout.str())
    assert (matrix[("frozen", "inverter")], matrix[("noisy", "inverter")]) == ("I2", "2/2")
    cases = {c.get("name", ""): c for c in ET.parse(pytester.path / "j.xml").iter("testcase")}
    for step in (5, 10):
        frozen = cases[f"test_detects_degradation[inverter-frozen-step{step}]"]
        skipped = frozen.find("skipped")
        assert skipped is not None
        assert skipped.get("message", "").startswith(f"not a valid trial: frozen at step {step} did not")
        props = {p.get("name"): p.get("value") for p in frozen.iter("property")}
        assert (props["psnr"], props["ssim"], props["delta"]) == ("inf", "1", "0.0")
        noisy = {
            p.get("name"): p.get("value")
            for p in cases[f"test_detects_degradation[inverter-noisy-step{step}]"].iter("property")
        }
        assert float(noisy["psnr"]) < UNCHANGED_PSNR and float(noisy["ssim"]) < 1
    read = read_junit([pytester.path / "j.xml"])
    assert sorted(c.outcome for c in read.matrix.cells.values()) == ["failed", "failed", "invalid", "invalid"]


def test_one_grey_level_rms_is_the_edge_of_a_valid_trial() -> None:
    reference = np.full((32, 32, 3), 100, np.uint8)
    assert not change(reference, reference).valid_trial and math.isinf(change(reference, reference).psnr)
    assert not change(reference, reference + 1).valid_trial  # exactly one grey level RMS
    changed = reference.copy()
    changed[:, :16] += 2  # RMS √2 grey levels
    assert change(reference, changed).valid_trial
