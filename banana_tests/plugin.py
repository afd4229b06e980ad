"""The pytest11 entry point: options, parametrization, JUnit properties, the terminal matrix.

It registers the public fixtures (banana_tests.public_fixtures) and parametrizes them; the
suite's own cases are built on them. It stays light: torch, pyiqa and the image stack are
imported only when a case first needs a score, never when pytest loads this plugin.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TypeVar

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
from banana_tests.session.scorer import Scorer
from banana_tests.session.snapshot_selection import INI, SnapshotSelection
from banana_tests.session.snapshot_selection import PARAM as SNAPSHOT_PARAM
from banana_tests.session.suite import STATE, SuiteState
from banana_tests.verdicts.matrix import Cell, TrendTally
from banana_tests.verdicts.trend import Trend
from banana_tests.verdicts.verdict import Verdict, VerdictFailure

__all__ = ["STATE", "banana_metric", "banana_metrics", "banana_trajectories"]

RUN = pytest.StashKey[dict[str, str]]()
Measured = TypeVar("Measured", Verdict, Trend)
# Tests that need the data set read at collection, and those that need only the machine prepared.
SUITE_PARAMS = frozenset({CASE_FIXTURE, TREND_FIXTURE, SNAPSHOT_PARAM, "control_metric"})
DATA_FIXTURES = frozenset({TRAJECTORIES_FIXTURE})
SCORING_FIXTURES = frozenset({METRIC_FIXTURE, METRICS_FIXTURE})
TREND_MODULE = Path(__file__).resolve().parent / "test_trend.py"
VERDICT_LINE = "banana_verdict"  # a failing verdict's report attribute: its one-line message


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


def _measured(
    record_property: Callable[[str, object], None],
    identity: dict[str, str],
    reference_step: int,
    run: dict[str, str],
    measure: Callable[[], Measured],
) -> Measured:
    """Record the case's identity first (so a skip or error still names it), then measure it
    (the scorer skips or fails a metric that cannot load) and record its figures."""
    for name, value in {**identity, "reference_step": str(reference_step), **run}.items():
        record_property(name, value)
    result = measure()
    for name, value in result.properties().items():
        record_property(name, value)
    return result


def _recorder(request: pytest.FixtureRequest) -> Callable[[str, object], None]:
    """`record_property` without its fixture, which warns on every case under junit_family
    xunit2 (pytest's default in a user's project); the properties are written all the same."""
    return lambda name, value: request.node.user_properties.append((name, value))


def _run_properties(config: pytest.Config) -> dict[str, str]:
    """What the cases record about their run, for the report's Run table. xdist workers cannot
    record suite properties, so the first case of each process carries them and `report` carries
    them forward (banana_tests.reports.junit): on every case they were a sixth of its JUnit."""
    if RUN in config.stash:
        return config.stash[RUN]
    from banana_tests.session.suite import resolve_device
    from banana_tests.session.versions import package_versions

    state = config.stash[STATE]
    config.stash[RUN] = {}
    return {
        "variant": state.variant,
        "dataset": state.source.source,
        "versions": package_versions(),
        "device": resolve_device(state.device),
        "command": shlex.join(["pytest", *config.invocation_params.args]),
    }


class MatrixReporter:
    """Builds the matrix and the trend summary from test reports (the same path serial and under
    xdist) and prints them, with what a run's header and deselections need explained."""

    def __init__(self, state: SuiteState, config: pytest.Config) -> None:
        self.state = state
        self.config = config
        self.trends = TrendTally()
        self.other_snapshots = 0  # snapshot cases of metrics not selected, deselected at collection
        self.verdicts: list[pytest.TestReport] = []  # failing verdicts, printed one line each
        self.all_failed: list[pytest.TestReport] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A verdict's failure message in JUnit (and the short summary) is its Δ alone: the whole
        line is the failure's text already, and saying it twice doubled each failing case's XML."""
        report = yield
        excinfo = call.excinfo
        crash = getattr(report.longrepr, "reprcrash", None)
        if excinfo is not None and isinstance(excinfo.value, VerdictFailure) and crash is not None:
            crash.message = f"VerdictFailure: {excinfo.value.summary}"
            if not excinfo.value.pytrace:
                setattr(report, VERDICT_LINE, excinfo.value.msg)  # travels with the report under xdist
        return report

    def pytest_report_header(self, config: pytest.Config) -> str | None:
        from banana_tests.scheduler.metric_groups import AUTO_NOTE

        return config.stash.get(AUTO_NOTE, None)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            metric = getattr(getattr(item, "callspec", None), "params", {}).get(SNAPSHOT_PARAM)
            self.other_snapshots += metric is not None and metric not in self.state.metrics

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        final = report.when == "call" or (report.when == "setup" and not report.passed)
        if not final or not report.user_properties:
            return
        props = {name: str(value) for name, value in report.user_properties}
        if "metric" not in props:
            return
        outcome = "error" if report.when == "setup" and report.failed else report.outcome
        if props.get("kind") == "trend":
            self.trends.add(props, outcome)
        elif "step" in props:
            self.state.matrix.add(Cell.from_properties(outcome, props).as_verdict())

    def pytest_sessionfinish(self) -> None:
        """Runs inside the terminal reporter's sessionfinish, before its FAILURES section: the
        verdicts' failures leave that section (each would take a header line, and pytest scans
        every passed report per failure: seconds at 5,940 failing cases) for one line each in
        the summary below, and come back before the short summary and the counts."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        failed = terminal.stats.get("failed", [])
        verdicts = [r for r in failed if hasattr(r, VERDICT_LINE)]
        if verdicts:
            self.verdicts, self.all_failed = verdicts, failed
            terminal.stats["failed"] = [r for r in failed if not hasattr(r, VERDICT_LINE)]

    def pytest_terminal_summary(self, terminalreporter) -> None:  # type: ignore[no-untyped-def]
        if self.verdicts:
            terminalreporter.stats["failed"] = self.all_failed
            if terminalreporter.config.option.tbstyle != "no":
                terminalreporter.section(f"banana-tests: {len(self.verdicts)} failing verdicts", red=True)
                for report in self.verdicts:
                    terminalreporter.write_line(getattr(report, VERDICT_LINE))
        matrix = self.state.matrix
        lines = matrix.render(terminalreporter.config.get_terminal_writer().fullwidth)
        write = terminalreporter.write_line
        if lines:
            terminalreporter.section("banana-tests failure matrix")
            for line in [*matrix.legend(), *lines]:
                write(line)
        trends = self.trends.lines()
        if trends:
            terminalreporter.section("banana-tests trends")
            for line in trends:
                write(line)
        if self.other_snapshots:
            write(
                f"banana-tests: {self.other_snapshots} deselected = score-snapshot cases of metrics not "
                "in --metric (their snapshots are kept, not run)"
            )


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
