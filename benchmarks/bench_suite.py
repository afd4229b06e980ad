"""The suite's overhead, its cache and its parallelism, measured on the embedded data.

    python benchmarks/bench_suite.py [--metric NAMES] [--weights-dir DIR] [--repeat N]

Prints a table of (a) a cold suite run against a bare loop calling the metrics on exactly the
same images, (b) a warm rerun (every score cached) against the cold run, (c) `-n 2` against
`-n 0`, and (d) the peak resident memory of the largest process (a worker). Every figure is
the wall time of a fresh process, imports included, the fastest of `--repeat` runs; the last
line bounds (c) by what each process pays whatever it scores. The machine's load average is printed
because the figures depend on it. hypothesis's pytest plugin is switched off in every run: it
imports all of hypothesis at the end of each session, which is not the suite's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRICS = "brisque,niqe,piqe,laplacian_variance,noise_sigma"
# the failure matrix alone, not the other test modules
SUITE = "banana_tests/families/degradation/test_degradation.py"
# figure: (label, at most or at least, target ratio)
TARGETS = {
    "bare": ("(a) cold suite / bare loop", "≤", 1.15),
    "warm": ("(b) warm rerun / cold", "≤", 0.10),
    "parallel": ("(c) -n 0 / -n 2 (speed-up)", "≥", 1.6),
}


def timed(cmd: list[str], env: dict[str, str]) -> dict[str, float | str]:
    """Run `cmd` in a wrapper that reports its wall time and the peak RSS of any descendant."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "wall = time.perf_counter() - t\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(json.dumps({'wall': wall, 'rss_kib': rss, 'rc': p.returncode, 'tail': p.stdout[-600:]}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapper, *cmd], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, float | str] = json.loads(out.stdout)
    return result


def suite(metrics: str, workers: int, cache: str | None) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        SUITE,
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",  # imports all of hypothesis at session end (~1.3 s); unused here
        "-q",
        f"--metric={metrics}",
        "-n",
        str(workers),
    ]
    return cmd + ([f"--cache-dir={cache}"] if cache else ["--no-cache"])


def cases(result: dict[str, float | str]) -> int:
    """Cases with a verdict in a run's summary line; a run with errors is not a fair figure."""
    tail = str(result["tail"])
    if re.search(r"\d+ error", tail):
        raise SystemExit(f"the suite run had errors:\n{tail}")
    return sum(int(n) for n in re.findall(r"(\d+) (?:passed|failed)", tail))


def bare_loop(metrics: str) -> None:
    """The baseline: build each metric and call it on every image the suite scores, one by one
    (no batching), decoding each image with PIL as a user's own script would."""
    import numpy as np
    import pyiqa
    import torch
    from banana_tests.data import EMBEDDED
    from PIL import Image

    from banana_tests.trajectories.case_plans import parse_steps, plan_cases
    from banana_tests.trajectories.imagefolder import read_imagefolder
    from metrics_under_test.custom import build
    from metrics_under_test.registry import resolve
    from metrics_under_test.spec import Backend

    specs = resolve(metrics)
    records = read_imagefolder(EMBEDDED).select("replicate")
    plans = plan_cases(records, [specs[0].name], parse_steps("5,10,20"), 1, False)
    paths = sorted({r.path for p in plans for pair in p.pairs for r in pair})
    for spec in specs:
        if spec.backend is Backend.CUSTOM:
            metric = build(spec, "cpu")
            for path in paths:
                metric([np.asarray(Image.open(path).convert("RGB"))])
            continue
        model = pyiqa.create_metric(spec.name, device=torch.device("cpu"))
        with torch.inference_mode():
            for path in paths:
                img = np.asarray(Image.open(path).convert("RGB"))
                model(torch.from_numpy(img).permute(2, 0, 1)[None].float().div_(255.0))
    print(f"{len(specs) * len(paths)} scores")


def best(runs: list[dict[str, float | str]]) -> dict[str, float | str]:
    """The fastest of repeated runs (as timeit reports), with the highest peak RSS of them all."""
    fastest = min(runs, key=lambda r: float(r["wall"]))
    return {**fastest, "rss_kib": max(float(r["rss_kib"]) for r in runs)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metric", default=METRICS)
    parser.add_argument(
        "--weights-dir",
        default=os.environ.get("BANANA_WEIGHTS_DIR", ROOT.parent / "shared" / "pyiqa-weights"),
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind; the fastest counts")
    parser.add_argument("--bare-loop", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_loop:
        bare_loop(args.metric)
        return 0

    runs: dict[str, list[dict[str, float | str]]] = {k: [] for k in ("bare", "cold", "warm", "n2", "fixed")}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TORCH_HOME": f"{tmp}/torch",
            "BANANA_WEIGHTS_DIR": str(args.weights_dir),
        }
        load_before = os.getloadavg()
        # Stage the parameter files first, so no run below pays for linking them.
        subprocess.run(
            [*suite(args.metric, 0, None), "--collect-only"], cwd=ROOT, env=env, capture_output=True
        )
        os.chdir(ROOT)
        for i in range(args.repeat):  # interleaved, so a burst of load hits every kind alike
            runs["bare"].append(
                timed([sys.executable, __file__, "--bare-loop", f"--metric={args.metric}"], env)
            )
            runs["cold"].append(timed(suite(args.metric, 0, f"{tmp}/cold{i}"), env))
            runs["warm"].append(timed(suite(args.metric, 0, f"{tmp}/cold{i}"), env))
            runs["n2"].append(timed(suite(args.metric, 2, f"{tmp}/n2-{i}"), env))
            # What every process pays before and after scoring: start-up, imports, one case, exit.
            runs["fixed"].append(timed([*suite("piqe", 0, None), "-k", "astronaut and step5"], env))
        load_after = os.getloadavg()

    bare, cold, warm, parallel, fixed = (best(runs[k]) for k in ("bare", "cold", "warm", "n2", "fixed"))
    n = cases(cold)
    if not (n == cases(warm) == cases(parallel)):
        raise SystemExit("the runs disagree on the number of cases")
    c, f = float(cold["wall"]), float(fixed["wall"])
    walls = {"bare": (cold, bare), "warm": (warm, cold), "parallel": (cold, parallel)}
    load = f"load average {load_before[0]:.2f} → {load_after[0]:.2f}"
    print(f"metrics: {args.metric}; {n} cases; {os.cpu_count()} CPUs; {load}; best of {args.repeat}")
    print(f"{'figure':<30} {'times':<20} {'ratio':>6}  target  met")
    for key, (label, bound, target) in TARGETS.items():
        top, bottom = (float(run["wall"]) for run in walls[key])
        ratio = top / bottom
        met = ratio <= target if bound == "≤" else ratio >= target
        times = f"{top:.1f}s / {bottom:.1f}s"
        print(f"{label:<30} {times:<20} {ratio:>6.2f}  {bound} {target:<4}  {'yes' if met else 'NO'}")
    mib = {k: float(v["rss_kib"]) / 1024 for k, v in (("-n 0", cold), ("-n 2", parallel), ("bare", bare))}
    rss = f"{mib['-n 0']:.0f} MiB serial, {mib['-n 2']:.0f} MiB largest process of -n 2"
    print(f"{'(d) peak RSS of a worker':<30} {rss} (bare loop {mib['bare']:.0f} MiB)")
    # Each worker pays the fixed cost again; with the rest split perfectly over 2 workers:
    ceiling = c / (f + (c - f) / 2)
    print(
        f"(c) ceiling here: each process's fixed cost is {f:.1f}s of the {c:.1f}s, so -n 2 ≤ {ceiling:.2f}×"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
