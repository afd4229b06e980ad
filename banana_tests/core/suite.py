"""The suite's session: its settings, the case plans read from the data set (`CasePlanning`)
and this process's scoring (`Scoring`); `SuiteState` holds one of each for the plugin and the
fixtures."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from banana_tests.cases import CaseKey
from banana_tests.scoring.batch_watch import BatchWatch, to_stderr
from banana_tests.scoring.hung import Hung
from banana_tests.core.devices import Device, gpu_driver_loaded, no_cuda
from banana_tests.core.metric_import import HUNG_IMPORTS, resolve_within
from banana_tests.core.planning import CasePlanning
from banana_tests.core.process_scoring import Scoring
from banana_tests.core.settings import Settings, settings_of
from banana_tests.session.terminal_line import terminal_line
from banana_tests.trajectories.plan import CasePlan
from banana_tests.trajectories.records import DataError
from banana_tests.verdicts.gaps import Gap
from banana_tests.verdicts.trend import Trend, TrendKey, measure
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric
from metrics_under_test.spec import MetricSpec

if TYPE_CHECKING:
    from banana_tests.scoring.oracle import Change
    from banana_tests.session.scorer import Scorer
    from banana_tests.trajectories.view import Trajectories


@dataclass
class SuiteState:
    """A suite run in this process: its settings, selected metrics, case plans and scoring."""

    settings: Settings
    metrics: dict[str, MetricSpec]
    planning: CasePlanning
    scoring: Scoring
    usage_error: str | None = None  # why the suite's cases could not be planned
    _prefetched: set[tuple[str, str]] = field(default_factory=set)  # (metric, seed image) groups scored

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        metrics: list[MetricSpec],
        say: Callable[[str], None] = to_stderr,
        hung: dict[str, Hung] | None = None,
        watch: BatchWatch | None = None,
    ) -> SuiteState:
        """`hung`: metrics whose import hung, and `watch` the one that imported the others."""
        by_name = {s.name: s for s in metrics}
        named = named_metrics(settings.metric, metrics)
        scoring = Scoring(settings, by_name, named, say, hung or {}, watch)
        return cls(settings, by_name, CasePlanning(settings, tuple(by_name), say=say), scoring)

    @classmethod
    def from_config(cls, config: pytest.Config) -> SuiteState:
        """The suite of `config`'s run; options it cannot use are a usage error."""
        settings = settings_of(config)
        try:
            metrics = selected_metrics(config)
        except (UnknownMetric, MetricError, ValueError) as exc:
            raise pytest.UsageError(str(exc)) from exc
        if settings.device.kind is Device.CUDA and not gpu_driver_loaded():
            raise pytest.UsageError(no_cuda(settings.device) + " (no GPU driver)")
        return cls.from_settings(
            settings, metrics, terminal_line(config), config.stash[HUNG], config.stash[WATCH]
        )

    def try_collect(self) -> list[CasePlan]:
        """`collect()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            return self.collect()
        except pytest.UsageError as exc:
            self.usage_error = str(exc)
            return []

    def collect(self) -> list[CasePlan]:
        """Prepare scoring, then read the data set and plan every case (once)."""
        self.scoring.prepare()
        self.planning.collect()
        return list(self.planning.plans.values())

    def try_prepare(self) -> None:
        """`prepare()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            self.scoring.prepare()
        except pytest.UsageError as exc:
            self.usage_error = str(exc)

    def trajectories(self) -> Trajectories:
        """The selected records as the public fixture gives them."""
        from banana_tests.trajectories.view import Trajectories

        self.collect()
        return Trajectories(
            self.planning.records,
            self.planning.problems,
            self.scoring.book.images,
            self.planning.source.source,
            self.settings.selection.variant,
            self.settings.selection.reference_step,
        )

    def score_cached(self, key: CaseKey) -> str:
        """JUnit `score_cached`: "true"/"false" when all/none of the case's scores came from the
        cache, else "cached/total" over its reference and step scores."""
        plan = self.planning.plans[key]
        records = [r for pair in plan.pairs for r in pair]
        hits = sum(self.scoring.scorer(key.metric).cached(records))
        return "true" if hits == len(records) else "false" if hits == 0 else f"{hits}/{len(records)}"

    def trend_of(self, key: TrendKey, scorer: Scorer) -> Trend:
        """The trend of one (metric, seed image) with that metric's scorer; its images are scored
        like the Δ cases'."""
        return scorer.guard(lambda: measure(self.planning.trends[key], scorer.spec, scorer.book))

    def gap(self, key: CaseKey, scorer: Scorer) -> Gap:
        """Δ for one case with that metric's scorer (the public Δ engine). The first case of its
        (metric, seed image) in this process also scores every record the group's other cases
        need, in one pass; later cases pass none, since the book scans all it is given
        (banana_tests.scoring.batching, whose order banana_tests.api follows too). The group is
        the scheduler's (banana_tests.scheduler.metric_groups): a worker scores the groups it
        runs, never another worker's, and the batches are the same serial and under xdist, so
        are the scores."""
        plan = self.planning.plans[key]
        if plan.error:
            raise DataError(plan.error)
        from banana_tests.scoring.batching import group_records

        upcoming = group_records((key.metric, key.seed_image), self._prefetched, self.planning.needs)
        return scorer.delta(plan.pairs, upcoming)

    def changes(self, key: CaseKey) -> list[Change]:
        """The degradation oracle's figures for the case's pairs, one per run."""
        return self.scoring.oracle.changes(self.planning.plans[key].pairs, self.planning.companions)


SELECTED = pytest.StashKey[list[MetricSpec]]()
HUNG = pytest.StashKey[dict[str, Hung]]()  # the selected metrics whose import hung
WATCH = pytest.StashKey[BatchWatch]()  # the run's watch: its scoring thread imports, builds and scores


def selected_metrics(config: pytest.Config) -> list[MetricSpec]:
    """`--metric` resolved once per session, within the load limit (see
    banana_tests.core.metric_import): xdist's `-n auto` asks for the count before
    pytest_configure, and resolving builds custom metrics given as factories."""
    if SELECTED not in config.stash:
        settings = settings_of(config)
        watch = BatchWatch(
            settings.heartbeat, settings.batch_timeout, terminal_line(config), settings.load_limit
        )
        known = getattr(config, "workerinput", {}).get(HUNG_IMPORTS)
        config.stash[SELECTED], config.stash[HUNG] = resolve_within(settings, watch, known)
        config.stash[WATCH] = watch
    return config.stash[SELECTED]


def named_metrics(text: str, metrics: list[MetricSpec]) -> frozenset[str]:
    """The metrics the user asked for by name or target; with `offline` or `all` in the list,
    the others came from those and may skip."""
    parts = {p.strip().lower() for p in text.split(",") if p.strip()}
    if not parts & {"offline", "all"}:
        return frozenset(s.name for s in metrics)
    return frozenset(s.name for s in metrics if s.name.lower() in parts)
