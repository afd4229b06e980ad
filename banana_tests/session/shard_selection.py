"""`--shard=K/N` at collection, and the run's plan for `banana-tests report`'s completeness check.

The split runs in the plugin's late collection hook (banana_tests.plugin.pytest_collection_split): after
pytest's own `-k`/`-m` and the snapshot selection, and before a CI splitter's (pytest-split's
group, whose plugin is registered after the plugin module) and `--lf`'s narrowing (cacheprovider's
hook wraps every other). Which shard a test falls to does not depend on what was collected: the
units dealt are the selection's (`selection_units`), so `--lf` (which narrows even the collection
itself) and `-k` leave each test in its shard. The tests this run leaves to other jobs,
`--shard`'s or a splitter's, are recorded as split off (banana_tests.reports.completeness), so
merged files show a case that no job ran; those `--lf` leaves out because they passed are not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from banana_tests.reports.completeness import junit_id
from banana_tests.scheduler.shards import Shard

if TYPE_CHECKING:
    from banana_tests.scheduler.metric_groups import Group
    from banana_tests.session.suite import SuiteState


@dataclass
class RunPlan:
    """The JUnit ids of the tests before the split and of those this run planned to run, and of
    those the shard kept that `--lf` then left out as passed before."""

    before_split: list[str] = field(default_factory=list)
    planned: list[str] = field(default_factory=list)
    passed_before: set[str] = field(default_factory=set)

    @property
    def split_off(self) -> list[str]:
        kept = set(self.planned) | self.passed_before
        return [case for case in self.before_split if case not in kept]


def selection_units(state: SuiteState) -> list[Group]:
    """The units `--shard` deals (banana_tests.scheduler.shards): every selected metric on every
    seed image of the selection, and each metric's other tests."""
    from banana_tests.scheduler.metric_groups import Group

    seeds = dict.fromkeys(
        [*(r.seed_image for r in state.planning.records), *(k.seed_image for k in state.planning.plans)]
    )
    return [*(Group(m, s) for m in state.metrics for s in seeds), *(Group(m) for m in state.metrics)]


def is_empty_share(planned: list[str], split_off: list[str]) -> bool:
    """A shard that was dealt none of the tests collected: legitimately empty, not a mistake."""
    return not planned and bool(split_off)


class ShardSelection:
    """Deselects the tests of other shards and records the run's plan."""

    def __init__(self, shard: Shard | None, metrics: tuple[str, ...]) -> None:
        self.shard = shard
        self.metrics = metrics
        self.plan = RunPlan()
        self.kept: list[str] = []  # node ids the shard kept, for --lf's

    def ids(self, config: pytest.Config, nodeids: list[str]) -> list[str]:
        prefix = getattr(config.option, "junitprefix", None)
        return [junit_id(nodeid, prefix) for nodeid in nodeids]

    def split(self, config: pytest.Config, items: list[pytest.Item], units: list[Group]) -> None:
        """From the plugin's late collection hook (banana_tests.plugin.pytest_collection_split)."""
        self.plan.before_split = self.ids(config, [item.nodeid for item in items])
        if self.shard is not None:
            from banana_tests.scheduler.metric_groups import group_of

            mine, dealt = self.shard.deal(units), set(units)
            keeps = []
            for item in items:
                group = group_of(item.nodeid, self.metrics)
                keeps.append(group in mine if group in dealt else self.shard.holds(item.nodeid))
            drop = [item for item, keep in zip(items, keeps, strict=True) if not keep]
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = [item for item, keep in zip(items, keeps, strict=True) if keep]
        self.kept = [item.nodeid for item in items]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        config = session.config
        self.plan.planned = self.ids(config, [item.nodeid for item in session.items])
        if config.getoption("lf", False) and config.cache is not None:
            failed = config.cache.get("cache/lastfailed", {})
            self.plan.passed_before = set(self.ids(config, [n for n in self.kept if n not in failed]))

    def pytest_report_header(self) -> str | None:
        return None if self.shard is None else f"banana-tests shard: {self.shard}"
