"""Peak RSS of suite runs: per metric on the embedded set, and over a 100-step set.

With --embedded [METRICS] (default brisque, niqe, piqe, ilniqe): the suite on the embedded set,
one metric at a time, serial and under -n 2 (`pytest --pyargs banana_tests -k
test_detects_degradation --banana-no-cache` from an empty folder). Per run: the peak RSS of its
largest process (the kernel's, as `/usr/bin/time -v` gives it), the sum of its processes' own
peaks (xdist workers and controller) checked against issue 26's 4 GB bound, the tree's RSS
sampled together, CPU seconds, and the verdicts, which must agree case by case across worker
counts. A run's peak should follow one batch of its largest metric, not the set. Exit status 1
when a run is over the bound or the verdicts differ.

Otherwise: generates 100 steps × 5 runs × 12 seed images of small noise images (a canonical
imagefolder), then runs the suite in a fresh process per setting and prints its peak RSS and
wall time. Only the selected images are decoded, each once; the decoded ones are kept for
reuse across metrics up to --image-budget, so the rows with a small budget show the floor.

    python benchmarks/bench_memory.py [--size 64] [--keep DIR]
    python benchmarks/bench_memory.py --embedded [ilniqe,niqe] [--workers 0,2] [--junit-dir DIR]
        [--seed-image NAME] [--steps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

SUITE = (
    Path(__file__).resolve().parent.parent
    / "banana_tests"
    / "families"
    / "degradation"
    / "test_degradation.py"
)
SETTINGS = (
    ("--steps=5,10,20", "--collect-only"),
    ("--steps=5,10,20",),
    ("--steps=all",),
    ("--steps=5,10,20", "--image-budget=16"),
    ("--steps=all", "--image-budget=16"),
)
BOUND_MIB = 4e9 / 2**20  # issue 26: ILNIQE on the embedded set peaks at <= 4 GB, serial and under -n 2
EMBEDDED = "brisque,niqe,piqe,ilniqe"
EMBEDDED_RUN = (
    "--pyargs",
    "banana_tests",
    "-k",
    "test_detects_degradation",
    "--banana-no-cache",
    "-p",
    "no:cacheprovider",
    "-q",
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
    args = [
        f"--banana-dataset={dataset}",
        "--banana-metric=piqe",
        "--banana-no-cache",
        "-p",
        "no:cacheprovider",
        "-q",
        *extra,
    ]
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


@dataclass(frozen=True)
class Peaks:
    """Memory and CPU of one command's process tree. `largest` is exact (the kernel's peak RSS of
    the root and every descendant it reaped, as `/usr/bin/time -v` reports it); `summed` adds up
    each process's own peak (VmHWM), an upper bound on what the tree held at once, which
    `together` samples every 0.2 s."""

    largest: float  # MiB
    summed: float  # MiB
    together: float  # MiB
    cpu: float  # user + system seconds of the tree
    wall: float  # seconds
    code: int


def high_water_mib(pid: int) -> float:
    """A live process's peak RSS (VmHWM), in MiB; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    line = next((line for line in status.splitlines() if line.startswith("VmHWM:")), "VmHWM: 0 kB")
    return int(line.split()[1]) / 1024


def tree_peak(argv: list[str], cwd: Path, env: dict[str, str]) -> Peaks:
    """Run a command and measure its process tree (xdist workers included): the kernel's figures
    for the tree once it is reaped, and each process's peak and the tree's sum while it runs."""
    import psutil

    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = psutil.Process(proc.pid)
    peaks: dict[int, float] = {}
    cpu: dict[int, float] = {}
    together = 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        try:
            members = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            members = []
        total = 0.0
        for member in members:
            try:
                total += member.memory_info().rss / 2**20
                times = member.cpu_times()
            except psutil.NoSuchProcess:
                continue
            cpu[member.pid] = times.user + times.system
            peaks[member.pid] = max(peaks.get(member.pid, 0.0), high_water_mib(member.pid))
        together = max(together, total)
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    largest = max(usage.ru_maxrss / 1024, *peaks.values(), 0.0)  # ru_maxrss is in KiB on Linux
    cpu_tree = max(usage.ru_utime + usage.ru_stime, sum(cpu.values()))
    wall = time.perf_counter() - start
    return Peaks(largest, sum(peaks.values()), together, cpu_tree, wall, proc.returncode)


def outcomes(junit: Path) -> dict[str, str]:
    """Each case's outcome in a JUnit file (failed, passed, error or skipped), by its full name."""
    import xml.etree.ElementTree as ET

    found = {}
    for case in ET.parse(junit).iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(
            min(kinds, default=""), "passed"
        )
        found[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return found


def tally(cases: dict[str, str]) -> str:
    """failed/passed/other, as the table shows them."""
    failed = sum(v == "failed" for v in cases.values())
    passed = sum(v == "passed" for v in cases.values())
    return f"{failed}/{passed}/{len(cases) - failed - passed}"


def per_metric(metrics: list[str], workers: list[int], narrowing: list[str], junit_dir: Path | None) -> bool:
    """The embedded set, one metric per run, serial and with xdist workers, each from an empty
    folder; prints each run's peaks against BOUND_MIB (the tree's sum of peaks) and whether the
    verdicts of a metric's runs agree case by case. True when all runs are within the bound and
    each metric's verdicts agree."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    print(f"bound: {BOUND_MIB:,.0f} MiB (4 GB) for a run's sum of peaks; load average {os.getloadavg()}")
    print(
        f"{'metric':<10} {'-n':>2} {'largest MiB':>11} {'sum of peaks':>12} {'tree MiB':>9} "
        f"{'CPU s':>6} {'wall s':>6} {'load':>5}  {'failed/passed/other':<19} bound",
        flush=True,
    )
    ok = True
    for metric in metrics:
        seen: dict[int, dict[str, str]] = {}
        for n in workers:
            with tempfile.TemporaryDirectory() as tmp:
                junit = (junit_dir or Path(tmp)) / f"{metric}-n{n}.xml"
                argv = [sys.executable, "-m", "pytest", *EMBEDDED_RUN, f"--banana-metric={metric}"]
                argv += [f"--junitxml={junit}", "-n", str(n), *narrowing]
                peaks = tree_peak(argv, Path(tmp), env)
                load = os.getloadavg()[0]
                cases = outcomes(junit) if junit.is_file() else {}
                within = peaks.summed <= BOUND_MIB  # every process at its own peak at once
                shown = tally(cases) if cases else f"exit {peaks.code}"
                mib = f"{peaks.largest:>11,.0f} {peaks.summed:>12,.0f} {peaks.together:>9,.0f}"
                times = f"{peaks.cpu:>6.0f} {peaks.wall:>6.0f} {load:>5.1f}"
                bound = "ok" if within else "OVER"
                print(f"{metric:<10} {n:>2} {mib} {times}  {shown:<19} {bound}", flush=True)
                ok = ok and within and bool(cases)
                seen[n] = cases
        first = next(iter(seen.values()))
        names = {name for cases in seen.values() for name in cases}
        differing = sorted(name for name in names if len({cases.get(name) for cases in seen.values()}) > 1)
        if differing:
            ok = False
            print(f"{metric}: verdicts differ between worker counts: {', '.join(differing[:5])}")
        elif len(seen) > 1:
            print(
                f"{metric}: same verdict for each of its {len(first)} cases at -n {', '.join(map(str, seen))}"
            )
    print(f"load average after: {os.getloadavg()}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="image side in pixels (default: 64)")
    parser.add_argument("--keep", type=Path, help="generate into DIR and keep it (reused if present)")
    parser.add_argument(
        "--embedded",
        nargs="?",
        const=EMBEDDED,
        metavar="METRICS",
        help=f"comma list of metrics to run on the embedded set, one at a time (default: {EMBEDDED})",
    )
    parser.add_argument("--junit-dir", type=Path, help="keep each --embedded run's JUnit file here")
    parser.add_argument("--workers", default="0,2", help="xdist worker counts for --embedded (default 0,2)")
    parser.add_argument("--seed-image", action="append", default=[], help="only this seed image (repeatable)")
    parser.add_argument("--steps", help="only these steps with --embedded, e.g. 5 (the suite's --steps)")
    args = parser.parse_args()
    if args.embedded:
        workers = [int(n) for n in args.workers.split(",")]
        narrowing = [f"--seed-image={s}" for s in args.seed_image]
        narrowing += [f"--steps={args.steps}"] if args.steps else []
        return 0 if per_metric(args.embedded.split(","), workers, narrowing, args.junit_dir) else 1
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
