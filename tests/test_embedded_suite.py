"""The suite on the embedded data with real metrics, checked against pyiqa called directly.

This is the README's suite command under `-n 2`; the JUnit XML alone must rebuild the matrix,
and every Δ in it must follow from pyiqa's own scores and the documented normalisation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from banana_tests.trajectories import EMBEDDED, read_imagefolder

METRICS = {"brisque": (0.0, 150.0), "niqe": (0.0, 100.0), "piqe": (0.0, 100.0)}  # Table 2, lower is better
PROPERTIES = {
    "metric",
    "seed_image",
    "step",
    "reference_step",
    "delta",
    "score_reference",
    "score_step",
    "runs",
}
MIRROR = os.environ.get("BANANA_WEIGHTS_DIR", "")


@pytest.fixture(scope="module")
def junit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    if (
        not Path(MIRROR, "brisque_svm_weights.pth").is_file()
        or not Path(MIRROR, "niqe_modelparameters.mat").is_file()
    ):
        pytest.skip(
            "set BANANA_WEIGHTS_DIR to a folder with brisque and niqe parameters (../shared/pyiqa-weights)"
        )
    out = tmp_path_factory.mktemp("embedded")
    xml = out / "junit.xml"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(out / "torch")}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
        "--metric=" + ",".join(METRICS),
        f"--junitxml={xml}",
        "--rootdir",
        str(EMBEDDED.parents[1]),
        str(EMBEDDED.parents[1] / "banana_tests" / "test_degradation.py"),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    assert "banana-tests failure matrix" in run.stdout
    return {
        tc.get("name"): {p.get("name"): p.get("value") for p in tc.iter("property")}
        for tc in ET.parse(xml).iter("testcase")
    }


def test_every_metric_covers_8_seed_images_by_3_steps(junit: dict[str, dict[str, str]]) -> None:
    for metric in METRICS:
        props = [p for p in junit.values() if p.get("metric") == metric]
        assert len({p["seed_image"] for p in props}) >= 8
        assert {p["step"] for p in props} == {"5", "10", "20"}
        assert len(props) == len({p["seed_image"] for p in props}) * 3


def test_every_case_carries_every_property(junit: dict[str, dict[str, str]]) -> None:
    for name, props in junit.items():
        assert set(props) >= PROPERTIES, (name, sorted(PROPERTIES - set(props)))


def test_every_delta_follows_from_pyiqa_scores(junit: dict[str, dict[str, str]]) -> None:
    """Recompute each Δ with pyiqa on the image files (str paths, one at a time): 0.01 units, same sign."""
    pyiqa = pytest.importorskip("pyiqa")
    records = read_imagefolder(EMBEDDED).records
    paths: dict[tuple[str, int], list[str]] = {}
    for r in records:
        paths.setdefault((r.seed_image, r.step), []).append(str(r.path))
    for metric, (lo, hi) in METRICS.items():
        model = pyiqa.create_metric(metric, device="cpu")
        score = {f: float(model(f)) for files in paths.values() for f in files}
        for name, props in junit.items():
            if props["metric"] != metric:
                continue
            ref = mean(score, paths[(props["seed_image"], 1)])
            cur = mean(score, paths[(props["seed_image"], int(props["step"]))])
            delta = 100 * (hi - cur) / (hi - lo) - 100 * (hi - ref) / (hi - lo)
            assert float(props["delta"]) == pytest.approx(delta, abs=0.01), name
            assert (float(props["delta"]) < 0) == (delta < 0), name


def mean(score: dict[str, float], files: list[str]) -> float:
    return sum(score[f] for f in files) / len(files)
