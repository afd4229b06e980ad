"""The suite's reporting in a run: each case's recorded properties and the terminal matrix.

MatrixReporter builds the matrix and the trend summary from test reports (the same path serial
and under xdist); the helpers record a case's identity and figures as JUnit properties.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Generator
from typing import TypeVar

import pytest

from banana_tests.session.ownership import STATE
from banana_tests.session.snapshot_selection import PARAM as SNAPSHOT_PARAM
from banana_tests.session.suite import SuiteState
from banana_tests.verdicts.matrix import Cell, TrendTally
from banana_tests.verdicts.trend import Trend
from banana_tests.verdicts.verdict import Verdict, VerdictFailure

RUN = pytest.StashKey[dict[str, str]]()
Measured = TypeVar("Measured", Verdict, Trend)
VERDICT_LINE = "banana_verdict"  # a failing verdict's report attribute: its one-line message
PYTEST_OUTCOMES = frozenset({"passed", "failed", "skipped"})  # a report's final outcomes


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
        if not final or not report.user_properties or report.outcome not in PYTEST_OUTCOMES:
            return  # pytest-rerunfailures reports each retried attempt as "rerun": not a verdict
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
