"""What banana-tests costs another project's run: the same run with the plugin and with `-p no:banana_tests`.

A foreign project (issue 24): a conftest with its own `--device`, `--dataset`, `--steps`,
`--metric`, ... and one test file of 5,940 passing cases that record JUnit properties named
`metric`, `seed_image`, `step`, `delta`, ..., as the suite's cases do, run with `--junitxml`.
Before issue 24 the plugin took those cases for its own: 292 s and 11.6 GB against 9.3 s and
137 MB without it. Each row alternates the two runs in fresh processes (bytecode caches kept in a
temporary PYTHONPYCACHEPREFIX and warmed first) and prints the medians and the ratios, wall, CPU
and peak RSS; the floor for a guest is 1.10 (issue 24: within 10 %).

    python benchmarks/bench_guest.py [--cases 5940] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOOR = 1.10
CONFTEST = """
def pytest_addoption(parser):
    for name in ("device", "dataset", "steps", "runs", "baseline", "cache-dir", "where", "variant", "metric"):
        parser.addoption(f"--{name}", default=None)
"""
TESTS = """
import pytest

SEEDS = [f"seed{{i:02d}}" for i in range(12)]


@pytest.mark.parametrize("run", range(5))
@pytest.mark.parametrize("step", range(2, {steps}))
@pytest.mark.parametrize("seed_image", SEEDS)
def test_pass(record_property, seed_image, step, run):
    for name, value in (
        ("metric", "brisque"), ("seed_image", seed_image), ("step", step), ("run", run),
        ("reference_step", 1), ("delta", -1.5), ("score_reference", 20.0), ("score_step", 30.0),
    ):
        record_property(name, value)
"""
RUN = ("-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:xdist", "-q", "--junitxml=j.xml")


def measure(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of one command in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} failed: {err.decode()[-2000:]}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5940, help="cases in the file, a multiple of 60")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind; medians shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "conftest.py").write_text(CONFTEST)
        (project / "test_foreign.py").write_text(TESTS.format(steps=2 + args.cases // 60))
        (project / "pytest.ini").write_text("[pytest]\njunit_family = xunit1\n")
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(project / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        kinds = {"with banana-tests": (), "-p no:banana_tests": ("-p", "no:banana_tests")}
        base = [sys.executable, "-m", "pytest", *RUN, "--device=cpu", "--metric=mine"]
        for extra in kinds.values():  # warm the bytecode caches
            measure([*base, *extra, "--collect-only"], project, env)
        rows: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
        for _ in range(args.repeat):
            for kind, extra in kinds.items():
                rows[kind].append(measure([*base, *extra], project, env))
        print(f"{args.cases} passing cases recording metric/seed_image/step properties, --junitxml")
        print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.repeat}")
        medians = {k: [statistics.median(v[i] for v in runs) for i in range(3)] for k, runs in rows.items()}
        for kind, (wall, cpu, rss) in medians.items():
            print(f"  {kind:20s} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak {rss:7.1f} MiB")
        guest, floor = medians["with banana-tests"], medians["-p no:banana_tests"]
        ratios = [g / f for g, f in zip(guest, floor, strict=True)]
        print(
            "  ratio                "
            + "  ".join(f"{n} {r:.3f}" for n, r in zip(("wall", "CPU", "peak"), ratios, strict=True))
        )
        within = all(r <= FLOOR for r in ratios)
        print(f"  {'within' if within else 'OVER'} the {FLOOR:.2f} floor")
        return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
