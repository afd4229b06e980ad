"""`banana-tests plan` (banana_tests.scheduler.sharding): a selection's images, CPU-hours and
shard count before any scoring, from the per-image costs `banana-tests metrics` shows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from banana_tests.scheduler.sharding import PIXELS_2K, Unit, plan_cost
from metrics_under_test.spec import cpu_seconds_2k
from tests.conftest import write_set


def units(metric: str, seeds: int, images: int, pixels: int = PIXELS_2K) -> list[Unit]:
    return [Unit(metric, f"s{i}", (pixels,) * images) for i in range(seeds)]


def test_hours_scale_with_pixels_and_unmeasured_metrics_have_none() -> None:
    plan = plan_cost(
        [*units("a", 2, 360), *units("b", 1, 720, PIXELS_2K // 4), *units("mine", 1, 10)],
        {"a": 10.0, "b": 20.0},
        job_hours=6,
        cores=2,
    )
    hours = {m.metric: (m.images, m.cpu_hours) for m in plan.metrics}
    assert hours == {"a": (720, 2.0), "b": (720, 1.0), "mine": (10, None)}  # 720 × 10 s; 720 × 20 s / 4
    assert plan.cpu_hours == 3.0
    assert plan.shards == 1 and plan.longest_shard_hours == 1.5  # 3 h over 2 workers, no unit over 1.5 h


def test_the_fewest_shards_whose_slowest_job_fits() -> None:
    """Six units of 2 h on 2-core jobs of 3 h: one job would take 6 h; two take 3 units each, 3 h
    over 2 workers, so two shards; dealt as --shard deals them."""
    plan = plan_cost(units("a", 6, 720), {"a": 10.0}, job_hours=3, cores=2)
    assert (plan.shards, plan.longest_shard_hours) == (2, 3.0)
    suggested = "suggested: --shard=K/2, 2 job(s) of 2 core(s) × 3 h; the longest shard takes about 3.00 h"
    assert plan.lines()[-1] == suggested
    assert (
        plan_cost(units("a", 6, 720), {"a": 10.0}, job_hours=2.5, cores=2).shards == 3
    )  # 2 units a job: 2 h


def test_a_unit_longer_than_a_job_is_named_not_sharded() -> None:
    plan = plan_cost(units("slow", 2, 720), {"slow": 100.0}, job_hours=6, cores=2)  # 20 h a unit
    last = plan.lines()[-1]
    assert last.startswith("suggested: no --shard count fits"), last
    for carried in ("6 h", "slow/s0", "20.00 CPU-hours", "--steps", "--runs", "docs/cluster.md"):
        assert carried in last, (carried, last)  # the limit, the unit, its hours, the ways out


def plan(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from banana_tests.cli import main; sys.exit(main())"
    command = [sys.executable, "-c", code, "plan", *args]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_plan_counts_the_images_the_suite_would_score_and_reads_their_sizes(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set", seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))
    done = plan(tmp_path, f"--dataset={data}", "--metric=brisque,piqe,laplacian_variance", "--steps=5,10")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "banana-tests plan: 3 metric(s), 2 seed image(s), 6 units"
    # steps 1, 5 and 10 of 2 runs of 2 seed images; each 128×96 image at brisque's 2K cost
    brisque = next(line for line in lines if line.startswith("brisque "))
    assert brisque.split()[1:3] == ["12", f"{cpu_seconds_2k()['brisque']:g}"]
    assert float(brisque.split()[3].replace("<", "").strip() or 0) < 0.01
    assert next(line for line in lines if line.startswith("laplacian_variance ")).split()[1:4] == [
        "12", "not", "measured",
    ]  # fmt: skip
    assert not (tmp_path / ".banana_cache").exists()

    assumed = plan(
        tmp_path, f"--dataset={data}", "--metric=brisque", "--steps=5,10", "--assume-size=20480x11520"
    )
    hours = 12 * 100 * cpu_seconds_2k()["brisque"] / 3600  # 100 times 2048×1152
    assert f"total: {hours:,.2f} CPU-hours of the metrics with a measured cost" in assumed.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--assume-size=big",), "--assume-size takes WxH in pixels (e.g. 2048x1152), got 'big'"),
        (("--job-hours=0",), "argument --job-hours: takes a number above 0 and at most 720, in digits 0-9"),
        (("--metric=nosuch",), "unknown metric 'nosuch'"),
    ],
)
def test_bad_options_exit_2_naming_them(tmp_path: Path, args: tuple[str, ...], says: str) -> None:
    data = write_set(tmp_path / "set", seeds=("alpha",), runs=(0,), steps=(1, 5))
    done = plan(
        tmp_path,
        f"--dataset={data}",
        "--steps=5",
        *(("--metric=piqe",) if "--metric" not in args[0] else ()),
        *args,
    )
    assert done.returncode == 2 and says in done.stderr, done.stderr


@pytest.mark.slow
def test_an_unreadable_image_is_one_line_naming_its_record_and_the_others_are_counted(tmp_path: Path) -> None:
    data = write_set(tmp_path / "set", seeds=("alpha",), runs=(0,), steps=(1, 5, 10))
    (data / "alpha/run0/step005.png").write_bytes(b"not a png")
    done = plan(tmp_path, f"--dataset={data}", "--metric=piqe", "--steps=5,10")
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"banana-tests plan: DataError: {data / 'metadata.jsonl'}:2 ({data / 'alpha/run0/step005.png'}): "
        "cannot read the image's size: no format PIL reads"
    ]
    assert re.search(r"^piqe +2 ", done.stdout, re.M), done.stdout  # steps 1 and 10 still counted
