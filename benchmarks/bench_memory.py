"""Peak RSS of suite runs: per metric on the embedded set, and over a 100-step set.

With --embedded METRICS: the suite on the embedded set, one metric at a time, serial and under
-n 2 (`pytest --pyargs banana_tests -k test_detects_degradation --no-cache` from an empty
folder), with the peak RSS of its largest process and of its whole process tree (sampled every
0.2 s), CPU seconds, and the verdicts (failed/passed), which must not depend on the workers.
A run's peak should follow one batch of its largest metric, not the set.

Otherwise: generates 100 steps × 5 runs × 12 seed images of small noise images (a canonical
imagefolder), then runs the suite in a fresh process per setting and prints its peak RSS and
wall time. Only the selected images are decoded, each once; the decoded ones are kept for
reuse across metrics up to --image-budget, so the rows with a small budget show the floor.

    python benchmarks/bench_memory.py [--size 64] [--keep DIR]
    python benchmarks/bench_memory.py --embedded ilniqe,niqe [--workers 0,2] [--seed-image NAME] [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

SUITE = Path(__file__).resolve().parent.parent / "banana_tests" / "test_degradation.py"
SETTINGS = (
    ("--steps=5,10,20", "--collect-only"),
    ("--steps=5,10,20",),
    ("--steps=all",),
    ("--steps=5,10,20", "--image-budget=16"),
    ("--steps=all", "--image-budget=16"),
)
RUNNER = (
    "import resource, sys, pytest\n"
    "code = pytest.main(sys.argv[1:])\n"
    "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
)


def generate(root: Path, seeds: int, runs: int, steps: int, size: int) -> int:
    """A canonical set whose noise grows with the step; returns the number of images."""
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:size, 0:size]
    lines = []
    for s in range(seeds):
        base = np.stack([x, y, (x + y) / 2], axis=-1) * (200 / size) + 20 + 5 * s
        for r in range(runs):
            for step in range(1, steps + 1):
                name = f"seed{s:02d}/run{r}/step{step:03d}.png"
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                noisy = base + rng.normal(0, 0.5 * step, base.shape)
                Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(root / name)
                row = {"file_name": name, "seed_image": f"seed{s:02d}", "variant": "replicate"}
                lines.append(json.dumps({**row, "run": r, "step": step}) + "\n")
    (root / "metadata.jsonl").write_text("".join(lines))
    return len(lines)


def peak_rss(dataset: Path, extra: tuple[str, ...], workdir: Path) -> tuple[float, float, str]:
    """(peak RSS in MiB, seconds, pytest's last line) of one suite run in a fresh process."""
    args = [f"--dataset={dataset}", "--metric=piqe", "--no-cache", "-p", "no:cacheprovider", "-q", *extra]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(SUITE), *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    seconds = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    rss = next(int(line.split()[1]) for line in lines if line.startswith("MAXRSS_KB"))
    summary = next((line for line in reversed(lines) if " in " in line and "=" not in line[:1]), "")
    return rss / 1024, seconds, summary.strip("= ")


def tree_peak(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float, int]:
    """(largest process's peak MiB, whole tree's peak MiB, CPU seconds, exit code) of a command,
    its process tree sampled every 0.2 s (xdist workers included)."""
    import psutil

    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    largest = tree = 0.0
    cpu: dict[int, float] = {}
    while proc.poll() is None:
        try:
            members = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            break
        total = 0.0
        for member in members:
            try:
                rss = member.memory_info().rss / 2**20
                times = member.cpu_times()
            except psutil.NoSuchProcess:
                continue
            cpu[member.pid] = times.user + times.system
            largest, total = max(largest, rss), total + rss
        tree = max(tree, total)
        time.sleep(0.2)
    return largest, tree, sum(cpu.values()), proc.returncode


def verdicts(junit: Path) -> tuple[int, int, int]:
    """(failed, passed, other) cases in a JUnit file."""
    import xml.etree.ElementTree as ET

    failed = passed = other = 0
    for case in ET.parse(junit).iter("testcase"):
        kinds = {child.tag for child in case}
        if "failure" in kinds:
            failed += 1
        elif kinds & {"error", "skipped"}:
            other += 1
        else:
            passed += 1
    return failed, passed, other


def per_metric(metrics: list[str], workers: list[int], narrowing: list[str]) -> None:
    """The embedded set, one metric per run, serial and with xdist workers."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    header = f"{'metric':<20} {'-n':>3} {'largest MiB':>11} {'tree MiB':>9} {'CPU s':>7}  failed/passed/other"
    print(header, flush=True)
    for metric in metrics:
        for n in workers:
            with tempfile.TemporaryDirectory() as tmp:
                junit = Path(tmp) / "run.xml"
                argv = [sys.executable, "-m", "pytest", "--pyargs", "banana_tests", f"--metric={metric}"]
                argv += ["-k", "test_detects_degradation", "--no-cache", "-p", "no:cacheprovider", "-q"]
                argv += [f"--junitxml={junit}", "-n", str(n), *narrowing]
                largest, tree, cpu, code = tree_peak(argv, Path(tmp), env)
                shown = "/".join(map(str, verdicts(junit))) if junit.is_file() else f"exit {code}"
                print(f"{metric:<20} {n:>3} {largest:>11.0f} {tree:>9.0f} {cpu:>7.0f}  {shown}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (default: 64)")
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it (reused if present)")
    parser.add_argument("--embedded", help="comma list of metrics to run on the embedded set, one at a time")
    parser.add_argument("--workers", default="0,2", help="xdist worker counts for --embedded (default 0,2)")
    parser.add_argument("--seed-image", action="append", default=[], help="only this seed image (repeatable)")
    parser.add_argument("--steps", help="only these steps with --embedded, e.g. 5 (the suite's --steps)")
    args = parser.parse_args()
    if args.embedded:
        workers = [int(n) for n in args.workers.split(",")]
        narrowing = [f"--seed-image={s}" for s in args.seed_image]
        narrowing += [f"--steps={args.steps}"] if args.steps else []
        per_metric(args.embedded.split(","), workers, narrowing)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp) / "set"
        if not (root / "metadata.jsonl").is_file():
            start = time.perf_counter()
            n = generate(root, seeds=12, runs=5, steps=100, size=args.size)
            print(f"generated {n} images of {args.size}x{args.size} in {time.perf_counter() - start:.1f} s")
        print(f"{'setting':<36} {'peak RSS MiB':>12} {'seconds':>8}  result")
        for extra in SETTINGS:
            mib, seconds, summary = peak_rss(root, extra, Path(tmp))
            print(f"{' '.join(extra):<36} {mib:>12.1f} {seconds:>8.1f}  {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
