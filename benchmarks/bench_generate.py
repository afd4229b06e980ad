"""`generate` with the learned editor: round trips a core, `--workers 2` against 1, a 3000² step's peak.

    python benchmarks/bench_generate.py [--repeat N] [--work DIR] [--skip-3000]

Three parts, each in fresh child processes, printed against their floors:

- the `flux2-tiny-vae` step (TAEF2 round trip, blend, 8-bit PNG; one torch thread, as the editor
  runs) at 256, 1024 and 3000 px square, as round trips a second a core (256 px: the median of 5;
  the others: one each);
- the issue's case, `generate --editor flux2-tiny-vae` on 4 seeds × 2 runs × 3 steps of 256-px
  crops (the first four shipped seeds' centres), `--workers 1` and `--workers 2` alternately with
  --repeat N (the fastest of each counts): the ratio against FLOOR, and whether the two sets hold
  the same bytes;
- the 3000×3000 step's peak memory: the ru_maxrss of the child that made it, against PEAK_GB.

The load average is printed, because the figures depend on it: the ratio is measured on a machine
with at least two idle cores. Exits 1 when a floor is missed or the sets differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "fixtures" / "seeds"
FLOOR = 0.65  # --workers 2 / --workers 1 on two cores (issue 60)
PEAK_GB = 3.0  # a 3000×3000 step's peak resident memory
SIZES = (256, 1024, 3000)
OPTIONS = ["--option", "strength=0.35", "--option", "latent_noise=0.05"]

STEP = """
import json, resource, sys, time
import numpy as np
from banana_tests.editors.base import EditorConfig, EditRequest, create
from banana_tests.editors.chains import png
from PIL import Image
size, repeat = int(sys.argv[1]), int(sys.argv[2])
editor = create("flux2-tiny-vae", EditorConfig(options={"strength": "0.35", "latent_noise": "0.05"}))
y, x = np.mgrid[0:size, 0:size]
rng = np.random.default_rng(0)
pixels = np.stack([x * 255 / size, y * 255 / size, (x + y) % 256], -1) + rng.normal(0, 12, (size, size, 3))
image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
walls = []
for step in range(1, repeat + 1):
    start = time.perf_counter()
    png(editor.edit(EditRequest(image, "replica", step, 0, "bench")).image)
    walls.append(time.perf_counter() - start)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"walls": walls, "peak": peak}))
"""


def step_child(size: int, repeat: int) -> tuple[float, float]:
    """One child making `repeat` steps at `size`²: its median step time (s), and its peak RSS (bytes)."""
    done = subprocess.run(
        [sys.executable, "-c", STEP, str(size), str(repeat)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the {size}-px step exited {done.returncode}:\n{done.stderr[-3000:]}")
    found = json.loads(done.stdout.splitlines()[-1])
    return statistics.median(found["walls"]), float(found["peak"])


def crops(folder: Path) -> Path:
    """The centres (256 × 256) of the first four shipped seed images at least that large."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    large = [p for p in sorted(SEEDS.glob("*.png")) if min(Image.open(p).size) >= 256][:4]
    for path in large:
        image = Image.open(path).convert("RGB")
        left, top = (image.width - 256) // 2, (image.height - 256) // 2
        image.crop((left, top, left + 256, top + 256)).save(folder / path.name)
    return folder


def digest(out: Path) -> str:
    """The images' bytes and generate.json, in file-name order (metadata lines carry wall times)."""
    found = hashlib.sha256()
    for path in sorted(out.rglob("*.png")):
        found.update(path.relative_to(out).as_posix().encode() + path.read_bytes())
    found.update((out / "generate.json").read_bytes())
    return found.hexdigest()


def generate(seeds: Path, out: Path, workers: int) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "banana_tests.cli", "generate", "--editor", "flux2-tiny-vae"]
    cmd += ["--seed-images", str(seeds), "--out", str(out), "--runs", "2", "--steps", "3"]
    cmd += [*OPTIONS, "--workers", str(workers)]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"--workers {workers} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return wall, digest(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each --workers; the fastest counts")
    parser.add_argument(
        "--work", type=Path, default=None, help="a folder for the sets (default: a temporary one)"
    )
    parser.add_argument("--skip-3000", action="store_true", help="leave out the 3000-px step (minutes)")
    args = parser.parse_args()
    env_threads = os.environ.get("OMP_NUM_THREADS")
    before = os.getloadavg()
    print(f"{os.cpu_count()} CPUs, {len(os.sched_getaffinity(0))} usable; OMP_NUM_THREADS={env_threads}")
    print(f"load average at the start {before[0]:.2f} (1 min), {before[1]:.2f} (5 min)", flush=True)
    met = True
    print(f"{'step, one thread':<22} {'s/step':>8} {'trips/s/core':>13} {'peak':>9}")
    peak3000 = None
    for size in SIZES:
        if size == 3000 and args.skip_3000:
            continue
        wall, peak = step_child(size, 5 if size == 256 else 1)
        if size == 3000:
            peak3000 = peak
        print(f"{f'{size}×{size}':<22} {wall:>8.2f} {1 / wall:>13.4f} {peak / 2**30:>7.2f} GB", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_generate-", dir=args.work) as tmp:
        seeds = crops(Path(tmp) / "seeds")
        walls: dict[int, list[float]] = {1: [], 2: []}
        digests = set()
        for i in range(args.repeat):
            for workers in (1, 2):
                wall, found = generate(seeds, Path(tmp) / f"w{workers}-{i}", workers)
                walls[workers].append(wall)
                digests.add(found)
    one, two = min(walls[1]), min(walls[2])
    ratio = two / one
    within = ratio <= FLOOR
    same = len(digests) == 1
    met &= within and same
    print(
        f"4 seeds × 2 runs × 3 steps, 256 px: --workers 1 {one:.1f} s, --workers 2 {two:.1f} s,"
        f" ratio {ratio:.2f} ≤ {FLOOR:.2f} {'yes' if within else 'NO'};"
        f" bytes {'identical' if same else 'DIFFER'}"
    )
    if peak3000 is not None:
        fits = peak3000 <= PEAK_GB * 2**30
        met &= fits
        print(f"3000×3000 step peak {peak3000 / 2**30:.2f} GB ≤ {PEAK_GB:.1f} GB {'yes' if fits else 'NO'}")
    after = os.getloadavg()
    print(f"load average {before[0]:.2f} → {after[0]:.2f} (1 min), {before[1]:.2f} → {after[1]:.2f} (5 min)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
