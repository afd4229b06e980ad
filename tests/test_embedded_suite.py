"""The suite on the embedded data with real metrics, checked against pyiqa called directly.

This is the README's suite command under `-n 2` (every family: Δ cases, score snapshots and
control degradations); the JUnit XML alone must rebuild the matrix, and every Δ in it must follow
from pyiqa's own scores and the documented normalisation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from banana_tests.data import EMBEDDED

from banana_tests.trajectories import read_imagefolder
from tests.conftest import CASE_PROPERTIES

METRICS = {"brisque": (0.0, 150.0), "niqe": (0.0, 100.0), "piqe": (0.0, 100.0)}  # Table 2, lower is better
MIRROR = os.environ.get("BANANA_WEIGHTS_DIR", "")


Cases = dict[str, tuple[str, dict[str, str]]]


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> Cases:
    """Every case of the suite run by name: (outcome, JUnit properties)."""
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
        f"--cache-dir={out / 'cache'}",
    ]
    cmd += ["--metric=" + ",".join(METRICS), f"--junitxml={xml}"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=EMBEDDED.parents[1])
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    assert "banana-tests failure matrix" in run.stdout
    cases = {}
    for tc in ET.parse(xml).iter("testcase"):
        kids = {c.tag for c in tc}
        outcome = next((o for o in ("failure", "error", "skipped") if o in kids), "passed")
        cases[tc.get("name")] = (outcome, {p.get("name"): p.get("value") for p in tc.iter("property")})
    return cases


@pytest.fixture(scope="module")
def junit(suite_run: Cases) -> dict[str, dict[str, str]]:
    """The Δ cases' properties by name."""
    return {k: props for k, (_, props) in suite_run.items() if k.startswith("test_detects_degradation[")}


def test_every_metric_covers_8_seed_images_by_3_steps(junit: dict[str, dict[str, str]]) -> None:
    for metric in METRICS:
        props = [p for p in junit.values() if p.get("metric") == metric]
        assert len({p["seed_image"] for p in props}) >= 8
        assert {p["step"] for p in props} == {"5", "10", "20"}
        assert len(props) == len({p["seed_image"] for p in props}) * 3


def test_scores_match_the_committed_snapshots(suite_run: Cases) -> None:
    """pyiqa and our plumbing still give the recorded raw scores (rtol 1e-3) on this machine."""
    outcomes = {k: o for k, (o, _) in suite_run.items() if k.startswith("test_scores_match_snapshot[")}
    assert outcomes == {f"test_scores_match_snapshot[{m}]": "passed" for m in METRICS}


def test_control_degradations_give_a_verdict_for_every_metric(suite_run: Cases) -> None:
    """The control family runs for the offline metrics; which pass is the finding (README)."""
    outcomes = {k: o for k, (o, _) in suite_run.items() if k.startswith("test_detects_control_degradation[")}
    expected = {
        f"test_detects_control_degradation[{m}-{d}]"
        for m in METRICS
        for d in ("gaussian_noise", "gaussian_blur", "jpeg")
    }
    assert set(outcomes) == expected
    assert set(outcomes.values()) <= {"passed", "failure"}, outcomes
    print("control degradations:", outcomes)


def test_every_case_carries_every_property(junit: dict[str, dict[str, str]]) -> None:
    for name, props in junit.items():
        assert set(props) >= CASE_PROPERTIES, (name, sorted(CASE_PROPERTIES - set(props)))


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
