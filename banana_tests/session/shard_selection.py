"""`--shard=K/N` at collection, and the run's plan for `banana-tests report`'s completeness check.

The split runs in the plugin's late collection hook (banana_tests.plugin.pytest_collection_split): after
pytest's own `-k`/`-m` and the snapshot selection, and before a CI splitter's (pytest-split's
group, whose plugin is registered after the plugin module), so what it sees is the run before it
is split. The tests this run leaves to other jobs, `--shard`'s or a splitter's, are recorded as
split off (banana_tests.reports.completeness), so merged files show a case that no job ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from banana_tests.reports.completeness import junit_id
from banana_tests.scheduler.shards import Shard


@dataclass
class RunPlan:
    """The JUnit ids of the tests before the split and of those this run planned to run."""

    before_split: list[str] = field(default_factory=list)
    planned: list[str] = field(default_factory=list)

    @property
    def split_off(self) -> list[str]:
        kept = set(self.planned)
        return [case for case in self.before_split if case not in kept]


class ShardSelection:
    """Deselects the tests of other shards and records the run's plan."""

    def __init__(self, shard: Shard | None, metrics: tuple[str, ...]) -> None:
        self.shard = shard
        self.metrics = metrics
        self.plan = RunPlan()

    def ids(self, config: pytest.Config, items: list[pytest.Item]) -> list[str]:
        prefix = getattr(config.option, "junitprefix", None)
        return [junit_id(item.nodeid, prefix) for item in items]

    def split(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """From the plugin's late collection hook (banana_tests.plugin.pytest_collection_split)."""
        self.plan.before_split = self.ids(config, items)
        if self.shard is None:
            return
        keeps = self.shard.keeps([item.nodeid for item in items], self.metrics)
        drop = [item for item, keep in zip(items, keeps, strict=True) if not keep]
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = [item for item, keep in zip(items, keeps, strict=True) if keep]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.plan.planned = self.ids(session.config, session.items)

    def pytest_report_header(self) -> str | None:
        return None if self.shard is None else f"banana-tests shard: {self.shard}"
