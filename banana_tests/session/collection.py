"""What the suite does to a collection: each item's case, `--baseline`'s expected failures, and
`--shard=K/N`'s split with the run's plan for `banana-tests report`'s completeness check.

Under `--baseline`, cases that failed before are expected failures, so CI only flags what
changed. A baseline case that fails again is XFAIL; a new failure is a real failure; a baseline
case that now passes is XPASS, and a failure under `--strict-baseline`, so the baseline gets
refreshed. Δ cells, trend cases, control degradations and invariance checks are all gated: a
baseline written from a run makes that run pass. Errors (bad data) and snapshot drift are never
expected: fix those.

The split runs in the plugin's late collection hook (banana_tests.plugin.pytest_collection_split):
after pytest's own `-k`/`-m` and the families' deselection (other metrics' snapshots), and before a
CI splitter's (pytest-split's group, whose plugin is registered after the plugin module) and
`--lf`'s narrowing (cacheprovider's hook wraps every other). Which shard a test falls to does not
depend on what was collected: the units dealt are the selection's
(banana_tests.core.suite.selection_units), so `--lf` (which narrows even the collection itself) and
`-k` leave each test in its shard. The tests this run leaves to other jobs, `--shard`'s or a
splitter's, are recorded as split off (banana_tests.reports.merge_checks), so merged files show a
case that no job ran; those `--lf` leaves out because they passed are not. The tests the run's own
selection left out (`-k`, `-m`, `--deselect`, `--lf`) are recorded apart, as its narrowing: they are
read off each collected file before `--lf` filters it, so a merge of reruns alone is known to be
partial; a test file `--lf` does not collect at all is counted, and so is a suite module the run's
test paths never reached (`--pyargs banana_tests.families.degradation.test_degradation`,
`--ignore`): a run of part of the suite is partial like one narrowed by `-k`."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from banana_tests.cases import CASE_FIXTURE, METRIC_FIXTURE, CaseKey, junit_id
from banana_tests.families.family import SessionPlugin
from banana_tests.families.family_list import FAMILIES, RECORD_FAMILIES
from banana_tests.reports.merge_checks import Narrowing
from banana_tests.scheduler.sharding import Group, Shard
from banana_tests.verdicts.baseline import BaselineError, Known, load_baseline


def item_key(item: pytest.Item) -> Known | None:
    """The suite case an item runs, from its parameters; None for any other test."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    params = callspec.params
    key = params.get(CASE_FIXTURE)
    if isinstance(key, CaseKey):
        return key
    fixtures = getattr(item, "fixturenames", ())
    return next((k for f in RECORD_FAMILIES if (k := f.item_key(params, fixtures)) is not None), None)


PLUGIN_PREFIX = "banana-tests-family-"
"""A family's plugin is registered in a suite run as this prefix and the family's name."""


def family_plugins(config: pytest.Config) -> list[SessionPlugin]:
    """The plugins the registered families added to this run, in the families' order."""
    found = (config.pluginmanager.get_plugin(PLUGIN_PREFIX + family.name) for family in FAMILIES)
    return [plugin for plugin in found if isinstance(plugin, SessionPlugin)]


VERDICT_FAILURES = (pytest.fail.Exception, AssertionError)
"""How a verdict fails: the suite's through `pytest.fail` (fail_verdict), a user's own test on
`banana_case` by an assertion. Any other error is no verdict a baseline can expect."""


class BaselineGate:
    """Marks the suite's cases that the baseline lists with a (strict or not) xfail."""

    def __init__(self, path: Path, strict: bool) -> None:
        try:
            self.keys = load_baseline(path)
        except BaselineError as exc:
            raise pytest.UsageError(f"--baseline: {exc}") from exc
        self.path = path
        self.strict = strict

    def expected_failure(self, key: Known) -> bool:
        """A baseline Δ entry without a run covers every run of its cell."""
        return key in self.keys or (isinstance(key, CaseKey) and replace(key, run=None) in self.keys)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            key = item_key(item)
            if key is not None and self.expected_failure(key):
                reason = f"fails in baseline {self.path.name}"
                mark = pytest.mark.xfail(raises=VERDICT_FAILURES, strict=self.strict, reason=reason)
                item.add_marker(mark)

    def pytest_report_header(self) -> str:
        mode = "strict: a fixed case fails" if self.strict else "a fixed case is XPASS"
        return f"banana-tests baseline: {self.path} ({len(self.keys)} expected failures; {mode})"


@dataclass
class RunPlan:
    """The JUnit ids of the tests before the split and of those this run planned to run, and of
    those the shard kept that `--lf` then left out as passed before."""

    before_split: list[str] = field(default_factory=list)
    planned: list[str] = field(default_factory=list)
    passed_before: set[str] = field(default_factory=set)
    collected: list[str] = field(default_factory=list)  # node ids, before any selection
    reached: set[Path] = field(default_factory=set)  # the test files collection got to
    narrowing: Narrowing = field(default_factory=Narrowing)

    @property
    def split_off(self) -> list[str]:
        kept = set(self.planned) | self.passed_before
        return [case for case in self.before_split if case not in kept]


def unit_of(item: pytest.Item, metrics: tuple[str, ...]) -> Group | None:
    """The unit an item falls in, read off its typed parameters: its case's or trend's (metric,
    seed image), its metric alone for a metric's other tests; None for a test on none of
    `metrics`. The xdist controller, which sees node ids only, reads the same units off the ids
    (banana_tests.scheduler.metric_groups.group_of)."""
    key = item_key(item)
    metric: object
    seed_image: str | None
    if isinstance(key, CaseKey):
        metric, seed_image = key.metric, key.seed_image
    elif key is not None:
        metric, seed_image = key.metric, key.unit_image
    else:
        callspec = getattr(item, "callspec", None)
        metric = callspec.params.get(METRIC_FIXTURE) if callspec is not None else None
        if metric is None:  # a family's test without a case record (a snapshot case)
            metric = next(filter(None, (p.metric_of(item) for p in family_plugins(item.config))), None)
        seed_image = None
    return Group(metric, seed_image) if isinstance(metric, str) and metric in metrics else None


def unreached_suite_modules(config: pytest.Config, reached: set[Path]) -> list[Path]:
    """The suite's test modules a whole run of these options collects (the rule of
    banana_tests.session.ownership) that this run never got to, when it got to any: its
    test paths or node ids named only part of the suite."""
    from banana_tests.session.ownership import left_out, suite_modules

    modules = [p for p in suite_modules() if not left_out(p, config)]
    if not any(module in reached for module in modules):
        return []
    return [module for module in modules if module not in reached]


def narrowing(config: pytest.Config, plan: RunPlan, collected: list[str]) -> Narrowing:
    """What the run's own selection left out of the tests it collected (neither planned nor
    split off), which of its options or test paths did, and how many test files `--lf` did not
    collect or the test paths did not name."""
    kept = {*plan.planned, *plan.split_off}
    left_out = tuple(dict.fromkeys(case for case in collected if case not in kept))
    lf = config.pluginmanager.get_plugin("lfplugin")  # pytest's own count, in its status line
    skipped_by_lf = int(getattr(lf, "_skipped_files", 0)) if config.getoption("lf", False) else 0
    unreached = unreached_suite_modules(config, plan.reached)
    uncollected = skipped_by_lf + len(unreached)
    if not left_out and not uncollected:
        return Narrowing()
    keyword, markexpr = (getattr(config.option, name, "") for name in ("keyword", "markexpr"))
    node_ids = any("::" in arg for arg in config.args)
    given = [
        (f"the test paths {' '.join(config.args)}", unreached or node_ids),
        ("--lf", config.getoption("lf", False)),
        (f"-k {keyword!r}", keyword),
        (f"-m {markexpr!r}", markexpr),
        ("--deselect", getattr(config.option, "deselect", None)),
    ]
    by = ", ".join(name for name, value in given if value) or "the run's selection"
    return Narrowing(left_out, by, uncollected)


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
            mine, dealt = self.shard.deal(units), set(units)
            keeps = []
            for item in items:
                unit = unit_of(item, self.metrics)
                keeps.append(unit in mine if unit in dealt else self.shard.holds(item.nodeid))
            drop = [item for item, keep in zip(items, keeps, strict=True) if not keep]
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = [item for item, keep in zip(items, keeps, strict=True) if keep]
        self.kept = [item.nodeid for item in items]

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Generator[None, object, object]:
        """Every test a collector found, before `--lf` (whose wrapper is outside this one)
        filters its file's tests; the tests a family deselects as no part of the run (other
        metrics' score snapshots) are not counted."""
        report = yield
        if isinstance(collector, pytest.File):
            self.plan.reached.add(collector.path.resolve())
        plugins = family_plugins(collector.config)
        for found in getattr(report, "result", None) or ():
            if isinstance(found, pytest.Item) and not any(p.extra(found) for p in plugins):
                self.plan.collected.append(found.nodeid)
        return report

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        config = session.config
        self.plan.planned = self.ids(config, [item.nodeid for item in session.items])
        if config.getoption("lf", False) and config.cache is not None:
            failed = config.cache.get("cache/lastfailed", {})
            self.plan.passed_before = set(self.ids(config, [n for n in self.kept if n not in failed]))
        self.plan.narrowing = narrowing(config, self.plan, self.ids(config, self.plan.collected))

    def pytest_report_header(self) -> str | None:
        return None if self.shard is None else f"banana-tests shard: {self.shard}"
