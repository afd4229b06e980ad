"""Whether a pytest run is banana-tests' own: the option spellings it owns, the paths and test
modules that lead into the suite.

The plugin is loaded in every pytest process of the environment (pytest11), so it is a guest:
until a run is known to be the suite's, its hooks return at once and it builds nothing. A run
is the suite's when

- its command line asks for it: a `--banana-*` option (or a short spelling the plugin owns in
  that run) is given, or a path or `--pyargs` name leads into the installed suite; this is
  known before collection, in time for xdist's worker count and scheduler; or
- a collected test requests one of the suite's fixtures (`banana_metric`, `banana_case`, ...),
  which also covers the suite's own modules; this is known at collection.

Then banana_tests.session.run_state's `adopt` builds the run's state once and registers what
the suite adds (in another project's run the plugin touches no signal), among it `WorkerStop`.

A short spelling (`--metric`) is added as an alias of its `--banana-` option only where nothing
else in that run has claimed it (see `add_free_aliases`), and never inside another plugin's
namespace (FOREIGN_NAMESPACES): `--snapshot-dir` would silently configure syrupy the day syrupy
added it. The aliases are added after the initial conftests, from a
`pytest_load_initial_conftests` wrapper, rather than in a conftest.py shipped in the package: a
package conftest is read only when the run's paths lead into the package, so `--metric` would
work in the clone and under `--pyargs banana_tests` but not for a user's own tests on the public
fixtures, and it would be one more file pytest imports per run. After the initial conftests
every option that can be given on the command line is registered, so a name that is free then
stays ours (cost in docs/research/speed.md, "Option aliases").

A family's test module is collected only under its option (banana_tests.families.family_list: the
trend module under --trend, the search module under --search): the plugin's
`pytest_ignore_collect` and the shard selection's count of unreached modules read that one rule.

SIGTERM at xdist's controller stops its workers at once, as Ctrl-C stops the whole group.
`docker stop` and Kubernetes signal the container's first process only, the controller. On
its KeyboardInterrupt xdist's teardown asks each worker's gateway to exit, and execnet
interrupts a worker busy with a case only after 5 s, or lets it run 10 s more where SIGINT is
ignored (a job started in the background), before the JUnit file is written: past the 10 s
`docker stop` waits before SIGKILL. So the controller passes the SIGTERM on to the workers it
started on this machine, each stopped within one wait of its batch (banana_tests.termination),
and the file is written as soon as they are down.
"""

from __future__ import annotations

import itertools
import os
import shlex
import signal
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from banana_tests.core.suite_options import PREFIX, SuiteOption, suite_options
from banana_tests.families.family_list import FAMILIES
from banana_tests.termination import Terminated

if TYPE_CHECKING:
    from banana_tests.core.suite import SuiteState


SUITE_DIR = Path(__file__).resolve().parent.parent
"""The installed suite's folder, which holds its test modules."""
STATE = pytest.StashKey["SuiteState"]()
"""The run's suite, once the run is the suite's (see banana_tests.session.run_state.adopt)."""
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


# Options whose value is a path: written `--opt /path`, pytest takes the path as a test path.
PATH_OPTIONS = ("--dataset", *(option.short for option in suite_options() if option.local_path))
ALIAS_GROUP = "banana-tests short spellings"
FOREIGN_NAMESPACES = ("--snapshot-", "--hypothesis-", "--cov", "--randomly-", "--reruns")
"""Option prefixes other plugins own (syrupy, hypothesis, pytest-cov, pytest-randomly,
pytest-rerunfailures): an option of ours there has its `--banana-` spelling only."""


def claimed_names(groups: Iterable[Any]) -> set[str]:
    """Every option string already registered in pytest's parser (its groups' `options`)."""
    return {name for group in groups for option in group.options for name in option.names()}


def add_free_aliases(parser: Any, options: Iterable[SuiteOption]) -> tuple[str, ...]:
    """Add each option's short spelling that no plugin or conftest of this run registered, with
    the same dest; return the spellings added. `parser` is pytest's Parser: its `_groups` are
    the only record of the names taken (pytest has no public listing)."""
    taken = claimed_names(parser._groups)
    free = [o for o in options if o.short not in taken and not o.short.startswith(FOREIGN_NAMESPACES)]
    if free:
        group = parser.getgroup(ALIAS_GROUP, "banana-tests short spellings (where no other plugin uses them)")
        for option in free:
            attrs = {k: v for k, v in option.attrs.items() if k != "help"}
            group.addoption(option.short, dest=option.dest, help=f"= {option.long}", **attrs)
    return tuple(o.short for o in free)


def short_spelling(spelling: str) -> str:
    """`--banana-metric` → `--metric`; a short spelling stays as it is."""
    return "--" + spelling.removeprefix(PREFIX) if spelling.startswith(PREFIX) else spelling


def given_options(args: Sequence[str], spellings: Iterable[str]) -> list[str]:
    """The suite options among `args` (`--opt` or `--opt=value`) by the `spellings` this run owns."""
    owned = set(spellings)
    return [a.split("=", 1)[0] for a in args if a.split("=", 1)[0] in owned]


def spaced_path_options(args: Sequence[str], owned: Iterable[str]) -> list[str]:
    """`--opt=value` for each path option given as `--opt value` whose value is an existing path,
    in `args` or $PYTEST_ADDOPTS: pytest chose its rootdir from such a value, before the plugin's
    options were known, and outside the project it then collects the whole folder. Only the
    spellings this run `owned` count: a user's own `--dataset /x` is theirs to mean."""
    owned_paths = {s for s in owned if short_spelling(s) in PATH_OPTIONS}
    given = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *args]
    return [
        f"{option}={value}"
        for option, value in itertools.pairwise(given)
        if option in owned_paths and Path(value).exists()
    ]


def left_out(collection_path: Path, config: pytest.Config) -> bool | None:
    """True for a family's module its option did not ask for; None for any other path."""
    option = next((f.option for f in FAMILIES if f.module == collection_path), None)
    if option is None:
        return None
    return None if config.getoption(option, None) not in (None, False) else True


def suite_modules() -> list[Path]:
    """Every test module of the suite: each registered family's."""
    return sorted(f.module for f in FAMILIES)


def worker_process(node: Any) -> subprocess.Popen[bytes] | None:
    """The local process of an xdist worker (execnet's popen gateway), None for any other."""
    process = getattr(getattr(node.gateway, "_io", None), "popen", None)
    return process if isinstance(process, subprocess.Popen) else None


class WorkerStop:
    """Keeps the controller's local workers, to pass them a SIGTERM the controller received."""

    def __init__(self) -> None:
        self.workers: list[subprocess.Popen[bytes]] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        process = worker_process(node)
        if process is not None:
            self.workers.append(process)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Popen signals only a process it has not reaped, so never another process's pid."""
        if isinstance(excinfo.value, Terminated):
            for process in self.workers:
                process.send_signal(signal.SIGTERM)
