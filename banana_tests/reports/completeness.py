"""Whether merged JUnit files hold every case their runs planned, each with one outcome.

Each run writes the JUnit ids of the tests it planned (after every selection, before running)
and of those it left to other jobs (its `--shard` or pytest-split's group), as testsuite
properties (PLANNED, SPLIT_OFF). Merged, the cases any run planned or split off must all have a
testcase in some file; one with two different outcomes is a conflict. A case is named as pytest's
JUnit writer names it, `classname::name`, so any test of the run counts, the suite's or not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from banana_tests.cases import strip_xdist_group
from banana_tests.verdicts.outcome import Outcome

PLANNED = "planned"
SPLIT_OFF = "split_off"
PLAN_PROPERTIES = frozenset({PLANNED, SPLIT_OFF})
"""Testsuite properties of the run's plan: test ids, one a line, in chunks (CHUNK) under the
same name, so no attribute nears the reader's cap (reports.junit.MAX_ATTRIBUTE)."""
CHUNK = 256 * 1024
INCOMPLETE_EXIT = 3
"""`banana-tests report`'s exit code for a merge with a planned case missing or a conflict."""


def junit_id(nodeid: str, prefix: str | None = None) -> str:
    """A test's id as pytest's JUnit writer spells it: `classname::name` (its
    `mangle_test_address`: the path dotted without `.py`, classes joined by dots; `--junit-prefix`
    before the classname)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    classname = ".".join(names[:-1])
    if prefix:
        classname = f"{prefix}.{classname}"
    return f"{classname}::{names[-1]}"


def id_of_testcase(classname: str, name: str) -> str:
    """A JUnit testcase's id, as `junit_id` spells the test's (xdist's `@group` dropped)."""
    return f"{classname}::{strip_xdist_group(name)}"


def chunks(ids: Iterable[str]) -> Iterator[str]:
    """The ids one a line, cut at line ends into values of at most about CHUNK characters."""
    lines: list[str] = []
    size = 0
    for case in ids:
        if lines and size + len(case) > CHUNK:
            yield "\n".join(lines)
            lines, size = [], 0
        lines.append(case)
        size += len(case) + 1
    if lines:
        yield "\n".join(lines)


def plan_properties(planned: Iterable[str], split_off: Iterable[str]) -> list[tuple[str, str]]:
    """The run's plan as testsuite properties."""
    return [(PLANNED, v) for v in chunks(planned)] + [(SPLIT_OFF, v) for v in chunks(split_off)]


@dataclass
class Ledger:
    """What the files planned and what they hold, read file by file."""

    expected: set[str] = field(default_factory=set)  # planned or split off by any run
    planless: list[Path] = field(default_factory=list)  # files written before runs recorded plans
    with_plan: list[Path] = field(default_factory=list)
    outcomes: dict[str, dict[Outcome, list[Path]]] = field(default_factory=dict)
    facts: dict[Path, dict[str, str]] = field(default_factory=dict)  # each file's run properties

    def plan(self, properties: Iterable[tuple[str, str]]) -> bool:
        """Take a testsuite's plan properties; whether it had any."""
        found = False
        for name, value in properties:
            if name in PLAN_PROPERTIES:
                found = True
                self.expected.update(line for line in value.split("\n") if line)
        return found

    def saw(self, case: str, outcome: Outcome, path: Path) -> None:
        self.outcomes.setdefault(case, {}).setdefault(outcome, []).append(path)

    @property
    def missing(self) -> list[str]:
        """Cases some run planned or split off that no file holds."""
        return sorted(self.expected - self.outcomes.keys())

    @property
    def conflicts(self) -> list[str]:
        """One line per case seen with different outcomes, naming each outcome's files."""
        return [
            f"{case}: "
            + ", ".join(f"{outcome} in {', '.join(map(str, paths))}" for outcome, paths in seen.items())
            for case, seen in sorted(self.outcomes.items())
            if len(seen) > 1
        ]

    @property
    def repeated(self) -> list[str]:
        """Cases in more than one testcase, each time with the same outcome: a note, no error."""
        return sorted(
            case
            for case, seen in self.outcomes.items()
            if len(seen) == 1 and len(next(iter(seen.values()))) > 1
        )

    @property
    def complete(self) -> bool:
        return not self.missing and not self.conflicts
