"""What the rest of the suite knows of a test family: the protocol a family's descriptor (its
package's `FAMILY`) speaks (`Family`, and `RecordFamily` for one whose cases write a case record),
what it may register in a pytest run (`SessionPlugin`) and the parts of a run's outputs it adds
(`Section`).

Deleting a family's folder and its line in banana_tests.families.family_list leaves everything else
working: its test module is gone, its records are no case of this version (skipped by the
readers), its baseline entries are skipped, and the terminal and the report drop its section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from banana_tests.cases import CaseKind, FamilyKey, Field
from banana_tests.trajectories.case_plans import CasePlan

AddOption = Callable[..., Any]
"""Registers one option by its short spelling (`--trend`) and argparse attributes."""
OptionValue = Callable[[str], Any]
"""An option's value by its short name (`value("trend")`), as the settings' validator reads it."""


class FamilySettings(Protocol):
    """What a family's options asked for, typed (each family's own dataclass)."""

    def facts(self) -> tuple[tuple[str, str], ...]:
        """Testsuite properties that decide its cases, for `report` to refuse merging runs that differ."""
        ...


@dataclass(frozen=True)
class NoSettings:
    """The settings of a family without options."""

    def facts(self) -> tuple[tuple[str, str], ...]:
        return ()


class RunSettings(Protocol):
    """The part of a run's settings a family reads its own from (banana_tests.core.settings)."""

    @property
    def families(self) -> Mapping[str, FamilySettings]: ...


@dataclass(frozen=True)
class Place:
    """Where a run's settings are read: the rootdir its relative paths start from, and its ini
    values (pytest's ini file; none outside pytest)."""

    rootdir: Path
    ini: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class Family(Protocol):
    """What every family speaks: its name, which test module holds its cases and which option
    collects it, its options and settings, the facts merged runs must share, and the pytest
    plugin it adds to a suite run, if any."""

    @property
    def name(self) -> str:
        """Its name, by which a run's settings hold its own (`RunSettings.families`)."""
        ...

    @property
    def module(self) -> Path:
        """Its test module, collected only when `option` is given (always without one)."""
        ...

    @property
    def option(self) -> str | None:
        """The pytest dest of the option that collects its module (`banana_trend`); None: every
        run collects it."""
        ...

    @property
    def params(self) -> frozenset[str]:
        """The parameters its test parametrizes itself with: a run collecting one reads the data
        set first, as for a Δ case, so a bad `--dataset` is one usage error."""
        ...

    @property
    def shard_facts(self) -> Mapping[str, str]:
        """Its settings' facts (`FamilySettings.facts`) that `--shard` runs must share, each with
        the option it comes from, as `report` names it when they differ."""
        ...

    @property
    def run_facts(self) -> Mapping[str, str]:
        """Its settings' facts that every merged run must share (its verdict rules), each with
        its option."""
        ...

    @property
    def ini(self) -> Mapping[str, str]:
        """The pytest ini keys it reads (`Place.ini`), each with its help."""
        ...

    @property
    def plugin(self) -> str | None:
        """The module whose `plugin(metrics, config)` builds what it registers in a suite run's
        pytest (a `SessionPlugin`); None: it adds nothing."""
        ...

    def add_options(self, addoption: AddOption) -> None:
        """Register its options, by their short spelling, as the core registers its own: the
        plugin adds them under `--banana-`, the CLI and the api read them alike."""
        ...

    def read_settings(self, value: OptionValue, place: Place) -> FamilySettings:
        """Its settings from its options' values; a ValueError naming the option for a value no
        run can satisfy."""
        ...


@runtime_checkable
class SessionPlugin(Protocol):
    """What a family registers in a suite run's pytest (its own hooks beside), as the session
    calls it: the tests it deselects late in collection, before `--shard` deals the rest, and
    its lines at the end of the terminal summary. Items and the config are pytest's."""

    def metric_of(self, item: Any) -> str | None:
        """The metric one of its tests is on (its unit of work, its faults' metric); None for
        another test."""
        ...

    def extra(self, item: Any) -> bool:
        """A collected test that is no part of this run (deselected by `select`), which the
        run's plan does not count."""
        ...

    def select(self, config: Any, items: list[Any]) -> None:
        """Deselect the `extra` tests among `items` (in place)."""
        ...

    def summary(self) -> list[tuple[str, bool]]:
        """Its terminal summary lines, each with whether it is a warning (yellow)."""
        ...


@runtime_checkable
class RecordFamily(Family, Protocol):
    """A family whose cases write a case record (banana_tests.verdicts.record) as the core sees
    it: its record's kind and fields, how its key is read back, and where its report section is."""

    @property
    def kind(self) -> CaseKind:
        """Its record's kind (`banana_record`'s `<kind>/`) and its baseline entries' `kind`."""
        ...

    @property
    def figures(self) -> frozenset[Field]:
        """The measured fields its records may carry, besides the key's."""
        ...

    @property
    def numbers(self) -> tuple[Field, ...]:
        """Figures its readers compute with: a record whose value is no number is refused."""
        ...

    @property
    def entry_fields(self) -> frozenset[str]:
        """The fields of its baseline entries, `kind` included."""
        ...

    @property
    def named_at_collection(self) -> bool:
        """Its record's identity is its key's alone, so it is recorded at collection and a case
        that errors in setup still names itself; else its fixture records it."""
        ...

    @property
    def section(self) -> str:
        """The module that holds its `SECTION` (a `Section`), imported by the outputs that show it."""
        ...

    @property
    def fixture(self) -> str | None:
        """The indirect parameter the plugin parametrizes its test with, a case per key of `cases`;
        None when its test parametrizes itself."""
        ...

    def cases(self, run_means: Sequence[CasePlan]) -> list[FamilyKey]:
        """Its cases on the run-mean Δ plans of the selection, in their test order."""
        ...

    def key(self, fields: Mapping[str, object]) -> FamilyKey:
        """Its key from a record's properties or a baseline entry (KeyError, ValueError when they
        do not name one)."""
        ...

    def item_key(self, params: Mapping[str, object], fixtures: Sequence[str]) -> FamilyKey | None:
        """The case a collected test runs, from its parameters and fixtures; None for another test."""
        ...

    def check(self, props: Mapping[str, str]) -> None:
        """A ValueError naming the property when a record's figures cannot be shown."""
        ...

    def schema1_fields(self, name: str, props: Mapping[str, str]) -> Mapping[str, str] | None:
        """In a JUnit file written before `banana_record` (record schema 1): the fields of its case
        this testcase (`name`, `props`) is, told apart as that schema did; None for another test,
        a ValueError for a testcase of its kind that names no case."""
        ...


@dataclass(frozen=True)
class Case:
    """One of a family's cases as a run or a JUnit file left it: the newest of its key."""

    key: FamilyKey
    outcome: str  # an Outcome's value
    props: Mapping[str, str]  # the record as properties
    message: str = ""


@dataclass(frozen=True)
class Page:
    """What a section adds to the report's folder: files written and report.html parts, which sit
    with the families' tables or, `after_figures`, below the matrix's figures."""

    files: tuple[Path, ...] = ()
    html: tuple[str, ...] = ()
    after_figures: bool = False


def no_page(out: Path) -> Page:
    """A section that adds nothing to the report's folder."""
    return Page()


@dataclass(frozen=True)
class Report:
    """A section as `banana-tests report` shows it: summary.md's part (printed too), warning lines
    for the terminal, and what it writes into the report's folder (`write`)."""

    markdown: str = ""
    warnings: tuple[str, ...] = ()
    write: Callable[[Path], Page] = no_page


@runtime_checkable
class Section(Protocol):
    """A family's part of the terminal summary and of `banana-tests report`, from its cases."""

    @property
    def title(self) -> str:
        """The terminal section's title."""
        ...

    def terminal(self, cases: Sequence[Case]) -> list[str]:
        """The terminal section's lines; none: no section."""
        ...

    def report(self, cases: Sequence[Case], inputs: Sequence[Path]) -> Report:
        """Its report; `inputs` are the folders whose files it may embed (the JUnit files')."""
        ...
