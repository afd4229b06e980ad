"""Cost of each paper metric on this machine: build time, seconds per image, peak RSS.

One subprocess per metric, so the peak RSS is that metric's alone. Each child builds the metric
through the suite's adapter (PyiqaMetric), scores one small warm-up image (lazy initialisation),
then one image of each size. Offline, networks get synthetic parameters
(`metrics_under_test.synthetic`): the same shapes and the same arithmetic as the real ones, so the
cost is theirs. The last columns estimate the wall time of the paper's protocol (12 seed images x
5 runs x steps 1/5/10/20 = 240 images at 2K per metric) and of `--steps all` (6,000 images).

    nice python benchmarks/bench_metrics.py [--metrics musiq,niqe] [--device cpu] [--real] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SIZES = ((512, 512), (2048, 1152))  # (width, height)
PROTOCOL_IMAGES = 12 * 5 * 4
ALL_STEPS_IMAGES = 12 * 5 * 100
SYNTHETIC_UNSUPPORTED = ("qalign",)
CHILD_TIMEOUT_S = 600  # default per metric (build and three images); MANIQA needs --timeout 1800


def paper_metrics() -> list[str]:
    from metrics_under_test.registry import PAPER_METRICS

    return [p.pyiqa_name for p in PAPER_METRICS]


def image(width: int, height: int) -> np.ndarray:
    """A textured test image: a gradient with seeded noise (the cost does not depend on content)."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x / width, y / height, (x + y) / (width + height)], axis=-1) * 200 + 20
    noisy = base + np.random.default_rng(0).normal(0, 8.0, base.shape)
    return np.clip(noisy, 0, 255).astype(np.uint8)


def child(name: str, device: str, real: bool, sizes: list[tuple[int, int]]) -> dict[str, Any]:
    """Measure one metric in this process."""
    from metrics_under_test.pyiqa_backend import PyiqaMetric
    from metrics_under_test.registry import lookup
    from metrics_under_test.weights import mirror_from_env, stage

    spec = lookup(name)
    folder = mirror_from_env()
    if folder is not None:
        wanted = [*spec.weights, *(lookup("niqe").weights if name == "pi" else ())]
        stage(folder, ((w.file, w.path) for w in wanted))
    synthetic = not real and bool(spec.missing_weights() or spec.weights_note or name in ("nrqm", "pi"))
    start = time.perf_counter()
    if synthetic:
        from metrics_under_test import synthetic as synth

        metric = PyiqaMetric(spec, device, create_metric=synth.create_metric)
    else:
        metric = PyiqaMetric(spec, device)
    row: dict[str, Any] = {"metric": name, "synthetic": synthetic, "build_s": time.perf_counter() - start}
    metric([image(224, 224)])  # LIQE refuses a short side under 224 px
    for width, height in sizes:
        img = image(width, height)
        start, cpu = time.perf_counter(), time.process_time()
        metric([img])
        row[f"s_{width}x{height}"] = time.perf_counter() - start
        row[f"cpu_s_{width}x{height}"] = time.process_time() - cpu  # steadier than wall on a shared CPU
    row["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def measure(
    name: str, device: str, real: bool, sizes: list[tuple[int, int]], timeout: float = CHILD_TIMEOUT_S
) -> dict[str, Any]:
    """Run `child` in a fresh process; a failure is a row with its last error line."""
    cmd = [sys.executable, __file__, "--child", name, "--device", device, "--sizes", _sizes_text(sizes)]
    cmd += ["--real"] if real else []
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"metric": name, "error": f"over {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            row: dict[str, Any] = json.loads(line)
            big = row[f"s_{sizes[-1][0]}x{sizes[-1][1]}"]
            row["protocol_h"] = (row["build_s"] + PROTOCOL_IMAGES * big) / 3600
            row["all_steps_h"] = (row["build_s"] + ALL_STEPS_IMAGES * big) / 3600
            return row
    error = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"metric": name, "error": error[:160]}


def table(rows: list[dict[str, Any]], title: str, sizes: list[tuple[int, int]]) -> str:
    """The rows as a Markdown table (docs/research/metric-costs.md's); the protocol columns use the
    last size's wall time, the CPU column its process time (one thread: what an idle core would
    take; rows measured before that column existed show –)."""
    per = " | ".join(f"s/img {w}×{h}" for w, h in sizes)
    big = f"{sizes[-1][0]}x{sizes[-1][1]}"
    head = (
        f"{title}\n\n| metric | params | build s | {per} | CPU s/img {big.replace('x', '×')} "
        f"| peak RSS MiB | protocol (240 imgs) | --steps all (6,000) |\n|{'---|' * (7 + len(sizes))}\n"
    )
    lines = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['metric']} | failed: {r['error']} |{' |' * (5 + len(sizes))}")
            continue
        per = " | ".join(f"{r[f's_{w}x{h}']:.2f}" for w, h in sizes)
        cpu = f"{r[f'cpu_s_{big}']:.2f}" if f"cpu_s_{big}" in r else "–"
        lines.append(
            f"| {r['metric']} | {'synthetic' if r['synthetic'] else 'real'} | {r['build_s']:.1f} "
            f"| {per} | {cpu} | {r['peak_rss_mib']:.0f} | {_hours(r['protocol_h'])} "
            f"| {_hours(r['all_steps_h'])} |"
        )
    return head + "\n".join(lines)


def _sizes_text(sizes: list[tuple[int, int]]) -> str:
    return ",".join(f"{w}x{h}" for w, h in sizes)


def _parse_sizes(text: str) -> list[tuple[int, int]]:
    return [(int(w), int(h)) for w, h in (part.split("x") for part in text.split(","))]


def _hours(h: float) -> str:
    return f"{h * 60:.0f} min" if h < 1 else f"{h:.1f} h"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metrics", default="", help="comma list (default: the paper's 21)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--real", action="store_true", help="real parameters only (with a network)")
    parser.add_argument("--sizes", default=_sizes_text(list(SIZES)), help="WxH,WxH (default %(default)s)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--timeout", type=float, default=CHILD_TIMEOUT_S, help="s per metric (%(default)s)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = _parse_sizes(args.sizes)
    if args.child:
        print(json.dumps(child(args.child, args.device, args.real, sizes)))
        return 0
    names = [n for n in args.metrics.split(",") if n] or paper_metrics()
    if not args.real:
        names = [n for n in names if n not in SYNTHETIC_UNSUPPORTED]
    rows = []
    for name in names:
        rows.append(measure(name, args.device, args.real, sizes, args.timeout))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    title = f"device {args.device}, {os.cpu_count()} cores, load average {load} (1/5/15 min)"
    print(table(rows, title, sizes))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
