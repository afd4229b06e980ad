"""The same Δ whatever the parallelism: the README's suite run with BRISQUE, serial and under
`-n 2`, writes the same JUnit properties to every digit.

Before the thread policy (banana_tests.scoring.process_tuning.SCORE_THREADS), a serial run
scored on two torch threads and each of two workers on one, and every BRISQUE Δ differed by up
to 0.0028. The runs are real: the embedded data, pyiqa's BRISQUE, a cold score cache each.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from banana_tests.data import EMBEDDED

from tests.conftest import Cases, junit_cases
from tests.doc_blocks import suite_command
from tests.test_embedded_suite import required_mirror

pytestmark = pytest.mark.slow  # the suite with real metrics in a child pytest: the slow tier

STEPS = "--steps=5,10"


def readme_run(folder: Path, workers: int, mirror: Path) -> Cases:
    """The README's suite command with BRISQUE alone, `-n workers`, cold; its JUnit cases.
    OMP_NUM_THREADS is left unset (tests/conftest.py sets it), so the suite's own policy decides."""
    xml = folder / "junit.xml"
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    env |= {"HF_HUB_OFFLINE": "1", "TORCH_HOME": str(folder / "torch"), "BANANA_WEIGHTS_DIR": str(mirror)}
    documented = suite_command()  # later options win over the README's
    cmd = [sys.executable, "-m", "pytest", *documented[1:], "-p", "no:cacheprovider", "-n", str(workers)]
    cmd += ["--metric=brisque", STEPS, f"--cache-dir={folder / 'cache'}", f"--junitxml={xml}"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=EMBEDDED.parents[1])
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]  # 1: BRISQUE misses cells
    return junit_cases(xml)


def test_serial_and_two_workers_write_the_same_scores_and_deltas(tmp_path: Path) -> None:
    mirror = required_mirror()
    serial = readme_run(tmp_path / "serial", 0, mirror)
    parallel = readme_run(tmp_path / "n2", 2, mirror)

    deltas = {name: props["delta"] for name, (_, props) in serial.items() if "delta" in props}
    assert len(deltas) == 16, sorted(serial)  # 8 seed images × steps 5 and 10
    assert sorted(parallel) == sorted(serial)
    differing = [
        what_differs(name, serial[name], parallel[name]) for name in serial if serial[name] != parallel[name]
    ]
    assert not differing, "\n".join(differing)  # outcome and every property: delta, raw and normalised scores


def what_differs(name: str, serial: tuple[str, dict[str, str]], parallel: tuple[str, dict[str, str]]) -> str:
    """One line a case: the outcomes and each property whose values differ, serial → -n 2."""
    parts = [f"outcome {serial[0]} → {parallel[0]}"] if serial[0] != parallel[0] else []
    for prop in sorted(serial[1].keys() | parallel[1].keys()):
        before, after = serial[1].get(prop), parallel[1].get(prop)
        if before != after:
            parts.append(f"{prop} {before} → {after}")
    return f"{name}: " + "; ".join(parts)
