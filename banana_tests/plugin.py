"""The pytest11 entry point: options, parametrization, JUnit properties, the terminal matrix.

It registers the public fixtures (banana_tests.public_fixtures) and parametrizes them; the
suite's own cases are built on them. It stays light: torch, pyiqa and the image stack are
imported only when a case first needs a score, never when pytest loads this plugin.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from banana_tests.cases import CASE_FIXTURE, TREND_FIXTURE
from banana_tests.public_fixtures import (  # the fixtures are registered by being here
    METRIC_FIXTURE,
    METRICS_FIXTURE,
    TRAJECTORIES_FIXTURE,
    banana_metric,
    banana_metrics,
    banana_trajectories,
)
from banana_tests.session.options import (
    add_data_options,
    add_gate_options,
    add_metric_options,
    spaced_path_options,
)
from banana_tests.session.reporter import MatrixReporter, _measured, _recorder, _run_properties
from banana_tests.session.scorer import Scorer
from banana_tests.session.snapshot_selection import INI, SnapshotSelection
from banana_tests.session.snapshot_selection import PARAM as SNAPSHOT_PARAM
from banana_tests.session.suite import STATE, SuiteState
from banana_tests.verdicts.trend import Trend
from banana_tests.verdicts.verdict import Verdict

__all__ = ["STATE", "banana_metric", "banana_metrics", "banana_trajectories"]

# Tests that need the data set read at collection, and those that need only the machine prepared.
SUITE_PARAMS = frozenset({CASE_FIXTURE, TREND_FIXTURE, SNAPSHOT_PARAM, "control_metric"})
DATA_FIXTURES = frozenset({TRAJECTORIES_FIXTURE})
SCORING_FIXTURES = frozenset({METRIC_FIXTURE, METRICS_FIXTURE})
TREND_MODULE = Path(__file__).resolve().parent / "test_trend.py"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("banana-tests", "banana-tests")
    add_data_options(group.addoption)
    add_metric_options(group.addoption)
    add_gate_options(group.addoption)
    parser.addini(INI, "where an installed suite writes score snapshots (default: banana_snapshots)")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        spaced = spaced_path_options(config.invocation_params.args)
        if spaced:
            raise pytest.UsageError(
                "write path options with '=': "
                + ", ".join(spaced)
                + ". pytest reads a path after a space as a test path and picks its rootdir from it, "
                "before banana-tests' options are known"
            )
    state = SuiteState.from_config(config)
    config.stash[STATE] = state
    config.pluginmanager.register(MatrixReporter(state, config), "banana-tests-matrix")
    config.pluginmanager.register(SnapshotSelection(state.metrics), "banana-tests-snapshots")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(XdistHooks(state), "banana-tests-xdist")
    if config.getoption("baseline"):
        from banana_tests.session.gating import BaselineGate

        gate = BaselineGate(Path(config.getoption("baseline")), config.getoption("strict_baseline"))
        config.pluginmanager.register(gate, "banana-tests-baseline")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """Module-level, since xdist asks before pytest_configure registers XdistHooks."""
    from banana_tests.scheduler.metric_groups import auto_workers

    return auto_workers(config)


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`banana_metric` over the selection, first (outermost), so every id starts with the metric
    and the scheduler can keep a metric's tests together. The suite's cases carry their metric
    in the same parameter: (metric, case) pairs, ids unchanged. A data set that cannot be read
    leaves the cases unplanned; collection then stops with that usage error (raised from a
    collector it would be a collection error, exit 2)."""
    state = metafunc.config.stash[STATE]
    names = metafunc.fixturenames
    if CASE_FIXTURE in names:
        keys = [p.key for p in state.try_collect()]
        pairs = [(k.metric, k) for k in keys]
        ids = [k.test_id for k in keys]
        metafunc.parametrize((METRIC_FIXTURE, CASE_FIXTURE), pairs, ids=ids, indirect=True, scope="function")
    elif TREND_FIXTURE in names:
        state.try_collect()
        trends = sorted(state.trends)
        metafunc.parametrize(
            (METRIC_FIXTURE, TREND_FIXTURE),
            [(k.metric, k) for k in trends],
            ids=[k.test_id for k in trends],
            indirect=True,
            scope="function",
        )
    elif METRIC_FIXTURE in names and not _parametrized_by_marker(metafunc, METRIC_FIXTURE):
        metrics = list(state.metrics)
        metafunc.parametrize(METRIC_FIXTURE, metrics, ids=metrics, indirect=True)


def _parametrized_by_marker(metafunc: pytest.Metafunc, name: str) -> bool:
    """The test chose its own values with `@pytest.mark.parametrize(name, ..., indirect=True)`."""
    for mark in metafunc.definition.iter_markers("parametrize"):
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",")]
        if name in names:
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run that collected any of the suite's tests first checks that its data and options can
    be used, so a bad `--dataset` is one usage error, not an error in every test."""
    state = config.stash[STATE]
    if any(
        SUITE_PARAMS & getattr(getattr(item, "callspec", None), "params", {}).keys()
        or DATA_FIXTURES & set(getattr(item, "fixturenames", ()))
        for item in items
    ):
        state.try_collect()
    elif any(SCORING_FIXTURES & set(getattr(item, "fixturenames", ())) for item in items):
        state.try_prepare()
    if state.usage_error is not None:
        raise pytest.UsageError(state.usage_error)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The suite's trend module is collected only under --trend."""
    if collection_path == TREND_MODULE and not config.getoption("trend"):
        return True
    return None


@pytest.fixture
def banana_trend(request: pytest.FixtureRequest, banana_metric: Scorer) -> Trend:
    """One (metric, seed image) trend measured with `banana_metric`, with its JUnit properties;
    skips when the metric cannot load (see banana_tests.session.scorer.load_or_skip)."""
    state = request.config.stash[STATE]
    plan = state.trends[request.param]
    return _measured(
        _recorder(request),
        plan.key.as_properties(),
        plan.reference_step,
        _run_properties(request.config),
        lambda: state.trend_of(plan.key, banana_metric),
    )


@pytest.fixture
def banana_case(request: pytest.FixtureRequest, banana_metric: Scorer) -> Verdict:
    """The case's verdict, Δ by `banana_metric.delta`, with its JUnit properties recorded; skips
    when the metric cannot load (see banana_tests.session.scorer.load_or_skip)."""
    state = request.config.stash[STATE]
    plan = state.plans[request.param]
    record_property = _recorder(request)
    verdict = _measured(
        record_property,
        plan.key.as_properties(),
        plan.reference_step,
        _run_properties(request.config),
        lambda: Verdict(plan.key, plan.reference_step, state.gap(plan.key, banana_metric)),
    )
    record_property("score_cached", state.score_cached(plan.key))
    return verdict


class XdistHooks:
    """Registered only when xdist is present, so the plugin works without it."""

    def __init__(self, state: SuiteState) -> None:
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log):  # type: ignore[no-untyped-def]
        if config.getoption("dist") != "load":
            return None
        from banana_tests.scheduler.metric_groups import MetricScheduling

        return MetricScheduling(config, log, tuple(self.state.metrics))
