"""The suite's per-case overhead at full-protocol scale, against plain pytest's floor.

Builds 12 seed images × 5 runs × 100 steps (64 px, bench_memory's generator), then times in
fresh processes, each with its peak RSS: a bare loop doing the suite's work without pytest;
5,940 trivial plain-pytest cases with 2 properties and --junitxml, passing and failing
(--tb=line); the suite on the same 5,940 cases (`--steps=all --aggregate=per-run --no-cache
-k test_detects_degradation`), passing and failing with the same numpy work (laplacian_variance,
read as lower-is-better it detects every step, as shipped higher-is-better it misses every step),
and passing with noise_sigma (torch), for what a torch metric adds; and `banana-tests report` on
the failing run's JUnit (5,940 cases) and on 26 copies of it under other metric names, as 26
shard files (154,440 cases of the suite's exact shape, past the paper protocol's ~150,000).

The ratios compare the suite with the plain floor on the same numpy work: a torch metric adds
its import and model (seconds, once per process) that the floor never pays, which says nothing
about the suite's per-case overhead. Child processes keep bytecode caches (in a temporary
PYTHONPYCACHEPREFIX, even when PYTHONDONTWRITEBYTECODE is set, as on this project's machine) and
a --collect-only run of each first warms them: without them every run re-compiles and re-rewrites
(pytest's assertion rewriting) every plugin module, which no user's second run does.

    python benchmarks/bench_scale.py [--keep DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from bench_memory import generate

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "banana_tests" / "families" / "degradation" / "test_degradation.py"
SUITE_ARGS = ("--steps=all", "--aggregate=per-run", "--no-cache", "-k", "test_detects_degradation")
COMMON = ("-p", "no:cacheprovider", "-p", "no:xdist", "-q")
CASES = 12 * 5 * 99
SHARDS = 26  # metric names in the big report: 26 × 5,940 = 154,440 cases, past the protocol's 150,000
PLAIN_MODULE = """
import os
import pytest


@pytest.fixture
def case(request, record_property):
    record_property("metric", "m")
    record_property("delta", str(request.param))
    return request.param


@pytest.mark.parametrize("case", range({cases}), indirect=True)
def test_case(case):
    assert os.environ.get("PLAIN_FAIL") != "1", f"case {{case}} failed"
"""


def plain_module(cases: int) -> str:
    """Plain pytest's floor: `cases` trivial cases with two properties each."""
    return PLAIN_MODULE.format(cases=cases)


PLAIN = plain_module(CASES)
SHARPNESS_LOWER = """
from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric


@metric("sharpness_lower", lower_better=True, score_range=(0.0, 2000.0), cost="fast")
def sharpness_lower(images):
    return laplacian_variance(images)
"""
BARE = """
import json, sys
from pathlib import Path
import numpy as np
from PIL import Image
from metrics_under_test.registry import resolve
from banana_tests.scoring.metric_calls import load_metric
root = Path(sys.argv[1])
spec = resolve("laplacian_variance")[0]
metric = load_metric(spec, "cpu")
rows = [json.loads(line) for line in (root / "metadata.jsonl").read_text().splitlines()]
score = {}
for i in range(0, len(rows), 16):
    batch = rows[i : i + 16]
    images = [np.asarray(Image.open(root / r["file_name"]).convert("RGB")) for r in batch]
    for r, s in zip(batch, metric(images)):
        score[(r["seed_image"], r["run"], r["step"])] = spec.scale.normalise(s)
failed = sum(score[(s, r, t)] - score[(s, r, 1)] >= 0 for (s, r, t) in score if t != 1)
print(failed, "of", len(score) - 60, "failed")
"""


# Forks and execs the measured command, then reports its rusage on the fd it is given. Linux
# folds the exec-ing process's own peak into the new program's ru_maxrss, and subprocess execs
# from a vfork of this (large) process: measured directly, every command showed at least this
# script's own peak (262 MiB for everything, plain pytest included).
LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - start
os.write(int(sys.argv[1]), f"{seconds} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}".encode())
sys.exit(os.waitstatus_to_exitcode(status))
"""


def measure(
    argv: list[str], cwd: Path, env: dict[str, str], accept: tuple[int, ...] = (0, 1)
) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one command in a fresh process; its output
    is discarded, an exit status outside `accept` is an error (pytest: 1 = failures, which half of
    the rows expect). CPU time is shown too: on a shared machine the wall time says more about the
    neighbours than about the suite."""
    read, write = os.pipe()
    launcher = [sys.executable, "-c", LAUNCHER, str(write), *argv]
    proc = subprocess.Popen(
        launcher, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(write,)
    )
    os.close(write)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.wait()
    with os.fdopen(read, "rb") as report:
        seconds, cpu, peak_kib = map(float, report.read().split())
    if proc.returncode not in accept:
        raise RuntimeError(f"{argv} exited {proc.returncode}: {err.decode()[-2000:]}")
    return seconds, cpu, peak_kib / 1024


def shard(junit: Path, out: Path, count: int) -> list[Path]:
    """`count` copies of a suite JUnit file, each under another metric name (CI's per-metric shards)."""
    text = junit.read_text()
    paths = []
    for i in range(count):
        name = f"metric{i:02d}"
        path = out / f"{name}.xml"
        path.write_text(text.replace("laplacian_variance", name))
        paths.append(path)
    return paths


def cases_in(junit: Path) -> int:
    return sum(1 for _, node in ET.iterparse(junit) if node.tag == "testcase")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="generate the set into DIR and keep it (reused if present)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the median is shown (default 3)")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}{work}"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        (work / "scale_metrics.py").write_text(SHARPNESS_LOWER)
        data = args.keep or work / "set"
        if not (data / "metadata.jsonl").is_file():
            generate(data, seeds=12, runs=5, steps=100, size=64)
        (work / "plain").mkdir()
        (work / "plain" / "test_plain.py").write_text(PLAIN)
        (work / "plain" / "conftest.py").write_text("")
        plain = [py, "-m", "pytest", "test_plain.py", *COMMON, "-p", "no:banana_tests"]
        suite = [py, "-m", "pytest", str(SUITE), *COMMON, f"--dataset={data}", *SUITE_ARGS]
        failing_xml, shards = work / "failing.xml", work / "shards"
        shards.mkdir()
        rows: list[tuple[str, list[str], Path, dict[str, str]]] = [
            ("bare loop (decode, score, Δ; no pytest)", [py, "-c", BARE, str(data)], work, env),
            ("plain pytest, passing", [*plain, "--junitxml=p.xml"], work / "plain", env),
            (
                "plain pytest, failing --tb=line",
                [*plain, "--junitxml=p.xml", "--tb=line"],
                work / "plain",
                {**env, "PLAIN_FAIL": "1"},
            ),
            (
                "suite, numpy metric, all pass",
                [*suite, "--metric=scale_metrics:sharpness_lower", "--junitxml=passing.xml"],
                work,
                env,
            ),
            (
                "suite, numpy metric, all fail",
                [*suite, "--metric=laplacian_variance", f"--junitxml={failing_xml}"],
                work,
                env,
            ),
            ("suite, noise_sigma (torch), all pass", [*suite, "--metric=noise_sigma"], work, env),
        ]
        results: dict[str, tuple[float, float, float]] = {}  # median wall s, median CPU s, peak MiB

        def run(label: str, argv: list[str], cwd: Path, row_env: dict[str, str]) -> None:
            runs = [measure(argv, cwd, row_env) for _ in range(args.repeat)]
            wall = [w for w, _, _ in runs]
            results[label] = (
                statistics.median(wall),
                statistics.median(c for _, c, _ in runs),
                max(m for *_, m in runs),
            )
            w, c, m = results[label]
            print(
                f"{label:<44} {w:>7.1f} s ({min(wall):.1f}–{max(wall):.1f}) {c:>7.1f} s CPU {m:>6.0f} MiB",
                flush=True,
            )

        warm = work / "warm.xml"
        for argv, cwd in (  # bytecode and assertion-rewrite caches, as any second run has them
            ([*plain, "--collect-only"], work / "plain"),
            (
                [
                    *suite[:-2],
                    "-k",
                    "test_detects_degradation and seed00-run0-step2",
                    "--metric=laplacian_variance,noise_sigma",
                    f"--junitxml={warm}",
                ],
                work,
            ),
            ([py, "-m", "banana_tests.cli", "report", str(warm), f"--out={work / 'warm'}"], work),
            (rows[0][1], work),
        ):
            measure(argv, cwd, env)
        print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
        for row in rows:
            run(*row)
        small = cases_in(failing_xml)
        big = shard(failing_xml, shards, SHARDS)
        report = [py, "-m", "banana_tests.cli", "report"]
        run(f"report on {small:,} cases", [*report, str(failing_xml), f"--out={work / 'r1'}"], work, env)
        run(
            f"report on {small * SHARDS:,} cases ({SHARDS} shards)",
            [*report, *map(str, big), f"--out={work / 'r2'}"],
            work,
            env,
        )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(
            f"JUnit bytes per case: failing {failing_xml.stat().st_size / small:.0f}, passing "
            f"{(work / 'passing.xml').stat().st_size / small:.0f}"
        )
        keys = [k for k in results if "noise_sigma" not in k]
        for column, name in ((0, "wall"), (1, "CPU")):
            r = [results[k][column] for k in keys]
            print(
                f"{name}: suite passing / plain passing {r[3] / r[1]:.2f} (target ≤ 1.5); suite failing /"
                f" plain failing --tb=line {r[4] / r[2]:.2f} (target ≤ 1.5); report ms per case"
                f" {1000 * r[5] / small:.2f} at {small:,}, {1000 * r[6] / (small * SHARDS):.2f} at"
                f" {small * SHARDS:,} (target ≤ 1)"
            )
        print(f"report peak RSS at {small * SHARDS:,} cases: {results[keys[6]][2]:.0f} MiB (target ≤ 500)")
        print(f"report files written for the --steps all run: {sum(1 for _ in (work / 'r1').iterdir())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
