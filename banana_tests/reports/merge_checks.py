"""Whether JUnit files merge into one run: they come from runs that agree (the same data, selection
and verdict rules), and they hold every case their runs planned, each with one outcome.

Shards and reruns of one run differ only in `--shard`, `-k`, `--lf`, `-n` and the machine. Each
run writes what decides its cases and their verdicts as testsuite properties (written by
banana_tests.core.run_facts), and `banana-tests report` refuses files whose values
differ (exit 3, naming each value's files) rather than merge a `--runs=2` shard into a full one:

- every file: the verdict rules (EVERY_RUN, with each family's `run_facts`), and the records of
  each seed image two files share (SEED_RECORDS), so runs split by metric or by seed image still
  merge, as docs/reports.md says;
- `--shard` runs: also the whole selection (AMONG_SHARDS, with each family's `shard_facts`):
  each deals the same units.

A file without a property (written before it was recorded) is not compared on it.

Each run also writes the JUnit ids of the tests it planned (after every selection, before running)
and of those it left to other jobs (its `--shard` or pytest-split's group), as testsuite
properties (PLANNED, SPLIT_OFF). Merged, the cases any run planned or split off must all have a
testcase in some file; one with two different outcomes is a conflict. A case is named as pytest's
JUnit writer names it, `classname::name`, so any test of the run counts, the suite's or not.

A run narrowed by its own selection (`-k`, `-m`, `--deselect`, `--lf`) also writes the tests it
collected and left out (LEFT_OUT), the options that did (NARROWED_BY), and how many test files
`--lf` did not even collect (UNCOLLECTED). A merge where a case left out is in no file, or whose
every file comes from a run that did not collect all its test files, is partial: never complete.

The plan is taken when collection ends, so a run that stopped early (Ctrl-C, SIGTERM, `-x`, a
crashed worker) records it too: the cases it planned and did not run are missing, and its file is
named with how many of them ran (`stopped_early`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from banana_tests.families.family_list import FAMILIES
from banana_tests.verdicts.matrix import Outcome

RECORDS = "selected_records"
"""A digest of the selected records' identities, file names and sizes (and sha256 where the data
set records one), with their count: another `--dataset`, revision or selection changes it."""
SEED_RECORDS = "seed_records"
"""A JSON object, seed image → the digest of its records: compared where files share a seed image."""
SHARD = "shard"
"""The run's `--shard` (K/N), empty for a run of the whole selection."""
EVERY_RUN = {
    "variant": "--variant",
    "reference_step": "--reference-step",
    "runs": "--runs",
    "where": "--where",
    "aggregate": "--aggregate",
    "max_pixels": "--max-pixels",
    **{name: option for family in FAMILIES for name, option in family.run_facts.items()},
}
AMONG_SHARDS = {
    RECORDS: "selected records",
    "metric_set": "--metric",
    "selected_steps": "--steps",
    "seed_selection": "--seed-image",
    **{name: option for family in FAMILIES for name, option in family.shard_facts.items()},
}
AGREED = {**EVERY_RUN, **AMONG_SHARDS, SEED_RECORDS: "records of each seed image", SHARD: "--shard"}
"""Every property of the check → what it is, as the messages name it."""
SEEDS_SHOWN = 5
"""Seed images whose records differ named one a line; the rest counted."""
MIXED_EXIT = 3
"""`banana-tests report`'s exit code for files of runs that cannot be merged (nothing is written)."""


def disagreements(facts: Mapping[Path, Mapping[str, str]]) -> list[str]:
    """One line per property with more than one value among the files it applies to, naming each
    value's files; a differing record digest names the files' `--dataset` too."""
    shards = {path: props for path, props in facts.items() if props.get(SHARD)}
    lines = [_differs(label, name, facts) for name, label in EVERY_RUN.items()]
    lines += [
        _differs(f"{label} (between --shard runs)", name, shards) for name, label in AMONG_SHARDS.items()
    ]
    per_seed = {path: _seeds(props.get(SEED_RECORDS, "")) for path, props in facts.items()}
    seeds = sorted({seed for found in per_seed.values() for seed in found})
    differing = []
    for seed in seeds:
        having = {path: {"seed": found[seed]} for path, found in per_seed.items() if seed in found}
        differing.append(_differs(f"records of seed image {seed}", "seed", having))
    differing = [line for line in differing if line]
    if len(differing) > SEEDS_SHOWN:
        more = len(differing) - SEEDS_SHOWN
        differing[SEEDS_SHOWN:] = [f"records of {more} more seed image(s) differ likewise"]
    return [line for line in lines if line] + differing


def _differs(label: str, name: str, facts: Mapping[Path, Mapping[str, str]]) -> str:
    values: dict[str, list[Path]] = {}
    for path, props in facts.items():
        if name in props:
            values.setdefault(props[name], []).append(path)
    if len(values) < 2:
        return ""
    each = "; ".join(
        f"{_shown(name, value, paths, facts)} in {', '.join(map(str, paths))}"
        for value, paths in values.items()
    )
    return f"{label}: {each}"


def _shown(name: str, value: str, paths: list[Path], facts: Mapping[Path, Mapping[str, str]]) -> str:
    if name != RECORDS:
        return value or "(none)"
    sources = dict.fromkeys(facts[p]["dataset"] for p in paths if "dataset" in facts[p])
    return f"{value} of --dataset={', '.join(sources)}" if sources else value


def _seeds(text: str) -> dict[str, str]:
    try:
        found = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


PLANNED = "planned"
SPLIT_OFF = "split_off"
LEFT_OUT = "left_out"
NARROWED_BY = "narrowed_by"
UNCOLLECTED = "uncollected_files"
PLAN_PROPERTIES = frozenset({PLANNED, SPLIT_OFF, LEFT_OUT, NARROWED_BY, UNCOLLECTED})
"""Testsuite properties of the run's plan: test ids, one a line, in chunks (CHUNK) under the
same name, so no attribute nears the reader's cap (reports.junit.MAX_ATTRIBUTE); and what
narrowed it."""
CHUNK = 256 * 1024
INCOMPLETE_EXIT = 3
"""`banana-tests report`'s exit code for a merge with a planned case missing or a conflict."""


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


@dataclass(frozen=True)
class Narrowing:
    """What the run's own selection left out of the tests it collected: their ids, the options
    that did (`-k 'beta', --lf`), and the test files `--lf` did not collect, whose tests are
    not known."""

    left_out: tuple[str, ...] = ()
    by: str = ""
    uncollected: int = 0

    def properties(self) -> list[tuple[str, str]]:
        """As testsuite properties; none for a run that left nothing out."""
        if not self.left_out and not self.uncollected:
            return []
        found = [(NARROWED_BY, self.by), *((LEFT_OUT, v) for v in chunks(self.left_out))]
        return found + ([(UNCOLLECTED, str(self.uncollected))] if self.uncollected else [])


def plan_properties(
    planned: Iterable[str], split_off: Iterable[str], narrowing: Narrowing = Narrowing()
) -> list[tuple[str, str]]:
    """The run's plan as testsuite properties."""
    return [
        *((PLANNED, v) for v in chunks(planned)),
        *((SPLIT_OFF, v) for v in chunks(split_off)),
        *narrowing.properties(),
    ]


@dataclass
class Ledger:
    """What the files planned and what they hold, read file by file."""

    expected: set[str] = field(default_factory=set)  # planned or split off by any run
    planned_in: dict[Path, set[str]] = field(default_factory=dict)  # each file's own planned cases
    planless: list[Path] = field(default_factory=list)  # files written before runs recorded plans
    with_plan: list[Path] = field(default_factory=list)
    outcomes: dict[str, dict[Outcome, list[Path]]] = field(default_factory=dict)
    facts: dict[Path, dict[str, str]] = field(default_factory=dict)  # each file's run properties
    left_out: set[str] = field(default_factory=set)  # collected, then left out by a run's selection
    narrowed: dict[Path, str] = field(default_factory=dict)  # each narrowed file's options
    uncollected: dict[Path, int] = field(default_factory=dict)  # test files --lf did not collect

    def plan(self, properties: Iterable[tuple[str, str]], path: Path) -> bool:
        """Take a testsuite's plan properties (from the file `path`); whether it had any."""
        found = False
        for name, value in properties:
            if name in (PLANNED, SPLIT_OFF):
                found = True
                cases = [line for line in value.split("\n") if line]
                self.expected.update(cases)
                if name == PLANNED:
                    self.planned_in.setdefault(path, set()).update(cases)
            elif name == LEFT_OUT:
                self.left_out.update(line for line in value.split("\n") if line)
            elif name == NARROWED_BY:
                self.narrowed[path] = value
            elif name == UNCOLLECTED and value.isdecimal() and int(value):
                self.uncollected[path] = int(value)
        return found

    def saw(self, case: str, outcome: Outcome, path: Path) -> None:
        self.outcomes.setdefault(case, {}).setdefault(outcome, []).append(path)

    @property
    def missing(self) -> list[str]:
        """Cases some run planned or split off that no file holds."""
        return sorted(self.expected - self.outcomes.keys())

    @property
    def stopped_early(self) -> list[tuple[Path, int, int]]:
        """(file, cases it ran, cases it planned) of each file whose run stopped before it ran
        every case it planned, when some of those are in no file: a run that stopped early, not
        a shard that left its cases to others."""
        missing = self.expected - self.outcomes.keys()
        found = []
        for path, planned in self.planned_in.items():
            if planned & missing:
                ran = sum(
                    any(path in paths for paths in self.outcomes.get(case, {}).values()) for case in planned
                )
                found.append((path, ran, len(planned)))
        return found

    @property
    def left_out_missing(self) -> list[str]:
        """Cases a run's selection left out that no file holds (and no run planned)."""
        return sorted(self.left_out - self.outcomes.keys() - self.expected)

    @property
    def unknown_plan(self) -> list[Path]:
        """The files of runs that did not collect every test file (`--lf`), when every file with
        a plan is one: what those files' tests were is not known, so the merge cannot be whole."""
        if not self.with_plan or any(path not in self.uncollected for path in self.with_plan):
            return []
        return list(self.with_plan)

    @property
    def partial(self) -> bool:
        """A merge of narrowed runs that does not hold every case they collected (or could not
        know): never complete."""
        return bool(self.left_out_missing or self.unknown_plan)

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
        return not self.missing and not self.conflicts and not self.partial

    def narrowing_of(self, paths: Iterable[Path]) -> str:
        """The options that narrowed the runs of these files, each once: `--lf, -k 'beta'`."""
        found = [part for p in paths for part in self.narrowed.get(p, "").split(", ") if part]
        return ", ".join(dict.fromkeys(found)) or "their selection"
