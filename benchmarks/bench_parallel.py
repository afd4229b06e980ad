"""One metric over two workers: `-n 2` against serial, cold, with the Δs compared case by case.

    python benchmarks/bench_parallel.py [--repeat N] [--work DIR] [--weights-dir DIR]

Builds a set of 480 images with `banana-tests generate --editor emulate` from the shipped seed
images (8 seed images × 3 runs × 20 steps; kept in --work for the next call), then runs the Δ
cases of `--metric=piqe` and of `--metric=brisque` on it with `--steps=all` (152 cases each),
serial and `-n 2`, each with a fresh score cache, and prints the wall times and their ratio
against the floor FLOOR (`-n 2` / serial ≤ 0.70 where scoring outweighs start-up). Then the same
for the embedded set's 24 PIQE Δ cases, where `-n 2` must not be slower than serial. Every pair
of runs must write the same JUnit Δs to every digit. The runs alternate, so a burst of load hits
both kinds alike; with --repeat N the fastest of each counts. Bytecode is kept in a prefix in
--work and written by an untimed run first: without it every process compiles pytest's
assertion-rewritten copies of hypothesis and the suite again (PYTHONDONTWRITEBYTECODE, as set on
this project's machine), 1 s more per process, which `-n 2` pays three times. OMP_NUM_THREADS
is left unset: the suite's thread policy decides (docs/research/speed.md). The load average is printed,
because the figures depend on it. Exits 1 when a Δ differs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "fixtures" / "seeds"
EMBEDDED = ROOT / "fixtures" / "emulated"
FLOOR = 0.70  # -n 2 / serial on the 480-image set
RUNS, STEPS = 3, 20


@dataclass(frozen=True)
class Setting:
    """A pair of runs to compare: a metric on a data set, its steps, and the bound on the ratio."""

    label: str
    metric: str
    dataset: Path
    steps: str
    bound: float


@dataclass(frozen=True)
class Run:
    wall: float
    deltas: dict[str, str]  # case id → its JUnit delta property


def build_set(folder: Path) -> Path:
    """The 480-image set, made once by the emulate editor (deterministic) and kept."""
    out = folder / "emulated-480"
    if not (out / "metadata.jsonl").exists():
        cmd = ["banana-tests", "generate", "--editor", "emulate", "--seed-images", str(SEEDS)]
        cmd += ["--runs", str(RUNS), "--steps", str(STEPS), "--prompt", "replicate", "--out", str(out)]
        subprocess.run(cmd, check=True, capture_output=True)
    return out


def suite_run(setting: Setting, workers: int, folder: Path, env: dict[str, str]) -> Run:
    """The setting's Δ cases in a fresh process with a fresh score cache; its wall time and Δs."""
    xml = folder / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "banana_tests", "-p", "no:cacheprovider", "-q"]
    cmd += ["-p", "no:randomly", "-k", "test_detects_degradation", "-n", str(workers)]
    cmd += [f"--metric={setting.metric}", f"--dataset={setting.dataset}", f"--steps={setting.steps}"]
    cmd += [f"--cache-dir={folder / 'cache'}", f"--junitxml={xml}"]
    folder.mkdir(parents=True)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: the metric misses cells, as it may
        raise SystemExit(f"{setting.label} -n {workers} exited {done.returncode}:\n{done.stdout[-3000:]}")
    deltas = {}
    for case in ET.parse(xml).iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        deltas[case.get("name", "")] = props.get("delta", "")
    return Run(wall, deltas)


def compare(setting: Setting, repeat: int, work: Path, env: dict[str, str]) -> bool:
    """Print one line for the setting; whether its Δs agreed."""
    serial: list[Run] = []
    parallel: list[Run] = []
    for i in range(repeat):
        serial.append(suite_run(setting, 0, work / f"{setting.label}-serial-{i}", env))
        parallel.append(suite_run(setting, 2, work / f"{setting.label}-n2-{i}", env))
    s = min(r.wall for r in serial)
    p = min(r.wall for r in parallel)
    runs = [*serial, *parallel]
    same = all(r.deltas == runs[0].deltas for r in runs)
    ratio = p / s
    met = "yes" if ratio <= setting.bound else "NO"
    times = f"{s:>9.1f}s {p:>9.1f}s {ratio:>6.2f}  ≤ {setting.bound:.2f}"
    agreement = "identical" if same else "DIFFER"
    print(f"{setting.label:<26} {len(runs[0].deltas):>5} {times}  {met:<4} {agreement}", flush=True)
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each kind; the fastest counts")
    parser.add_argument("--work", type=Path, default=None, help="where the 480-image set is kept")
    parser.add_argument(
        "--weights-dir",
        default=os.environ.get("BANANA_WEIGHTS_DIR", str(ROOT.parent / "shared" / "pyiqa-weights")),
    )
    args = parser.parse_args()
    work = args.work or Path(tempfile.gettempdir()) / "bench_parallel"
    work.mkdir(parents=True, exist_ok=True)
    big = build_set(work)
    settings = [
        Setting("piqe, 480 images", "piqe", big, "all", FLOOR),
        Setting("brisque, 480 images", "brisque", big, "all", FLOOR),
        Setting("piqe, embedded set", "piqe", EMBEDDED, "5,10,20", 1.0),
    ]
    with tempfile.TemporaryDirectory(prefix="runs-", dir=work) as tmp:
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        env |= {"HF_HUB_OFFLINE": "1", "TORCH_HOME": f"{tmp}/torch", "BANANA_WEIGHTS_DIR": args.weights_dir}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode kept, as a user's machine keeps it
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        suite_run(settings[-1], 0, Path(tmp) / "warm-up", env)  # untimed: writes that bytecode
        before = os.getloadavg()
        print(f"{os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable; fastest of {args.repeat}")
        print(f"{'set':<26} {'cases':>5} {'serial':>10} {'-n 2':>10} {'ratio':>6}  bound  met  Δs")
        agreed = [compare(setting, args.repeat, Path(tmp), env) for setting in settings]
        after = os.getloadavg()
    print(f"load average {before[0]:.2f} → {after[0]:.2f} (1 min), {before[1]:.2f} → {after[1]:.2f} (5 min)")
    return 0 if all(agreed) else 1


if __name__ == "__main__":
    sys.exit(main())
