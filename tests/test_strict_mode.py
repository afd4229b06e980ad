"""Per-run Δs and --banana-strict-runs, end to end on fixed data: a metric that detects every step
passes every case, one that inverts every step fails every case, and one whose runs disagree in
sign is unresolved in strict mode: its own outcome in the terminal, the matrix and JUnit."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana_tests.reports.junit import read_junit
from tests.conftest import SUITE_MODULE, assert_outcomes, noisy_image, offline, parse_matrix

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

SEEDS, RUNS, STEPS = ("alpha", "beta"), (0, 1, 2), (1, 5, 10)

METRICS = """
import numpy as np


def roughness(img):
    '''Mean absolute difference of neighbouring pixels: grows with the set's noise.'''
    return float(np.mean(np.abs(np.diff(img.astype(np.float64), axis=1))))


class Detector:
    name = "detector"
    lower_better = True
    score_range = (0.0, 100.0)
    cost = "fast"

    def __call__(self, images):
        return [roughness(img) for img in images]


class Inverter(Detector):
    name = "inverter"
    lower_better = False


class Disagreeing(Detector):
    '''Sees the noise in run 0 and the opposite in the other runs (marked by the top-left pixel).'''

    name = "disagreeing"
    score_range = (-100.0, 100.0)

    def __call__(self, images):
        return [roughness(img) * (1 if img[0, 0, 0] == 0 else -1) for img in images]
"""


def write_marked_set(root: Path) -> None:
    """The test set's noisy gradients (noise grows with the step), the top-left pixel black in
    run 0 and white in the others."""
    lines = []
    for seed in SEEDS:
        for run in RUNS:
            for step in STEPS:
                pixels = np.asarray(noisy_image(seed, run, step)).copy()
                pixels[0, 0] = 0 if run == 0 else 255
                name = f"images/{seed}/run{run}/step{step:03d}.png"
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(pixels).save(root / name)
                sha = hashlib.sha256((root / name).read_bytes()).hexdigest()
                row = {
                    "file_name": name,
                    "seed_image": seed,
                    "variant": "replicate",
                    "run": run,
                    "step": step,
                }
                lines.append(json.dumps({**row, "sha256": sha}) + "\n")
    (root / "metadata.jsonl").write_text("".join(lines))


def run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, metric: str, *extra: str
) -> pytest.RunResult:
    write_marked_set(pytester.path / "data")
    pytester.makepyfile(test_suite=SUITE_MODULE, usermetrics=METRICS)
    offline(monkeypatch, pytester.path)
    return pytester.runpytest_subprocess(
        "--dataset=data",
        "--steps=5,10",
        f"--metric=usermetrics:{metric}",
        "--junitxml=j.xml",
        "-o",
        "junit_family=xunit1",
        "-p",
        "no:randomly",
        *extra,
    )


def report(pytester: pytest.Pytester) -> str:
    """`banana-tests report` on the run's JUnit file: its summary.md."""
    done = subprocess.run(
        [sys.executable, "-m", "banana_tests.cli", "report", "j.xml", "--out=out"],
        cwd=pytester.path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return (pytester.path / "out" / "summary.md").read_text(encoding="utf-8")


def properties(pytester: pytest.Pytester) -> list[dict[str, str]]:
    return [
        {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for case in ET.parse(pytester.path / "j.xml").iter("testcase")
    ]


def run_deltas(props: dict[str, str]) -> list[float]:
    """Each run's Δ from the record's per-run normalised scores."""
    pairs = zip(props["run_norm_references"].split(), props["run_norm_steps"].split(), strict=True)
    return [float(step) - float(reference) for reference, step in pairs]


@pytest.mark.parametrize("strict", [(), ("--banana-strict-runs",)], ids=["mean", "strict"])
def test_a_metric_that_detects_every_step_passes_every_case(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, strict: tuple[str, ...]
) -> None:
    result = run(pytester, monkeypatch, "Detector", *strict)

    assert_outcomes(result, passed=4)
    result.stdout.fnmatch_lines(["detector  AUC step 5 1.00, step 10 1.00; clean images * (spread *, n = 6)"])
    for props in properties(pytester):
        deltas = run_deltas(props)
        assert len(deltas) == 3 and max(deltas) < 0
        assert float(props["delta"]) == pytest.approx(sum(deltas) / 3, abs=1e-4)
        assert props.get("strict") == ("detected" if strict else None)


@pytest.mark.parametrize("strict", [(), ("--banana-strict-runs",)], ids=["mean", "strict"])
def test_a_metric_that_inverts_every_step_fails_every_case(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, strict: tuple[str, ...]
) -> None:
    result = run(pytester, monkeypatch, "Inverter", *strict)

    assert_outcomes(result, missed=4)
    result.stdout.fnmatch_lines(["inverter  AUC step 5 0.00, step 10 0.00; *"])
    assert "| inverter | 0.000 | 0.000 | 6 |" in report(pytester)
    for props in properties(pytester):
        assert min(run_deltas(props)) >= 0


def test_runs_that_disagree_in_sign_are_unresolved_in_strict_mode(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run(pytester, monkeypatch, "Disagreeing", "--banana-strict-runs")

    outcomes = result.parseoutcomes()
    assert outcomes.get("unresolved") == 4 and "passed" not in outcomes and "missed" not in outcomes
    assert result.ret == pytest.ExitCode.OK  # not a failure of the metric, and not a pass either
    matrix = parse_matrix(result.stdout.str())
    assert matrix[("alpha", "disagreeing")] == matrix[("beta", "disagreeing")] == "U2"
    result.stdout.fnmatch_lines(["*U<n> = unresolved cases*"])
    cases = ET.parse(pytester.path / "j.xml").findall(".//testcase")
    for case in cases:
        skipped = case.find("skipped")
        assert skipped is not None and skipped.get("message", "").startswith("unresolved: disagreeing on ")
    for props in properties(pytester):
        deltas = run_deltas(props)
        assert props["strict"] == "unresolved" and deltas[0] < 0 < min(deltas[1:])
    read = read_junit([pytester.path / "j.xml"])
    assert sorted(c.outcome for c in read.matrix.cells.values()) == ["unresolved"] * 4
    assert "| disagreeing | 4 | 0 | 0 | 0 |" in report(pytester)  # four cases, none failed or skipped
