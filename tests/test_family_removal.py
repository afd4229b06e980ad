"""A family is one folder and one registry line: deleting both, from a copy of the repository,
leaves the embedded suite running with verdicts and no errors, without that family's tests, its
terminal section or its report section, and a baseline that lists its cases still loads.

The copy is imported ahead of the installed package (PYTHONPATH), as a clone would be; the metric
is a numpy one (metrics_under_test.examples), so the runs take seconds of scoring.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test copies the repository and runs the suite in a child

ROOT = Path(__file__).resolve().parents[1]
METRIC = "metrics_under_test.examples:laplacian_variance"
REMOVED = {  # the family → its test's name, its terminal section, its summary.md heading, its option
    "control": ("test_detects_control_degradation", None, "## Control degradations", None),
    "invariance": ("test_score_is_invariant", None, "## Invariance", None),
    "search": ("test_no_worst_escape", "banana-tests worst escape", "## Worst escape", "--search=5"),
    "snapshot": ("test_scores_match_snapshot", "score snapshot(s) not recorded yet,", None, None),
    "trend": ("test_trend_detects_degradation", "banana-tests trends", None, "--trend"),
}


def copy_without(family: str, into: Path) -> Path:
    """The package, the metrics and the data copied, the family's folder deleted and its line
    taken out of the registry; `banana_tests.data` is the copy's fixtures/, as the wheel maps it."""
    copy = into / "repo"
    for name in ("banana_tests", "metrics_under_test", "fixtures"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "banana_tests" / "data").symlink_to(copy / "fixtures", target_is_directory=True)
    shutil.rmtree(copy / "banana_tests" / "families" / family)
    family_list = copy / "banana_tests" / "families" / "family_list.py"
    line = f'    "banana_tests.families.{family}",\n'
    text = family_list.read_text(encoding="utf-8")
    assert text.count(line) == 1, text
    family_list.write_text(text.replace(line, ""), encoding="utf-8")
    return copy


def child(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTEST_XDIST_WORKER", None)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=copy, timeout=900
    )


@pytest.mark.parametrize("family", sorted(REMOVED))
def test_the_suite_runs_without_a_family(family: str, tmp_path: Path) -> None:
    copy = copy_without(family, tmp_path)
    where = child(copy, "-c", "import banana_tests.plugin as p; print(p.__file__)")
    assert where.stdout.strip().startswith(str(copy)), where.stdout + where.stderr
    baseline = (
        tmp_path / "baseline.json"
    )  # one entry of each family's kind: a removed one skipped, not refused
    metric = "laplacian_variance"
    failures: list[dict[str, str]] = [{"kind": "trend", "metric": metric, "seed_image": "astronaut"}]
    failures += [
        {"kind": "search", "metric": metric},
        {"kind": "control", "metric": metric, "distortion": "jpeg"},
    ]
    failures.append({"kind": "invariance", "metric": metric, "check": "shift"})
    baseline.write_text(json.dumps({"format": "banana-tests-baseline/2", "failures": failures}))
    xml = tmp_path / "junit.xml"
    others = [f for f in REMOVED if f != family]
    options = [option for f in others if (option := REMOVED[f][3])]  # a removed family's option is gone
    run = child(
        copy,
        *("-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", f"--metric={METRIC}", *options),
        *(f"--junitxml={xml}", f"--cache-dir={tmp_path / 'cache'}", f"--baseline={baseline}"),
    )
    assert run.returncode in (0, 1), run.stdout[-4000:] + run.stderr[-2000:]  # 1: a metric's misses
    cases = list(ET.parse(xml).iter("testcase"))
    names = [case.get("name", "") for case in cases]
    test_name, terminal, heading, _ = REMOVED[family]
    assert not [name for name in names if name.startswith(test_name)]
    assert not [case for case in cases if case.find("error") is not None]
    verdicts = [case for case in cases if case.find("skipped") is None]
    assert any(name.startswith("test_detects_degradation[") for name in names) and verdicts
    assert (
        terminal is None or f" {terminal} " not in run.stdout
    ) and "banana-tests failure matrix" in run.stdout
    for other in others:  # the families still there show their cases
        assert any(name.startswith(REMOVED[other][0]) for name in names), other
    out = tmp_path / "report"
    report = child(copy, "-m", "banana_tests.cli", "report", str(xml), f"--out={out}")
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-2000:]
    summary = (out / "summary.md").read_text(encoding="utf-8")
    page = (out / "report.html").read_text(encoding="utf-8")
    for other in others:
        shown = REMOVED[other][2]
        assert shown is None or shown in summary, other
    assert heading is None or heading not in summary
    assert (out / "controls.csv").exists() == (family != "control")
    assert ("<h2>Control degradations</h2>" in page) == (family != "control")
    assert ("<h2>Invariance</h2>" in page) == (family != "invariance")
    assert ("<h2>Worst escape</h2>" in page) == (family != "search")
    assert bool(list(out.glob("trend_*.png"))) == (family != "trend")
    assert ("<h2>Trends</h2>" in page) == (family != "trend")
