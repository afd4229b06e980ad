"""The pytest11 entry point: options, parametrization, JUnit properties, the terminal matrix.

It registers the public fixtures (banana_tests.public_fixtures) and parametrizes them; the
suite's own cases are built on them. It is a guest in every other pytest run of the
environment: each hook below returns at once unless the run is the suite's (see
banana_tests.session.ownership), and importing it loads neither torch, pyiqa nor the image
stack, nor the suite's data, scoring and reporting code.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from banana_tests.cases import CASE_FIXTURE, METRIC_FIXTURE, CaseKey, FamilyKey
from banana_tests.core.suite_options import add_namespaced, suite_options
from banana_tests.public_fixtures import METRICS_FIXTURE, TRAJECTORIES_FIXTURE

# the public fixtures are registered by being here
from banana_tests.public_fixtures import banana_metric as banana_metric
from banana_tests.public_fixtures import banana_metrics as banana_metrics
from banana_tests.public_fixtures import banana_trajectories as banana_trajectories
from banana_tests.session.ownership import (
    GIVEN,
    STATE,
    add_free_aliases,
    adopted,
    asks_for_suite,
    given_options,
    left_out,
    spaced_path_options,
)
from banana_tests.session.run_state import adopt

if TYPE_CHECKING:  # the rest of the suite is imported once a run is the suite's
    from banana_tests.core.suite import SuiteState
    from banana_tests.families.degradation import Verdict
    from banana_tests.families.family import RecordFamily

__all__ = [  # the hooks: pytest finds them by name; the public fixtures are registered above
    "pytest_addoption",
    "pytest_collection_finish",
    "pytest_collection_modifyitems",
    "pytest_collection_split",
    "pytest_configure",
    "pytest_configure_node",
    "pytest_generate_tests",
    "pytest_ignore_collect",
    "pytest_load_initial_conftests",
    "pytest_runtest_setup",
    "pytest_unconfigure",
    "pytest_xdist_auto_num_workers",
    "pytest_xdist_make_scheduler",
]

# Tests that need the data set read at collection (besides those parametrized by a family's own
# `params`), and those that need only the machine prepared.
DATA_FIXTURES = frozenset({TRAJECTORIES_FIXTURE})
SCORING_FIXTURES = frozenset({METRIC_FIXTURE, METRICS_FIXTURE})
# A test that requests any of these makes the run the suite's.
SUITE_FIXTURES = SCORING_FIXTURES | DATA_FIXTURES | {CASE_FIXTURE}
SPELLINGS = pytest.StashKey[tuple[str, ...]]()  # every spelling of a suite option this run owns
USAGE_ERROR = pytest.StashKey[str]()  # why a run adopted at collection cannot be the suite's


def pytest_addoption(parser: pytest.Parser) -> None:
    """Every option as `--banana-*`: a name no other plugin or conftest uses; the families' ini keys."""
    from banana_tests.families.family_list import FAMILIES

    add_namespaced(parser.getgroup("banana-tests", "banana-tests").addoption, suite_options())
    for family in FAMILIES:
        for key, help_text in family.ini.items():
            parser.addini(key, help_text)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    """Once the initial conftests have added their options, the short spellings (`--metric`)
    that none of them or any plugin took become aliases (see banana_tests.core.suite_options).
    `args` holds the command line after addopts: the suite options given are kept for
    `asks_for_suite`."""
    loaded = yield
    options = suite_options()
    owned = (*(o.long for o in options), *add_free_aliases(parser, options))
    early_config.stash[SPELLINGS] = owned
    early_config.stash[GIVEN] = tuple(given_options(args, owned))
    return loaded


def pytest_configure(config: pytest.Config) -> None:
    """A run whose command line asks for the suite is adopted now; any other waits for
    collection to show a test on the suite's fixtures. Under xdist the controller plans the
    cases now (`_xdist_controller`)."""
    if not hasattr(config, "workerinput"):
        owned: tuple[str, ...] = config.stash.get(SPELLINGS, ())
        spaced = spaced_path_options(config.invocation_params.args, owned)
        if spaced:
            raise pytest.UsageError(
                "write path options with '=': "
                + ", ".join(spaced)
                + ". pytest reads a path after a space as a test path and picks its rootdir from it, "
                "before banana-tests' options are known"
            )
    if asks_for_suite(config):
        if config.getoption("banana_suite"):
            _add_suite_path(config)
        state = adopt(config)
        if _xdist_controller(config):
            from banana_tests.session.run_state import collected

            say, state.planning.say = state.planning.say, _quiet  # gw0 says the plan's notes
            try:
                collected(state)  # its usage error, one line and exit 4, before any worker starts
            finally:
                state.planning.say = say


def _quiet(line: str) -> None:
    """The controller's planning says nothing: its workers plan again, and gw0 says it."""


def _xdist_controller(config: pytest.Config) -> bool:
    """This process is xdist's controller: it collects nothing, so the data set and the options
    are checked here, as a serial run's collection checks them; a worker's usage error would
    reach the controller as a crashed node (INTERNALERROR, exit 3)."""
    return not hasattr(config, "workerinput") and config.getoption("dist", "no") != "no"


def _add_suite_path(config: pytest.Config) -> None:
    """`--banana-suite`: the installed suite's folder joins the run's paths, unless one given
    already lies in it. `--pyargs tests` would resolve to whatever top-level `tests` package
    site-packages holds (icecream's, pyiqa's), not the user's folder; a path does not."""
    suite = Path(__file__).resolve().parent
    given = [Path(str(a).split("::", 1)[0]).resolve() for a in config.args]
    if not any(p == suite or p.is_relative_to(suite) for p in given):
        config.args.append(str(suite))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` for a suite run (see banana_tests.scheduler.worker_count); xdist asks before
    pytest_configure. None, xdist's own count, for any other run. First: the hook takes the first
    answer, and xdist's own implementation answers for every run; which of two plugins pluggy asks
    first otherwise follows the order their distributions were found in (a venv's layout)."""
    if not asks_for_suite(config):
        return None
    from banana_tests.scheduler.worker_count import AUTO_NOTE, this_machine
    from banana_tests.session.run_state import selected_metrics
    from metrics_under_test.protocol import MetricError
    from metrics_under_test.spec import peak_bytes

    try:
        metrics = [spec.name for spec in selected_metrics(config)]
    except (LookupError, ValueError, MetricError):
        metrics = []  # the session's usage error says why, once it starts
    workers, note = this_machine(peak_bytes(), metrics)
    if note is not None:
        config.stash[AUTO_NOTE] = note
    return workers


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # type: ignore[no-untyped-def]  # xdist's WorkerController
    """The metrics whose import hung in the controller hang in no worker: each is told, so none
    imports them again (banana_tests.core.metric_import). Each is handed the distributions
    every metric loads, found once here (banana_tests.scoring.score_identity)."""
    state = adopted(node.config)
    if state is None:
        return
    from banana_tests.core.suite import LOADED_LIBRARIES

    node.workerinput[LOADED_LIBRARIES] = state.scoring.loaded_libraries()
    if not state.scoring.hung:
        return
    from banana_tests.core.metric_import import HUNG_IMPORTS

    node.workerinput[HUNG_IMPORTS] = {name: hung.reason for name, hung in state.scoring.hung.items()}


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """A metric's tests spread over the workers by seed image, in a suite run under `--dist load`
    (xdist's default for `-n`); any other run keeps xdist's own scheduler."""
    state = adopted(config)
    if state is None or config.getoption("dist") != "load":
        return None
    from banana_tests.scheduler.metric_groups import MetricScheduling, units_of

    return MetricScheduling(config, log, tuple(state.metrics), units_of(planned_keys(config, state)))


def planned_keys(config: pytest.Config, state: SuiteState) -> list[CaseKey | FamilyKey]:
    """The keys the workers will parametrize the suite's cases with: the Δ plans, and each chosen
    family's cases on them. Only the set is read (no metric's extras, weights or device are
    checked); none when it cannot be planned: the workers say why."""
    from banana_tests.core.suite import UsageError
    from banana_tests.families.family_list import RECORD_FAMILIES

    try:
        state.planning.collect()
    except UsageError:
        return []
    keys: list[CaseKey | FamilyKey] = [p.key for p in state.planning.plans.values()]
    for family in RECORD_FAMILIES:
        if _chosen(config, family):
            keys += family.cases(state.planning.run_means())
    return keys


def _chosen(config: pytest.Config, family: RecordFamily) -> bool:
    """Whether this run collects the family's cases: always without an option, else when given."""
    return family.option is None or config.getoption(family.option, None) not in (None, False)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> Generator[None, None, None]:
    """A test on the suite's fixtures makes the run the suite's. `banana_metric` is parametrized
    over the selection, first (outermost), so every id starts with the metric and the scheduler
    can keep a metric's tests together; the suite's case ids start with their metric too (see
    `_parametrize_cases`). The hook wraps every other one: a user who parametrizes
    `banana_metric` in any of pytest's ways (a marker, an overriding fixture's params, their own
    pytest_generate_tests) replaces the selection (banana_tests.session.case_fixtures). A data
    set that cannot be read leaves the cases unplanned; collection then stops with that usage
    error (raised from a collector it would be a collection error, exit 2)."""
    names = metafunc.fixturenames
    ours = any(n in SUITE_FIXTURES for n in names)
    state = _adopt_at_collection(metafunc.config) if ours else adopted(metafunc.config)
    if state is None:
        return (yield)
    if CASE_FIXTURE in names:
        from banana_tests.session.case_fixtures import parametrize_cases

        parametrize_cases(metafunc, [p.key for p in state.try_collect()], CASE_FIXTURE)
    elif not ours:
        _parametrize_family(metafunc, state)
    elif METRIC_FIXTURE in names:
        from banana_tests.session.case_fixtures import default_metrics

        with default_metrics(metafunc, list(state.metrics)):
            return (yield)
    return (yield)


def _parametrize_family(metafunc: pytest.Metafunc, state: SuiteState) -> None:
    """A family's test on its own parameter (the trend's `banana_trend`), a case per key the family
    plans on the selection (banana_tests.families.family.Family.cases); none without its option."""
    from banana_tests.families.family_list import RECORD_FAMILIES
    from banana_tests.session.case_fixtures import parametrize_cases

    for family in RECORD_FAMILIES:
        if family.fixture is not None and family.fixture in metafunc.fixturenames:
            state.try_collect()
            keys = family.cases(state.planning.run_means()) if _chosen(metafunc.config, family) else []
            parametrize_cases(metafunc, keys, family.fixture)
            return


def _adopt_at_collection(config: pytest.Config) -> SuiteState | None:
    """`adopt`, keeping its usage error to raise once collection is done."""
    if USAGE_ERROR in config.stash:
        return None
    try:
        return adopt(config)
    except pytest.UsageError as exc:
        config.stash[USAGE_ERROR] = str(exc)
        return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A run that collected any of the suite's tests first checks that its data and options can
    be used, so a bad `--dataset` is one usage error, not an error in every test."""
    if USAGE_ERROR in config.stash:
        raise pytest.UsageError(config.stash[USAGE_ERROR])
    state = adopted(config)
    if state is None:
        return
    from banana_tests.families.family_list import FAMILIES

    suite_params = frozenset[str]().union(*(family.params for family in FAMILIES))
    if any(
        suite_params & getattr(getattr(item, "callspec", None), "params", {}).keys()
        or DATA_FIXTURES & set(getattr(item, "fixturenames", ()))
        for item in items
    ):
        state.try_collect()
    elif any(SCORING_FIXTURES & set(getattr(item, "fixturenames", ())) for item in items):
        state.try_prepare()
    if state.usage_error is not None:
        raise pytest.UsageError(state.usage_error)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_split(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Late in collection: the families' plugins deselect the tests no part of the run (other
    metrics' snapshot cases), then `--shard`'s part
    of the run is kept and the run's plan noted (banana_tests.session.collection). Late
    hooks run in the order their plugins were registered: this module's comes after pytest's
    `-k` and syrupy's, and before pytest-split's, whose plugin is registered at configure, and
    before `--lf`'s narrowing (a wrapper). The shard is dealt over the selection's units, not
    the tests collected, so neither `-k` nor `--lf` (which narrows collection too) moves a test
    to another shard. (pytest reads a hook only from a name that starts with `pytest_`: hence
    `specname`.)"""
    state = adopted(config)
    if state is None:
        return
    from banana_tests.core.suite import selection_units
    from banana_tests.session.collection import ShardSelection, family_plugins
    from banana_tests.session.run_state import SHARDS

    for plugin in family_plugins(config):
        plugin.select(config, items)
    shards = config.pluginmanager.get_plugin(SHARDS)
    assert isinstance(shards, ShardSelection)
    shards.split(config, items, selection_units(state))


def pytest_collection_finish(session: pytest.Session) -> None:
    """The cases that will run, after `-k`, `--lf` and every other deselection: scoring plans
    for them alone. What collection built lives to the end of the session: frozen for the
    garbage collector (see banana_tests.scoring.process_tuning)."""
    state = adopted(session.config)
    if state is None:
        return
    from banana_tests.scoring.process_tuning import freeze_collected
    from banana_tests.session.collection import item_key

    state.planning.select(key for item in session.items if isinstance(key := item_key(item), CaseKey))
    freeze_collected()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """A test whose `banana_metric` (a user's override) is not the metric its id names errors at
    setup (banana_tests.session.case_fixtures.wrong_metric), never runs on the wrong metric."""
    yield
    state = adopted(item.config)
    if state is None or METRIC_FIXTURE not in getattr(item, "fixturenames", ()):
        return
    from banana_tests.session.case_fixtures import wrong_metric

    reason = wrong_metric(item, tuple(state.metrics))
    if reason is not None:
        pytest.fail(reason, pytrace=False)


def pytest_unconfigure(config: pytest.Config) -> None:
    """What the run changed in its process (SIGTERM's handler, the collector, allocator, torch's
    threads) is put back (banana_tests.scoring.process_tuning), except the rest in an xdist worker,
    whose process ends with the session: unfreezing there would hand its exit a full collection
    (cost in docs/research/speed.md). The score cache is closed in every process, so the file
    alone holds the run's scores."""
    state = adopted(config)
    if state is None:
        return
    state.scoring.close()
    from banana_tests.termination import default_sigterm

    default_sigterm()
    if hasattr(config, "workerinput"):
        return
    from banana_tests.scoring.process_tuning import SAVED

    SAVED.restore()


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A family's test module is collected only under its option (--trend, --search; see
    banana_tests.session.ownership)."""
    return left_out(collection_path, config)


@pytest.fixture
def banana_case(request: pytest.FixtureRequest) -> Verdict:
    """The case's verdict, Δ by its metric's `Scorer.delta` (the `Scorer` that `banana_metric`
    gives), with its JUnit properties recorded; skips when the metric cannot load (see
    banana_tests.session.scorer.load_or_skip)."""
    from banana_tests.session.case_fixtures import case_verdict

    return case_verdict(request.config.stash[STATE], request, request.param)
