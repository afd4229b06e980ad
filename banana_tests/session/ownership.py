"""Whether a pytest run is banana-tests' own, and what the suite adds to a run once it is.

The plugin is loaded in every pytest process of the environment (pytest11), so it is a guest:
until a run is known to be the suite's, its hooks return at once and it builds nothing. A run
is the suite's when

- its command line asks for it: a `--banana-*` option (or a short spelling the plugin owns in
  that run) is given, or a path or `--pyargs` name leads into the installed suite; this is
  known before collection, in time for xdist's worker count and scheduler; or
- a collected test requests one of the suite's fixtures (`banana_metric`, `banana_case`, ...),
  which also covers the suite's own modules; this is known at collection.

Then `adopt` builds the run's `SuiteState` once, registers the reporter, the shard and
snapshot selections and the baseline gate, and makes SIGTERM stop the run as Ctrl-C does
(banana_tests.termination; xdist's controller passes it to its workers,
banana_tests.session.worker_stop): in another project's run the plugin touches no signal.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from banana_tests.core.suite import SuiteState

SUITE_DIR = Path(__file__).resolve().parent.parent
STATE = pytest.StashKey["SuiteState"]()
"""The run's suite, once the run is the suite's (see `adopt`)."""
SHARDS = "banana-tests-shards"
"""The name of the run's ShardSelection plugin, which holds its plan."""
SNAPSHOTS = "banana-tests-snapshots"
GIVEN = pytest.StashKey[tuple[str, ...]]()
"""The suite options given in this run (command line and addopts), by the spellings it owns."""


def asks_for_suite(config: pytest.Config) -> bool:
    """The command line asks for a suite run (see the module's docstring)."""
    return bool(config.stash.get(GIVEN, ())) or leads_into_suite(
        config.args, config.invocation_params.dir, bool(config.option.pyargs)
    )


def leads_into_suite(args: Sequence[str], here: Path, pyargs: bool) -> bool:
    """A path among `args` lies in the suite's folder or holds it, or under `--pyargs` a name
    is the suite's package: `-n auto` in another project of the same environment is not ours."""
    for arg in args:
        if pyargs and arg.split(".")[0] == SUITE_DIR.name:
            return True
        path = (here / arg.split("::")[0]).resolve()
        if path == SUITE_DIR or SUITE_DIR in path.parents or path in SUITE_DIR.parents:
            return True
    return False


def adopted(config: pytest.Config) -> SuiteState | None:
    """The run's suite if the run is the suite's already, else None; builds nothing."""
    return config.stash.get(STATE, None)


def adopt(config: pytest.Config) -> SuiteState:
    """Make this run the suite's (once): its state, the matrix reporter, the snapshot selection
    and, with `--banana-baseline`, the baseline gate; SIGTERM stops the run. Options the suite
    cannot use are a usage error."""
    state = adopted(config)
    if state is not None:
        return state
    from banana_tests.session.miss_summary import install_miss_summary
    from banana_tests.session.reporter import MatrixReporter
    from banana_tests.session.run_state import suite_of
    from banana_tests.session.shard_selection import ShardSelection
    from banana_tests.session.snapshot_selection import SnapshotSelection
    from banana_tests.termination import stop_on_sigterm

    state = suite_of(config)
    config.stash[STATE] = state
    plugins = config.pluginmanager
    shards = ShardSelection(state.settings.shard, tuple(state.metrics))
    plugins.register(MatrixReporter(state, config, shards), "banana-tests-matrix")
    install_miss_summary(config)
    plugins.register(SnapshotSelection(state.metrics, config), SNAPSHOTS)
    plugins.register(shards, SHARDS)
    if state.settings.baseline is not None:
        from banana_tests.session.gating import BaselineGate

        gate = BaselineGate(state.settings.baseline, state.settings.strict_baseline)
        plugins.register(gate, "banana-tests-baseline")
    stop_on_sigterm()
    if not hasattr(config, "workerinput"):
        from banana_tests.session.worker_stop import WorkerStop

        plugins.register(WorkerStop(), "banana-tests-worker-stop")
    return state
