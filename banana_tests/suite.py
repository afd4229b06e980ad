"""The suite's session state, in one place: what was asked, what the data holds, what was scored."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from banana_tests.cases import CaseKey
from banana_tests.data import EMBEDDED
from banana_tests.gaps import Gap, gap
from banana_tests.matrix import Matrix
from banana_tests.plan import CasePlan, parse_steps, plan_cases
from banana_tests.selection import Selection
from banana_tests.sources import SourceOptions, from_options, load, with_problems
from banana_tests.trajectories import DataError, Record
from banana_tests.trend import Trend, TrendKey, TrendPlan, measure, plan_trends
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import MetricSpec, UnknownMetric, resolve
from metrics_under_test.weights import stage

if TYPE_CHECKING:
    from banana_tests.scoring import ScoreBook


@dataclass
class SuiteState:
    """Options as resolved once per process, the case plans, and this process's scores."""

    metrics: dict[str, MetricSpec]
    source: SourceOptions
    selection: Selection
    per_run: bool
    device: str
    max_pixels: int
    image_budget_mib: int
    trend: bool = False
    cache_dir: Path | None = None  # None: --no-cache
    records: list[Record] = field(default_factory=list)  # the selected records, read at collection
    plans: dict[CaseKey, CasePlan] = field(default_factory=dict)
    trends: dict[TrendKey, TrendPlan] = field(default_factory=dict)
    matrix: Matrix = field(default_factory=Matrix)
    _book: ScoreBook | None = None
    _needs: dict[str, list[Record]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: pytest.Config) -> SuiteState:
        opt = config.getoption
        try:
            metrics = selected_metrics(config)
            source, selection = from_options(opt, EMBEDDED, parse_steps(opt("steps")))
        except (UnknownMetric, MetricError, ValueError) as exc:
            raise pytest.UsageError(str(exc)) from exc
        mirror = opt("weights_dir")
        if mirror:
            if not Path(mirror).is_dir():
                raise pytest.UsageError(f"--weights-dir {mirror}: no such directory")
            stage(Path(mirror), ((w.file, w.path) for s in metrics for w in s.weights))
        return cls(
            metrics={s.name: s for s in metrics},
            source=source,
            selection=selection,
            per_run=opt("aggregate") == "per-run",
            device=opt("device"),
            max_pixels=opt("max_pixels"),
            image_budget_mib=opt("image_budget"),
            trend=opt("trend"),
            cache_dir=None if opt("no_cache") else config.rootpath / opt("cache_dir"),
        )

    @property
    def variant(self) -> str:
        return self.selection.variant

    @property
    def reference_step(self) -> int:
        return self.selection.reference_step

    def collect(self) -> list[CasePlan]:
        """Read the data set and plan every case; a set that cannot be read stops collection."""
        if not self.plans:
            try:
                loaded = load(self.source, self.selection)
            except DataError as exc:
                raise pytest.UsageError(f"--dataset: {exc}") from exc
            if not loaded.records and not loaded.problems:
                raise pytest.UsageError(
                    f"--dataset {self.source.source}: "
                    + self.selection.describe_empty(loaded.variants, loaded.seed_images)
                )
            self.records = loaded.records
            metrics, steps = list(self.metrics), self.selection.steps

            def planned(per_run: bool) -> list[CasePlan]:
                plans = plan_cases(loaded.records, metrics, steps, self.reference_step, per_run)
                return with_problems(plans, loaded.problems, self.selection, metrics)

            cases = planned(self.per_run)
            self.plans = {p.key: p for p in cases}
            if self.trend:  # trends follow the run means, which are the cases unless per run
                trends = plan_trends(planned(False) if self.per_run else cases)
                self.trends = {t.key: t for t in trends}
        return list(self.plans.values())

    @property
    def book(self) -> ScoreBook:
        if self._book is None:
            from banana_tests.cache import ScoreCache
            from banana_tests.images import ImageStore
            from banana_tests.scoring import ScoreBook

            cache = ScoreCache(self.cache_dir) if self.cache_dir is not None else None
            images = ImageStore(self.image_budget_mib * 2**20, self.max_pixels)
            self._book = ScoreBook(resolve_device(self.device), images, cache=cache)
        return self._book

    def needs(self, metric: str) -> list[Record]:
        """Every record this metric's cases need, so they are scored in one pass."""
        if metric not in self._needs:
            self._needs[metric] = [
                r for p in self.plans.values() if p.key.metric == metric for r in p.records
            ]
        return self._needs[metric]

    def score_cached(self, key: CaseKey) -> str:
        """JUnit `score_cached`: "true"/"false" when all/none of the case's scores came from the
        cache, else "cached/total" over its reference and step scores."""
        plan = self.plans[key]
        records = [r for pair in plan.pairs for r in pair]
        hits = sum(self.book.cached(self.metrics[key.metric], records))
        return "true" if hits == len(records) else "false" if hits == 0 else f"{hits}/{len(records)}"

    def trend_of(self, key: TrendKey) -> Trend:
        """The trend of one (metric, seed image); its images are scored like the Δ cases'."""
        return measure(self.trends[key], self.metrics[key.metric], self.book)

    def gap(self, key: CaseKey) -> Gap:
        """Δ for one case; scores every image its metric needs here on first use."""
        plan = self.plans[key]
        if plan.error:
            raise DataError(plan.error)
        spec = self.metrics[key.metric]
        refs = self.book.scores(spec, [a for a, _ in plan.pairs], self.needs(key.metric))
        steps = self.book.scores(spec, [b for _, b in plan.pairs])
        return gap(spec.scale, refs, steps)


SELECTED = pytest.StashKey[list[MetricSpec]]()


def selected_metrics(config: pytest.Config) -> list[MetricSpec]:
    """`--metric` resolved once per session: xdist's `-n auto` asks for the count before
    pytest_configure, and resolving builds custom metrics given as factories."""
    if SELECTED not in config.stash:
        config.stash[SELECTED] = resolve(config.getoption("metric"))
    return config.stash[SELECTED]


def resolve_device(device: str) -> str:
    """`auto` → cuda when available; asking for cuda where there is none is an error. Without a
    GPU driver the answer is cpu without importing torch, so a fully cached run never loads it."""
    if device == "cpu" or (device == "auto" and not _gpu_driver()):
        return "cpu"
    import torch

    has_cuda = torch.cuda.is_available()
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    if device == "cuda" and not has_cuda:
        raise RuntimeError("--device cuda: CUDA is not available on this machine")
    return device


def _gpu_driver() -> bool:
    """An NVIDIA or ROCm kernel driver is loaded; torch cannot see a GPU without one."""
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/kfd").exists() or os.name != "posix"
