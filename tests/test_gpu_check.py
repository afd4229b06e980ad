"""benchmarks/gpu_check.sh on a machine without CUDA: its CPU fallback, run as a user would.

No GPU is available here, and the script is meant to run unchanged where one is, so its one
branch that can run here is tested: with CUDA hidden (CUDA_VISIBLE_DEVICES empty, so the result is
the same on a GPU machine), a plain call falls back to the tiny CPU run and still prints the three
parts a GPU run prints: the measured cost table, the CPU table beside it, and the suite's result.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT, junit_cases

pytestmark = pytest.mark.slow  # a benchmark process and a suite run: the slow tier

SCRIPT = PROJECT / "benchmarks" / "gpu_check.sh"
CPU_TABLE = PROJECT / "benchmarks" / "bench_metrics_cpu.md"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TORCH_HOME": str(tmp_path / "torch"),
        "PYTHON": sys.executable,
        "CUDA_VISIBLE_DEVICES": "",  # torch.cuda.is_available() is False, GPU or not
        "GPU_CHECK_REPORTS": str(tmp_path / "reports"),
    }
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.skipif(
    not os.environ.get("BANANA_PAPER_METRICS"),
    reason="a benchmark process and a suite run (~1 min of CPU): run by the README's second test command",
)
def test_without_cuda_it_falls_back_to_a_tiny_cpu_run(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "gpu_check: no CUDA here: a dry run on CPU instead" in done.stderr
    out = done.stdout
    # 1. the cost table measured now, on CPU, with real parameters (PIQE needs none)
    measured = out.split("== cost on cpu (real parameters) ==", 1)[1].split("== cost on the project's", 1)[0]
    assert "| build s | s/img 64×64 | s/img 128×96 | CPU s/img 128×96 | peak RSS MiB |" in measured
    assert re.search(r"^\| piqe \| real \|( [\d.]+ \|){4} \d+ \|", measured, re.M), measured
    # 2. the project's CPU table, as committed
    assert CPU_TABLE.read_text(encoding="utf-8").strip() in out
    # 3. the suite on the embedded set's two seed images, steps 5/10/20 against 1, its JUnit kept
    outcomes = r"\b6 (passed|failed|missed)\b|\d+ passed, \d+ failed|\d+ failed, \d+ passed"
    assert re.search(outcomes, out), out[-2000:]
    cases = junit_cases(tmp_path / "reports" / "gpu_check-cpu.xml")
    assert len(cases) == 6 and all("piqe" in name for name in cases), sorted(cases)
    # 4. the VLM adapters' plumbing on tiny random models (the GPU run scores the real ones)
    vlm = out.split("== the VLM metrics on cpu ==", 1)[1]
    assert re.search(r"^\d+ passed(, \d+ (skipped|warnings?))* in ", vlm, re.M), vlm[-2000:]
    assert out.rstrip().endswith("gpu_check: done (cpu)")


def test_an_unknown_option_is_a_usage_error(tmp_path: Path) -> None:
    done = _run(tmp_path, "--datset=x")
    assert done.returncode == 2 and "usage:" in done.stderr and "== cost" not in done.stdout
