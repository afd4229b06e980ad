"""Banana100-size sets in every local layout: collection and the whole suite against plain
pytest's floor, and the cost per record of reading a set as it grows.

Builds 13 seed images × 5 runs × 100 steps of 64 px images (6,500 records, 6,435 per-run cases)
in three layouts: an imagefolder whose metadata.jsonl rows carry `variant`, the same images whose
rows lack it (`{"file_name", "seed_image", "run", "step"}`, a user's own set), and parquet files
of image bytes with seed_image/run/step columns (as a hub data set is stored). Then, each in a
fresh process run from an empty folder outside the clone (`pytest --pyargs banana_tests`), with
warm bytecode caches (PYTHONPYCACHEPREFIX) and its peak RSS:

- collection (`--collect-only --steps=all --aggregate=per-run -k test_detects_degradation`)
  against plain pytest collecting as many trivial cases (`-p no:banana_tests`, same venv); the
  parquet set also on a first read (its index removed before each run, as after the file
  changed), and every layout under `-n 2` against plain pytest's `-n 2`: xdist skips itself
  under --collect-only, so these runs deselect every case (`-k`, exit status 5) after each
  worker has collected them all (peak of the largest process, CPU of all);
- the whole run, passing and failing (the numpy metrics of bench_scale.py), against plain pytest
  running as many cases with --junitxml and 8 properties each, issue 26's floor, written as the
  suite writes its own (`user_properties`: `record_property` warns on every case under xunit2,
  which would slow the floor) (failing: --tb=line);
- reading alone (`sources.load`, timed in process) at 6,500 and 28,000 records (56 seed images),
  and the hub path (`datasets.load_dataset` on the same parquet files, after a first call
  prepared its cache, as after a download), in CPU ms per record: the median of `--repeat` fresh
  processes per size, the sizes alternating, so a neighbour's burst on a shared machine does
  not land on one size only.

    python benchmarks/bench_layouts.py [--keep DIR] [--repeat 3] [--suite-repeat 1] [--xdist-repeat 1]
                                       [--no-suite]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from bench_memory import generate
from bench_scale import SHARPNESS_LOWER, measure

from banana_tests.trajectories.table_rows import INDEX_FOLDER

SEEDS, RUNS, STEPS, SIZE = 13, 5, 100, 64
BIG_SEEDS = 56  # 56 × 5 × 100 = 28,000 records, Banana100's size, for reading only
CASES = SEEDS * RUNS * (STEPS - 1)
SUITE_ARGS = ("--steps=all", "--aggregate=per-run", "--no-cache", "-k", "test_detects_degradation")
COMMON = ("-p", "no:cacheprovider", "-p", "no:xdist", "-q")
XDIST = ("-p", "no:cacheprovider", "-n", "2", "-q")  # each of the 2 workers collects
NOTHING = "not test_"  # deselects every case after collection: xdist is off under --collect-only
HUB = "hf:bench/trajectories"  # read through datasets from its cache of the parquet files
LAYOUTS = ("imagefolder without variant", "imagefolder with variant", "parquet with image bytes")
FLOOR = """
import os
import pytest


@pytest.fixture
def case(request):
    request.node.user_properties.extend(
        [("metric", "m"), ("seed_image", "s"), ("step", "5"), ("run", "0"), ("reference_step", "1")]
        + [("delta", str(request.param)), ("score_reference", "1.5"), ("score_step", "2.5")]
    )
    return request.param


@pytest.mark.parametrize("case", range({cases}), indirect=True)
def test_case(case):
    assert os.environ.get("PLAIN_FAIL") != "1", f"case {{case}} failed"
"""
READER = """
import json, sys, time
from pathlib import Path
from banana_tests.trajectories.selection import Selection
from banana_tests.trajectories.sources import SourceOptions, load
out, source, cache, hub = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4:]
if hub:  # a hub id whose data set datasets has cached: the parquet files stand in for it
    import datasets
    real = datasets.load_dataset
    datasets.load_dataset = lambda repo, **kw: real(
        "parquet", data_files=hub[1:], cache_dir=hub[0], **kw)
wall, cpu = time.perf_counter(), time.process_time()
loaded = load(SourceOptions(source, cache_dir=cache), Selection())
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
assert not loaded.problems, loaded.problems[:3]
out.write_text(json.dumps({"records": len(loaded.records), "wall": wall, "cpu": cpu}))
"""


def without_variant(canonical: Path, target: Path) -> Path:
    """The canonical set's images (hard links) with metadata rows lacking `variant`."""
    if (target / "metadata.jsonl").is_file():
        return target
    rows = [json.loads(line) for line in (canonical / "metadata.jsonl").read_text().splitlines()]
    for row in rows:
        (target / row["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        os.link(canonical / row["file_name"], target / row["file_name"])
    lines = [json.dumps({k: v for k, v in r.items() if k != "variant"}) + "\n" for r in rows]
    (target / "metadata.jsonl").write_text("".join(lines))
    return target


def as_parquet(canonical: Path, target: Path, rows_per_file: int = 2000) -> Path:
    """The set as parquet files of image bytes, written as `datasets` writes an Image column
    (a bytes/path struct, row groups of 100, its features in the schema metadata)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if target.is_dir():
        return target
    target.mkdir(parents=True)
    rows = [json.loads(line) for line in (canonical / "metadata.jsonl").read_text().splitlines()]
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    features = {
        "image": {"_type": "Image"},
        "seed_image": {"dtype": "string", "_type": "Value"},
        "run": {"dtype": "int64", "_type": "Value"},
        "step": {"dtype": "int64", "_type": "Value"},
    }
    schema = pa.schema(
        [("image", image), ("seed_image", pa.string()), ("run", pa.int64()), ("step", pa.int64())],
        metadata={b"huggingface": json.dumps({"info": {"features": features}}).encode()},
    )
    for start in range(0, len(rows), rows_per_file):
        part = rows[start : start + rows_per_file]
        table = pa.table(
            {
                "image": [
                    {"bytes": (canonical / r["file_name"]).read_bytes(), "path": r["file_name"]} for r in part
                ],
                "seed_image": [r["seed_image"] for r in part],
                "run": [r["run"] for r in part],
                "step": [r["step"] for r in part],
            },
            schema=schema,
        )
        pq.write_table(table, target / f"train-{start // rows_per_file:05d}.parquet", row_group_size=100)
    return target


def build(work: Path, seeds: int) -> dict[str, Path]:
    canonical = work / f"with_variant_{seeds}"
    if not (canonical / "metadata.jsonl").is_file():
        generate(canonical, seeds=seeds, runs=RUNS, steps=STEPS, size=SIZE)
    return {
        LAYOUTS[0]: without_variant(canonical, work / f"no_variant_{seeds}"),
        LAYOUTS[1]: canonical,
        LAYOUTS[2]: as_parquet(canonical, work / f"parquet_{seeds}"),
    }


def median_of(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    repeat: int,
    before: Callable[[], None] = lambda: None,
    accept: tuple[int, ...] = (0, 1),
) -> tuple[float, float, float]:
    """(median wall s, median CPU s, peak MiB) of `repeat` fresh processes, `before` run before each."""
    runs = []
    for _ in range(repeat):
        before()
        runs.append(measure(argv, cwd, env, accept))
    return (
        statistics.median(w for w, _, _ in runs),
        statistics.median(c for _, c, _ in runs),
        max(m for *_, m in runs),
    )


def read_cost(
    source: Path | str, cache: Path, env: dict[str, str], hub: Sequence[str] = ()
) -> dict[str, float]:
    """One read in a fresh process: load()'s own wall and CPU seconds, timed in process, and the
    process's peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cost.json"
        argv = [sys.executable, "-c", READER, str(out), str(source), str(cache), *hub]
        *_, peak = measure(argv, Path(tmp), env)
        return {**json.loads(out.read_text()), "peak": peak}


def read_costs(
    sizes: Sequence[tuple[Path | str, Sequence[str]]], cache: Path, env: dict[str, str], repeat: int
) -> list[dict[str, float]]:
    """Per size, the median of `repeat` warm reads (a first one fills the image cache, the
    parquet index, and datasets' cache for the hub), the sizes taking turns."""
    for source, hub in sizes:
        read_cost(source, cache, env, hub)
    runs: list[list[dict[str, float]]] = [[] for _ in sizes]
    for _ in range(repeat):
        for costs, (source, hub) in zip(runs, sizes, strict=True):
            costs.append(read_cost(source, cache, env, hub))
    return [
        {
            "records": costs[0]["records"],
            "ms": statistics.median(1000 * c["cpu"] / c["records"] for c in costs),
            "wall": statistics.median(c["wall"] for c in costs),
            "peak": max(c["peak"] for c in costs),
        }
        for costs in runs
    ]


def ratio_line(label: str, ours: tuple[float, float, float], floor: tuple[float, float, float]) -> str:
    return (
        f"{label:<58} {ours[0]:>6.1f} s {ours[1]:>6.1f} s CPU {ours[2]:>5.0f} MiB | floor {floor[0]:>5.1f} s"
        f" {floor[1]:>5.1f} s CPU {floor[2]:>4.0f} MiB | wall {ours[0] / floor[0]:.2f}× CPU"
        f" {ours[1] / floor[1]:.2f}× memory {ours[2] / floor[2]:.2f}×"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build the sets into DIR and keep them (reused if present)")
    parser.add_argument("--repeat", type=int, default=3, help="collection runs per row, median (default 3)")
    parser.add_argument("--suite-repeat", type=int, default=1, help="whole-suite runs per row (default 1)")
    parser.add_argument("--xdist-repeat", type=int, default=1, help="-n 2 collections per row (default 1)")
    parser.add_argument("--no-suite", action="store_true", help="collection and reading only")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        sets = args.keep or work / "sets"
        sets.mkdir(parents=True, exist_ok=True)
        run = work / "run"  # an empty folder outside the clone, as a user's
        run.mkdir()
        (run / "scale_metrics.py").write_text(SHARPNESS_LOWER)
        (work / "plain").mkdir()
        (work / "plain" / "test_plain.py").write_text(FLOOR.format(cases=CASES))
        (work / "plain" / "conftest.py").write_text("")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(run)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        env["BANANA_CACHE_DIR"] = str(work / "image-cache")  # parquet image bytes, written once
        small, big = build(sets, SEEDS), build(sets, BIG_SEEDS)
        plain = [py, "-m", "pytest", "test_plain.py", *COMMON, "-p", "no:banana_tests"]
        suite = [py, "-m", "pytest", "--pyargs", "banana_tests", *COMMON, *SUITE_ARGS]
        passing, failing = "--metric=scale_metrics:sharpness_lower", "--metric=laplacian_variance"

        def suite_argv(data: Path, *extra: str) -> list[str]:
            return [*suite, f"--dataset={data}", *extra]

        for argv, cwd in (  # warm: bytecode, assertion rewriting, the image cache of the parquet set
            ([*plain, "--collect-only"], work / "plain"),
            *((suite_argv(data, passing, "--collect-only"), run) for data in small.values()),
        ):
            measure(argv, cwd, env)
        print(f"{CASES:,} cases; load average before: {os.getloadavg()[0]:.2f}", flush=True)
        floor = median_of([*plain, "--collect-only"], work / "plain", env, args.repeat)
        print(f"collection (median of {args.repeat}; wall, CPU, peak RSS)")
        for layout, data in small.items():
            ours = median_of(suite_argv(data, passing, "--collect-only"), run, env, args.repeat)
            print(ratio_line(f"  {layout}", ours, floor), flush=True)
        index = Path(env["BANANA_CACHE_DIR"]) / INDEX_FOLDER
        ours = median_of(
            suite_argv(small[LAYOUTS[2]], passing, "--collect-only"),
            run,
            env,
            args.repeat,
            before=lambda: shutil.rmtree(index, ignore_errors=True),
        )
        print(ratio_line(f"  {LAYOUTS[2]}, first read (no index)", ours, floor), flush=True)
        measure(suite_argv(small[LAYOUTS[2]], passing, "--collect-only"), run, env)  # the index again
        plain_n2 = [py, "-m", "pytest", "test_plain.py", *XDIST, "-p", "no:banana_tests", "-k", NOTHING]
        rx = args.xdist_repeat
        floor_n2 = median_of(plain_n2, work / "plain", env, rx, accept=(5,))
        print(f"collection under -n 2 (median of {rx}; CPU of all processes, peak of the largest)")
        for layout, data in small.items():
            argv = [py, "-m", "pytest", "--pyargs", "banana_tests", *XDIST, *SUITE_ARGS[:-2], "-k", NOTHING]
            ours = median_of([*argv, f"--dataset={data}", passing], run, env, rx, accept=(5,))
            print(ratio_line(f"  {layout}, -n 2", ours, floor_n2), flush=True)
        if not args.no_suite:
            print(f"whole suite, --pyargs banana_tests from {run.name}/ (median of {args.suite_repeat})")
            r = args.suite_repeat
            floor_pass = median_of([*plain, "--junitxml=p.xml"], work / "plain", env, r)
            fail_env = {**env, "PLAIN_FAIL": "1"}
            floor_fail = median_of([*plain, "--junitxml=p.xml", "--tb=line"], work / "plain", fail_env, r)
            for layout, data in small.items():
                ours = median_of(suite_argv(data, passing, "--junitxml=s.xml"), run, env, r)
                print(ratio_line(f"  {layout}, passing", ours, floor_pass), flush=True)
                ours = median_of(suite_argv(data, failing, "--junitxml=s.xml"), run, env, r)
                print(ratio_line(f"  {layout}, failing (floor --tb=line)", ours, floor_fail), flush=True)
        print(f"reading alone (sources.load in process, warm reads; CPU ms/record, median of {args.repeat})")
        hub_cache = work / "hf-datasets"
        readers: list[tuple[str, Path | str, Path | str]] = [(k, small[k], big[k]) for k in LAYOUTS]
        readers.append(("hub id (datasets' cache of the parquet files)", HUB, HUB))
        for label, few, many in readers:
            sizes: list[tuple[Path | str, Sequence[str]]] = []
            for source, parquet in ((few, small[LAYOUTS[2]]), (many, big[LAYOUTS[2]])):
                hub = [str(hub_cache / parquet.name), *map(str, sorted(parquet.glob("*.parquet")))]
                sizes.append((source, hub if source == HUB else ()))
            costs = read_costs(sizes, work / "image-cache", env, args.repeat)
            ms = [c["ms"] for c in costs]
            print(
                f"  {label:<48} {ms[0]:.3f} ms/record at {costs[0]['records']:,.0f}, {ms[1]:.3f} at"
                f" {costs[1]['records']:,.0f} ({ms[1] / ms[0]:.2f}×); peak {costs[0]['peak']:.0f} and"
                f" {costs[1]['peak']:.0f} MiB; wall {costs[0]['wall']:.2f} and {costs[1]['wall']:.2f} s",
                flush=True,
            )
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
