"""The suite options' short spellings in pytest, and how they are read off a command line.

A short spelling (`--metric`) is added as an alias of its `--banana-` option only where nothing
else in that run has claimed it (see `add_free_aliases`), and never inside another plugin's
namespace (FOREIGN_NAMESPACES): `--snapshot-dir` would silently configure syrupy the day syrupy
added it.

Why after the initial conftests, from a `pytest_load_initial_conftests` wrapper, rather than
in a conftest.py shipped in the package: a package conftest is read only when the run's paths
lead into the package, so `--metric` would work in the clone and under `--pyargs banana_tests`
but not for a user's own tests on the public fixtures, and it would be one more file pytest
imports per run. After the initial conftests every option that can be given on the command
line is registered (pytest parses the command line once they are loaded), so a name that is
free then stays ours. The wrapper costs one pass over the registered option names and an
alias per free name (cost in docs/research/speed.md, "Option aliases").
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from banana_tests.core.suite_options import PREFIX, SuiteOption

# Options whose value is a path: written `--opt /path`, pytest takes the path as a test path.
PATH_OPTIONS = (
    "--dataset",
    "--dataset-cache",
    "--weights-dir",
    "--baseline",
    "--cache-dir",
    "--snapshot-dir",
)
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
