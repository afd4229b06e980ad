"""What a run will cost before it starts: each metric's images, its CPU-hours from the per-image
costs `banana-tests metrics` shows, and how many `--shard=K/N` jobs fit a job's time budget.

A cost is the measured CPU seconds of a 2048×1152 image (`metrics_under_test.spec`, one
thread, as the suite scores), scaled by each image's pixels: an estimate, high for metrics that resize every
input to a fixed size (MANIQA, HyperIQA, NIMA). Metrics without a measured cost (custom metrics,
the VLMs, which want a GPU) are listed with their images and no hours. Shards are dealt the way
`--shard` deals them (banana_tests.scheduler.shards), and a (metric, seed image) unit runs on one
worker, so a unit longer than a job cannot be split by sharding at all: the plan says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from banana_tests.scheduler.shards import Shard
from banana_tests.scheduler.units import Group

PIXELS_2K = 2048 * 1152


@dataclass(frozen=True)
class Unit:
    """One (metric, seed image) group: its images' pixel counts."""

    metric: str
    seed_image: str
    pixels: tuple[int, ...]

    @property
    def scope(self) -> str:
        return Group(self.metric, self.seed_image).scope


@dataclass(frozen=True)
class MetricCost:
    metric: str
    images: int
    seconds_2k: float | None  # per 2048×1152 image; None: not measured
    cpu_hours: float | None


@dataclass(frozen=True)
class CostPlan:
    metrics: tuple[MetricCost, ...]
    shards: int  # the suggested N of --shard=K/N
    longest_shard_hours: float  # wall hours of the slowest job at `cores` workers
    largest_unit: tuple[str, float] | None  # (metric/seed image, CPU-hours) of the longest unit
    job_hours: float
    cores: int

    @property
    def cpu_hours(self) -> float:
        return sum(m.cpu_hours or 0.0 for m in self.metrics)

    def lines(self) -> list[str]:
        width = max([len("metric"), *(len(m.metric) for m in self.metrics)])
        out = [f"{'metric':<{width}}  {'images':>9}  {'CPU s/2K image':>14}  {'CPU-hours':>10}"]
        for m in self.metrics:
            cost = "not measured" if m.seconds_2k is None else f"{m.seconds_2k:g}"
            hours = "–" if m.cpu_hours is None else _hours_text(m.cpu_hours)
            out.append(f"{m.metric:<{width}}  {m.images:>9,}  {cost:>14}  {hours:>10}")
        out.append(f"total: {_hours_text(self.cpu_hours)} CPU-hours of the metrics with a measured cost")
        unmeasured = [m.metric for m in self.metrics if m.seconds_2k is None]
        if unmeasured:
            out.append(
                f"not measured: {', '.join(unmeasured)} (a VLM wants a GPU; time a few images with "
                "`banana-tests score` for a custom metric)"
            )
        too_long = self.largest_unit is not None and self.largest_unit[1] > self.job_hours
        if too_long and self.largest_unit is not None:
            unit, unit_hours = self.largest_unit
            out.append(
                f"suggested: no --shard count fits jobs of {self.job_hours:g} h: {unit} alone takes "
                f"{_hours_text(unit_hours)} CPU-hours on one worker; split it by --steps or --runs, or "
                "score it on a cluster (docs/cluster.md)"
            )
        else:
            longest = _hours_text(self.longest_shard_hours)
            out.append(
                f"suggested: --shard=K/{self.shards}, {self.shards} job(s) of {self.cores} core(s) × "
                f"{self.job_hours:g} h; the longest shard takes about {longest} h"
            )
        return out


def plan_cost(
    units: Sequence[Unit], seconds_2k: Mapping[str, float], job_hours: float, cores: int
) -> CostPlan:
    """The cost of `units` and the fewest shards whose slowest job fits `job_hours` at `cores`
    workers (as many as there are units when none does)."""
    hours = {u.scope: _hours(u, seconds_2k.get(u.metric)) for u in units}
    metrics = []
    for metric in dict.fromkeys(u.metric for u in units):
        own = [u for u in units if u.metric == metric]
        per = seconds_2k.get(metric)
        total = None if per is None else sum(hours[u.scope] for u in own)
        metrics.append(MetricCost(metric, sum(len(u.pixels) for u in own), per, total))
    groups = {Group(u.metric, u.seed_image): u.scope for u in units}
    shards, longest = 1, _longest(groups, hours, 1, cores)
    while longest > job_hours and shards < len(groups):
        shards += 1
        longest = _longest(groups, hours, shards, cores)
    largest = max(
        ((u.scope.removeprefix("metric:"), hours[u.scope]) for u in units), key=lambda x: x[1], default=None
    )
    return CostPlan(tuple(metrics), shards, longest, largest, job_hours, cores)


def _hours_text(hours: float) -> str:
    return "< 0.01" if 0 < hours < 0.01 else f"{hours:,.2f}"


def _hours(unit: Unit, seconds_2k: float | None) -> float:
    return 0.0 if seconds_2k is None else seconds_2k * sum(unit.pixels) / PIXELS_2K / 3600


def _longest(groups: Mapping[Group, str], hours: Mapping[str, float], count: int, cores: int) -> float:
    """The slowest of `count` shards' wall hours: its units over `cores` workers, never less than
    its longest unit (a unit runs on one worker)."""
    slowest = 0.0
    for index in range(1, count + 1):
        mine = [hours[groups[g]] for g in Shard(index, count).deal(groups)]
        slowest = max(slowest, max(sum(mine) / cores, max(mine, default=0.0)))
    return slowest
