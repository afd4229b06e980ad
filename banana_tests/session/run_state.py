"""The core's objects for a pytest run, built once per config and kept in its stash: the settings
(pytest's options through the core's one validator), the `--metric` selection, the suite's state
with what the suite registers in the run (`adopt`), and each metric's `Scorer`. A core usage
error becomes pytest's (one line, exit 4). A running test's lines reach the terminal through
`terminal_line`, past pytest's capture.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from banana_tests.core.machine import Device, gpu_driver_loaded, no_cuda
from banana_tests.core.metric_import import HUNG_IMPORTS, resolve_within
from banana_tests.core.settings import Settings, check_writable
from banana_tests.core.suite import LOADED_LIBRARIES, SuiteState, UsageError
from banana_tests.core.suite_options import dest_of
from banana_tests.families.family_list import FAMILIES
from banana_tests.scoring.metric_calls import BatchWatch, Hung
from banana_tests.session.ownership import STATE, WorkerStop, adopted
from banana_tests.session.scorer import Scorer
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric
from metrics_under_test.spec import MetricSpec

SETTINGS = pytest.StashKey[Settings]()
SELECTED = pytest.StashKey[list[MetricSpec]]()
HUNG = pytest.StashKey[dict[str, Hung]]()  # the selected metrics whose import hung
WATCH = pytest.StashKey[BatchWatch]()  # the run's watch: its scoring thread imports, builds and scores
SCORERS = pytest.StashKey[dict[str, Scorer]]()  # the public fixtures' Scorer of each selected metric
SHARDS = "banana-tests-shards"
"""The name of the run's ShardSelection plugin, which holds its plan."""


def settings_of(config: pytest.Config) -> Settings:
    """The run's settings, built on first use: xdist's `-n auto` asks before pytest_configure."""
    if SETTINGS not in config.stash:
        config.stash[SETTINGS] = settings_from_config(config)
    return config.stash[SETTINGS]


def settings_from_config(config: pytest.Config) -> Settings:
    """The settings of `config`'s run; an option no run can satisfy is a usage error."""
    try:
        if config.option.xmlpath:
            check_writable("--junitxml", Path(config.invocation_params.dir, config.option.xmlpath))
        return Settings.from_values(
            lambda name: config.getoption(dest_of(name)),
            rootdir=config.rootpath,
            invocation_dir=config.invocation_params.dir,
            ini={key: str(config.getini(key) or "") for family in FAMILIES for key in family.ini},
            args=config.invocation_params.args,
            case_timeout=pytest_timeout_seconds(config),
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from exc


def pytest_timeout_seconds(config: pytest.Config) -> float | None:
    """pytest-timeout's timeout for the run's cases (its option, PYTEST_TIMEOUT or its ini
    setting), or None without pytest-timeout or a timeout (0 turns it off)."""
    plugin = config.pluginmanager.get_plugin("timeout")
    if plugin is None or not hasattr(plugin, "get_env_settings"):
        return None
    seconds = plugin.get_env_settings(config).timeout
    return float(seconds) if seconds else None


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


def suite_of(config: pytest.Config) -> SuiteState:
    """The suite of `config`'s run; options it cannot use are a usage error."""
    settings = settings_of(config)
    try:
        metrics = selected_metrics(config)
    except (UnknownMetric, MetricError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from exc
    if settings.device.kind is Device.CUDA and not gpu_driver_loaded():
        raise pytest.UsageError(no_cuda(settings.device) + " (no GPU driver)")
    state = SuiteState.from_settings(
        settings, metrics, terminal_line(config), config.stash[HUNG], config.stash[WATCH]
    )
    state.scoring.loaded = getattr(config, "workerinput", {}).get(LOADED_LIBRARIES)  # the controller's
    return state


def scorer_of(config: pytest.Config, state: SuiteState, metric: str) -> Scorer:
    """The public fixtures' Scorer of a selected metric, one per process over the state's book."""
    scorers = config.stash.setdefault(SCORERS, {})
    if metric not in scorers:
        try:
            state.scoring.prepare()
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from exc
        scoring = state.scoring
        scorers[metric] = Scorer(scoring.metrics[metric], scoring.book, metric in scoring.named)
    return scorers[metric]


def collected(state: SuiteState) -> None:
    """`state.collect()` where pytest expects its usage error."""
    try:
        state.collect()
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from exc


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Write one line to stderr with pytest's capture suspended, as its live logging does; under
    xdist a worker's stderr is the terminal's."""
    capture = config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        if capture is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)

    return say


def adopt(config: pytest.Config) -> SuiteState:
    """Make this run the suite's (once): its state, the matrix reporter, the families' plugins
    (banana_tests.families.family.SessionPlugin) and, with `--banana-baseline`, the baseline
    gate; SIGTERM stops the run. Options the suite cannot use are a usage error."""
    state = adopted(config)
    if state is not None:
        return state
    from banana_tests.session.collection import PLUGIN_PREFIX, BaselineGate, ShardSelection
    from banana_tests.session.reporter import MatrixReporter, install_miss_summary
    from banana_tests.termination import stop_on_sigterm

    state = suite_of(config)
    config.stash[STATE] = state
    plugins = config.pluginmanager
    shards = ShardSelection(state.settings.shard, tuple(state.metrics))
    plugins.register(MatrixReporter(state, config, shards), "banana-tests-matrix")
    install_miss_summary(config)
    for family in FAMILIES:
        if family.plugin is not None:
            made = importlib.import_module(family.plugin).plugin(tuple(state.metrics), config)
            plugins.register(made, PLUGIN_PREFIX + family.name)
    plugins.register(shards, SHARDS)
    if state.settings.baseline is not None:
        gate = BaselineGate(state.settings.baseline, state.settings.strict_baseline)
        plugins.register(gate, "banana-tests-baseline")
    stop_on_sigterm()
    if not hasattr(config, "workerinput"):
        plugins.register(WorkerStop(), "banana-tests-worker-stop")
    return state
