"""A suite run in one process: its settings, the case plans read from the data set
(`CasePlanning`) and this process's scoring (`Scoring`); `SuiteState` holds one of each for the
plugin, the fixtures and the api (banana_tests.session.run_state builds it from pytest's config)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from banana_tests.cases import CaseKey
from banana_tests.core.planning import CasePlanning
from banana_tests.core.process_scoring import Scoring
from banana_tests.core.settings import Settings
from banana_tests.core.usage_error import UsageError
from banana_tests.scoring.metric_calls import BatchWatch, Hung, to_stderr
from banana_tests.trajectories.case_plans import CasePlan
from metrics_under_test.registry import MetricRequest
from metrics_under_test.spec import MetricSpec

if TYPE_CHECKING:
    from banana_tests.scoring.oracle import Change
    from banana_tests.trajectories.selection import Trajectories


@dataclass
class SuiteState:
    """A suite run in this process: its settings, selected metrics, case plans and scoring."""

    settings: Settings
    metrics: dict[str, MetricSpec]
    planning: CasePlanning
    scoring: Scoring
    usage_error: str | None = None  # why the suite's cases could not be planned
    prefetched: set[tuple[str, str]] = field(default_factory=set)  # (metric, seed image) groups scored

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
        named = named_metrics(settings.metrics, metrics)
        scoring = Scoring(settings, by_name, named, say, hung or {}, watch)
        return cls(settings, by_name, CasePlanning(settings, tuple(by_name), say=say), scoring)

    def try_collect(self) -> list[CasePlan]:
        """`collect()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            return self.collect()
        except UsageError as exc:
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
        except UsageError as exc:
            self.usage_error = str(exc)

    def trajectories(self) -> Trajectories:
        """The selected records as the public fixture gives them."""
        from banana_tests.trajectories.selection import Trajectories

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
        hits = sum(self.scoring.book.cached(self.metrics[key.metric], records))
        return "true" if hits == len(records) else "false" if hits == 0 else f"{hits}/{len(records)}"

    def changes(self, key: CaseKey) -> list[Change]:
        """The degradation oracle's figures for the case's pairs, one per run."""
        return self.scoring.oracle.changes(self.planning.plans[key].pairs, self.planning.companions)


def named_metrics(requests: Sequence[MetricRequest], metrics: list[MetricSpec]) -> frozenset[str]:
    """The metrics the user asked for by name or target; with a group (`offline`, `all`) among
    the requests, the others came from it and may skip."""
    if not any(r.group is not None for r in requests):
        return frozenset(s.name for s in metrics)
    parts = {r.text.lower() for r in requests}
    return frozenset(s.name for s in metrics if s.name.lower() in parts)
