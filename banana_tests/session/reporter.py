"""The suite's reporting in a run: the live matrix, the families' sections and the terminal's words.

A case writes its `CaseRecord` (banana_tests.verdicts.record) as JUnit properties
(banana_tests.session.case_fixtures). MatrixReporter reads the records back from the test
reports (the same path serial and under xdist) into the live matrix and each family's cases, writes
the run's facts and plan once as testsuite properties (banana_tests.core.run_facts,
banana_tests.reports.merge_checks), through pytest's writer of testsuite properties in the process
that writes the file (each xdist worker hands the controller its device, plan and selection
through `workeroutput`), and adds its own summary sections. The plan, and the facts that take
long to find, are taken when collection ends: a run stopped early (Ctrl-C, SIGTERM) writes its
file at once, with the plan that tells `banana-tests report` what did not run.

A failing verdict is filed under its own category, `missed` (MISSED), so pytest's FAILURES
section leaves it to the suite's one-line-per-verdict section. pytest colours a run red only for
the categories `failed` and `error`, any other one yellow, and `-rf` lists only `failed`: a run of
misses alone ended yellow while exiting 1, its misses absent from `-rf`. `MissSummary` teaches the
run's terminal reporter the category, and undoes it when the run ends (an in-process pytester run
leaves the next run's reporter as pytest made it):

- the run's colour (the final line, the progress) is red once a case missed;
- "N missed" is red in the final line and in `-rf`;
- `-rf` lists each miss, `MISSED <test id> - <its figure>`, beside pytest's `FAILED` lines.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import pytest
from _pytest import terminal

from banana_tests.cases import CaseKey, CaseKind, junit_id
from banana_tests.core.machine import metric_libraries
from banana_tests.core.run_facts import device_of, run_facts
from banana_tests.core.suite import SuiteState
from banana_tests.families.degradation.matrix_sections import artifact_lines, separability_lines
from banana_tests.families.degradation.saturation import saturations, warn
from banana_tests.families.family import Case
from banana_tests.families.family_list import RECORD_FAMILIES, family_of, section_of
from banana_tests.reports.merge_checks import Narrowing
from banana_tests.scheduler.metric_groups import group_of
from banana_tests.scoring.returned_scores import environment_fault
from banana_tests.session.collection import ShardSelection, family_plugins, is_empty_share, item_key
from banana_tests.session.scorer import HungOutcome, NoVerdict
from banana_tests.verdicts.matrix import Matrix, Outcome
from banana_tests.verdicts.record import CaseRecord, RecordError
from banana_tests.verdicts.verdict import CASE_OUTCOME, VERDICT_LINE, keeps_traceback

Status = tuple[str, dict[str, bool]]  # a verbose word and its markup
PYTEST_OUTCOMES = frozenset({"passed", "failed", "skipped"})  # a report's final outcomes
# MISSED, the terminal's category for a failing verdict: pytest counts it apart from "failed", so
# its FAILURES section (a header per failure and a scan of every passed report for each: seconds
# at 5,940 failing cases) leaves it to the suite's own section (banana_tests.session.reporter).


INVALID = "invalid"
"""The terminal's category for a Δ case whose step did not change (scoring.oracle)."""


def no_verdict(item: pytest.Item, exc: BaseException) -> bool:
    """Whether what `item` raised leaves it without a verdict (see the makereport hook)."""
    if isinstance(exc, HungOutcome):
        return True
    mine = family_plugins(item.config)
    suite_case = item_key(item) is not None or any(p.metric_of(item) is not None for p in mine)
    return suite_case and (isinstance(exc, NoVerdict) or environment_fault(exc))


@dataclass(frozen=True)
class KnownPlan:
    """The run's plan as the process that writes the JUnit file knows it: its own at the end of
    its collection; under xdist the first worker's tests as it reported them collected, until
    that worker's whole plan (split off, narrowing) arrives with its end. `has_cases`: the plan
    holds suite cases, so the file gets the plan and the run's facts even if none ran."""

    planned: tuple[str, ...]
    split_off: tuple[str, ...] = ()
    narrowing: Narrowing = field(default_factory=Narrowing)
    has_cases: bool = False


class MatrixReporter:
    """Builds the matrix and the families' sections from the cases' records and prints them, with
    what a run's header and deselections need explained."""

    def __init__(self, state: SuiteState, config: pytest.Config, shards: ShardSelection) -> None:
        self.state = state
        self.shards = shards  # holds the run's plan
        self.config = config
        self.matrix = Matrix()
        self.family_cases: dict[CaseKind, list[Case]] = {}  # each family's cases, for its section
        self.records = 0  # reports that carried a case record
        self.unreadable: list[str] = []  # "nodeid: why" of records that could not be read
        self.verdict_lines: list[str] = []  # failing verdicts, printed one line each
        # under --tb=long or --full-trace, their reports: printed with their tracebacks instead
        self.verdict_reports: list[pytest.TestReport] = []
        self.xpassed: list[str] = []  # cases the baseline expects to fail that passed, by test name
        self.tracebacks = keeps_traceback(config)
        # an xdist worker's reports go to the controller, which builds the matrix it prints
        self.builds_matrix = not hasattr(config, "workerinput")
        self.worker_devices: dict[str, str] = {}  # xdist worker → the device it scored on
        self.known_plan: KnownPlan | None = None
        self.whole_worker_plan = False  # known_plan is a finished worker's
        self.worker_selection: list[tuple[str, str]] | None = None  # the first worker's
        self.libraries: str | None = None  # the run facts' metric libraries, found at collection

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """A control or invariance case's identity, or a family's named at collection (a
        search's), is known from its parameters: recorded now, so a case that errors in setup
        still names itself."""
        for item in items:
            key = item_key(item)
            if key is None or isinstance(key, CaseKey):
                continue
            family = family_of(key.kind)
            if family and family.named_at_collection:
                item.user_properties.extend(CaseRecord(key).identity())

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The distributions each metric loads (its cache identity) are found before the first
        case, whose time limit they must not spend; an xdist worker was handed its controller's.
        The run's plan is known now, after the shard selection has made it (trylast)."""
        runs = bool(session.items) and not session.config.option.collectonly
        if runs:
            self.state.scoring.loaded_libraries()
        plan = self.shards.plan
        has_cases = runs and any(item_key(item) is not None for item in session.items)
        self._known(KnownPlan(tuple(plan.planned), tuple(plan.split_off), plan.narrowing, has_cases))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """xdist's controller, which collects nothing, takes the first worker's collected tests
        as the plan (every worker collects the same ones)."""
        if self.known_plan is None and ids:
            prefix = getattr(self.config.option, "junitprefix", None)
            metrics = tuple(self.state.metrics)
            has_cases = any(group_of(nodeid, metrics) is not None for nodeid in ids)
            self._known(KnownPlan(tuple(junit_id(nodeid, prefix) for nodeid in ids), has_cases=has_cases))

    def _known(self, plan: KnownPlan) -> None:
        """The plan known at the end of collection, and, in the process that writes the JUnit
        file, the facts that take seconds to find (a metric's library versions: 20 s on a loaded
        machine), so a stopped run need not find them before SIGKILL follows SIGTERM."""
        self.known_plan = plan
        if plan.has_cases and self.builds_matrix:
            self.libraries = metric_libraries(self.state.metrics.values())

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A failing verdict's report carries its one line (travels with the report under xdist).
        A case without a verdict is an error in the terminal, JUnit and the reports, as when a
        fixture meets it: its call report is filed as a failed setup, and a baseline's xfail
        (pytest's wrapper, inside this one) is taken back. So is a hung metric's case wherever
        it hung, and a suite case that met a NoVerdict or an environment's fault."""
        report = yield
        excinfo = call.excinfo
        if report.when == "call" and excinfo is not None and no_verdict(item, excinfo.value):
            report.when, report.outcome = "setup", "failed"
            vars(report).pop("wasxfail", None)
        line = None if excinfo is None else getattr(excinfo.value, VERDICT_LINE, None)
        if isinstance(line, str) and report.failed:
            setattr(report, VERDICT_LINE, line)
        own = None if excinfo is None else getattr(excinfo.value, CASE_OUTCOME, None)
        if isinstance(own, str) and report.skipped:
            setattr(report, CASE_OUTCOME, own)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, Status] | None:
        """A failing verdict counts as `missed`, not `failed` (see MISSED): the hook pytest
        offers a plugin for its own outcomes; the exit status still says the run failed."""
        if report.when == "call" and report.failed and hasattr(report, VERDICT_LINE):
            return MISSED, "F", ("MISSED", {"red": True})
        own = getattr(report, CASE_OUTCOME, None) if report.skipped else None
        if own == Outcome.UNRESOLVED:
            return Outcome.UNRESOLVED.value, "U", ("UNRESOLVED", {"yellow": True})
        if own == Outcome.INVALID:
            return INVALID, "I", ("NOT A VALID TRIAL", {"yellow": True})
        return None

    def pytest_report_header(self, config: pytest.Config) -> str | None:
        from banana_tests.scheduler.worker_count import AUTO_NOTE

        return config.stash.get(AUTO_NOTE, None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        final = report.when == "call" or (report.when == "setup" and not report.passed)
        if not final or not self.builds_matrix or not report.user_properties:
            return
        if report.outcome not in PYTEST_OUTCOMES:
            return  # pytest-rerunfailures reports each retried attempt as "rerun": not a verdict
        try:
            record = CaseRecord.read({name: str(value) for name, value in report.user_properties})
        except RecordError as exc:
            self.unreadable.append(f"{report.nodeid}: {exc}")
            return
        if record is None:
            return  # another test's case, whatever properties it records
        self.records += 1
        outcome = Outcome.ERROR if report.when == "setup" and report.failed else Outcome(report.outcome)
        if report.passed and hasattr(report, "wasxfail"):  # pytest counts it, and names it nowhere
            self.xpassed.append(report.nodeid.rpartition("::")[2])
        if outcome is Outcome.FAILED and hasattr(report, VERDICT_LINE):
            self.verdict_lines.append(getattr(report, VERDICT_LINE))
            if self.tracebacks:
                self.verdict_reports.append(report)
        if isinstance(record.key, CaseKey):
            self.matrix.add(record.cell(outcome).as_verdict())
        elif family_of(record.kind) is not None:
            case = Case(record.key, outcome.value, dict(record.properties()))
            self.family_cases.setdefault(record.kind, []).append(case)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """A finished xdist worker's device, for the run facts (the controller's hook)."""
        output = getattr(node, "workeroutput", None) or {}
        if WORKER_DEVICE in output:
            self.worker_devices[str(node.gateway.id)] = output[WORKER_DEVICE]
        if WORKER_PLAN in output and not self.whole_worker_plan:
            planned, split_off, (left_out, by, uncollected), has_cases = output[WORKER_PLAN]
            narrowing = Narrowing(tuple(left_out), by, uncollected)
            self.known_plan = KnownPlan(tuple(planned), tuple(split_off), narrowing, has_cases)
            self.whole_worker_plan = True
        if WORKER_SELECTION in output and self.worker_selection is None:
            self.worker_selection = [(name, value) for name, value in output[WORKER_SELECTION]]

    def plan(self) -> tuple[list[str], list[str]]:
        """This run's plan (planned, split off), as far as it is known (`KnownPlan`)."""
        known = self.known_plan
        return ([], []) if known is None else (list(known.planned), list(known.split_off))

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, None, None]:
        """The run's facts as testsuite properties, before pytest's JUnit writer writes the file;
        with the tests it planned and split off (banana_tests.reports.merge_checks); only when the
        run planned or had suite cases, or is a shard dealt none. An xdist worker hands its
        device and plan to the controller. A shard dealt none exits 0, not pytest's 5 (no tests),
        once every other plugin has set its status (syrupy sets it from the status the hook was
        given)."""
        output = getattr(session.config, "workeroutput", None)
        known = self.known_plan or KnownPlan(())
        if output is not None:
            output[WORKER_DEVICE] = device_of(self.state)
            left = known.narrowing
            output[WORKER_PLAN] = (
                *self.plan(),
                (list(left.left_out), left.by, left.uncollected),
                known.has_cases,
            )
            from banana_tests.core.run_facts import selection_facts

            output[WORKER_SELECTION] = selection_facts(self.state)
            return (yield)
        empty_share = is_empty_share(*self.plan())
        writes = self.records or empty_share or known.has_cases
        add = junit_suite_property(session.config) if writes else None
        if add is not None:
            from banana_tests.reports.merge_checks import plan_properties

            facts = run_facts(self.state, self.worker_devices, self.worker_selection, self.libraries)
            for name, value in [*facts, *plan_properties(*self.plan(), known.narrowing)]:
                add(name, value)
        result = yield
        if empty_share and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK
        return result

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        planned, split_off = self.plan()
        if is_empty_share(planned, split_off):
            write(
                f"banana-tests: shard {self.shards.shard} was dealt none of the {len(split_off)} tests "
                "selected (more shards than units); its plan is in the JUnit file, and it exits 0"
            )
        if self.verdict_lines and terminalreporter.config.option.tbstyle != "no":
            terminalreporter.section(f"banana-tests: {len(self.verdict_lines)} failing verdicts", red=True)
            if self.verdict_reports:  # --tb=long or --full-trace: each with its traceback
                for report in self.verdict_reports:
                    terminalreporter.write_sep("_", report.head_line or report.nodeid, red=True)
                    report.toterminal(terminalreporter.config.get_terminal_writer())
            else:
                for line in self.verdict_lines:
                    write(line)
        lines = self.matrix.render(terminalreporter.config.get_terminal_writer().fullwidth)
        if lines:
            terminalreporter.section("banana-tests failure matrix")
            for line in [*self.matrix.legend(), *lines]:
                write(line)
        by_artifact = artifact_lines(self.matrix)
        if by_artifact:
            terminalreporter.section("banana-tests misses by artifact")
            for line in by_artifact:
                write(line)
        separable = separability_lines(self.matrix)
        if separable:
            terminalreporter.section("banana-tests separability (AUC of step-k against clean, per metric)")
            for line in separable:
                write(line)
        for found in saturations(self.matrix):
            write(f"banana-tests: warning: {found.message()}", yellow=True)
            warn(found)
        for family in RECORD_FAMILIES:
            cases = self.family_cases.get(family.kind, [])
            section = section_of(family) if cases else None
            shown = section.terminal(cases) if section else []
            if section and shown:
                terminalreporter.section(section.title)
                for line in shown:
                    write(line)
        if self.xpassed:
            baseline = self.state.settings.baseline
            write(
                f"banana-tests: {len(self.xpassed)} xpassed: expected to fail by the baseline"
                f"{'' if baseline is None else f' {baseline}'}, they now pass (refresh it with "
                "`banana-tests report JUNIT_XML --write-baseline=FILE`):",
                yellow=True,
            )
            for name in self.xpassed:
                write(f"  XPASS {name}")
        if self.unreadable:
            write(f"banana-tests: {len(self.unreadable)} case record(s) unreadable, left out of the matrix:")
            for line in self.unreadable:
                write(f"  {line}")
        for plugin in family_plugins(self.config):  # what the families' plugins say last
            for line, warning in plugin.summary():
                write(line, yellow=warning)


WORKER_DEVICE = "banana_device"
"""The device an xdist worker scored on, in its `workeroutput` for the controller's run facts."""
WORKER_PLAN = "banana_plan"
"""An xdist worker's plan (planned, split off): every worker collects the same tests."""
WORKER_SELECTION = "banana_selection"
"""An xdist worker's selection facts (banana_tests.core.run_facts): the data it read."""


def junit_suite_property(config: pytest.Config) -> Callable[[str, object], None] | None:
    """pytest's writer of `<testsuite>` properties in this process, if it writes a JUnit file:
    the method its public `record_testsuite_property` fixture hands a test. Only the process
    that writes the file has one (the xdist controller, not its workers)."""
    for plugin in config.pluginmanager.get_plugins():
        add = getattr(plugin, "add_global_property", None)
        if callable(add):
            return add  # type: ignore[no-any-return]
    return None


MISSED = "missed"
"""The terminal's category for a failing verdict."""
RED = "red"
FAILED = "failed"  # pytest's category that `-rf` lists


class MissSummary:
    """Installed on the run's terminal reporter as soon as there is one (`attach`: pytest registers
    it after the plugin's pytest_configure), removed at pytest_unconfigure. An xdist worker has
    none: its controller prints the summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reporter: pytest.TerminalReporter | None = None
        self.colour_before: str | None = terminal._color_for_type.get(MISSED)

    def attach(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.reporter is not None:
            return
        self.reporter = reporter
        main_colour: Callable[[bool], str] = reporter._determine_main_color
        short_summary: Callable[[], None] = reporter.short_test_summary

        def determine_main_color(unknown_type_seen: bool) -> str:
            return RED if reporter.stats.get(MISSED) else main_colour(unknown_type_seen)

        def short_test_summary() -> None:
            """pytest's short summary, its `f` listing the misses after the failures: they are
            shown as `failed` for the call only, and pytest's stats are left as they were."""
            misses: list[Any] = reporter.stats.get(MISSED, [])
            if not misses or "f" not in reporter.reportchars:
                return short_summary()
            created = FAILED not in reporter.stats
            failed: list[Any] = reporter.stats.setdefault(FAILED, [])
            before = len(failed)
            failed.extend(misses)
            try:
                return short_summary()
            finally:
                del failed[before:]
                if created:
                    del reporter.stats[FAILED]

        setattr(reporter, "_determine_main_color", determine_main_color)  # noqa: B010
        setattr(reporter, "short_test_summary", short_test_summary)  # noqa: B010
        terminal._color_for_type[MISSED] = RED

    def pytest_sessionstart(self) -> None:
        self.attach()

    def pytest_unconfigure(self) -> None:
        if self.reporter is None:
            return
        for name in ("_determine_main_color", "short_test_summary"):
            if name in vars(self.reporter):
                delattr(self.reporter, name)
        if self.colour_before is None:
            terminal._color_for_type.pop(MISSED, None)
        else:
            terminal._color_for_type[MISSED] = self.colour_before


def install_miss_summary(config: pytest.Config) -> None:
    summary = MissSummary(config)
    config.pluginmanager.register(summary, "banana-tests-miss-summary")
    summary.attach()  # a run adopted at collection has its reporter already
