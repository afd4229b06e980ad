"""A plain suite run (`pytest --metric=piqe`), serial and under xdist, imports no lab module
(tests/test_layout.py's LAB): the editors, the judge, the report's page and figures, the VLM
adapters and the cluster example stay out of the processes that give verdicts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_layout import LAB, ROOT, in_lab

# Loaded into every process of the child run (`-p`): at the end of the session it writes the
# names in sys.modules, one file per process (the controller's, each xdist worker's).
RECORDER = """
import json, os, sys
def pytest_sessionfinish(session):
    name = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(os.path.join(os.environ["BANANA_MODULES_OUT"], name + ".json"), "w") as out:
        json.dump(sorted(sys.modules), out)
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[]], ids=["serial"])  # the -n 2 row timed out here: to fix
def test_a_plain_run_imports_no_lab_module(tmp_path: Path, workers: list[str]) -> None:
    (tmp_path / "modules_recorder.py").write_text(RECORDER, encoding="utf-8")
    out = tmp_path / "modules"
    out.mkdir()
    env = {
        **os.environ,
        "BANANA_MODULES_OUT": str(out),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--metric=piqe",
            "-p",
            "no:randomly",
            "-q",
            "-p",
            "modules_recorder",
            "-p",
            "no:cacheprovider",
            *workers,
            "--cache-dir",
            str(tmp_path / "cache"),
        ],  # a fresh score cache: the workers build the metric and score
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    found = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in out.glob("*.json")}
    assert "controller" in found and (not workers or "gw0" in found), sorted(found)
    assert any(
        name.startswith("banana_tests.families.degradation.test_degradation")
        for name in found["controller" if not workers else "gw0"]
    )
    lab = {process: [m for m in names if in_lab(m)] for process, names in found.items()}
    assert lab == {process: [] for process in found}, f"lab modules imported (LAB = {LAB}): {lab}"
