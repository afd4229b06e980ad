"""The test families of the suite, one line each: delete a family's folder and its line, and the
suite runs without it (banana_tests.families.family); all but the Δ family, the frame the core
builds on (banana_tests.families.degradation). Named, as pytest names its own plugins, so the
record and the baseline below the families' sections never import those."""

from __future__ import annotations

import importlib

from banana_tests.cases import CaseKind
from banana_tests.families.family import Family, RecordFamily, Section

PACKAGES = (
    "banana_tests.families.degradation",
    "banana_tests.families.control",
    "banana_tests.families.search",
    "banana_tests.families.trend",
    "banana_tests.families.invariance",
    "banana_tests.families.snapshot",
)
"""Each family's package, whose `FAMILY` is its descriptor; in the order their sections are shown."""


def descriptor(package: str) -> Family:
    family = importlib.import_module(package).FAMILY
    assert isinstance(family, Family), package
    return family


FAMILIES: tuple[Family, ...] = tuple(descriptor(package) for package in PACKAGES)
RECORD_FAMILIES: tuple[RecordFamily, ...] = tuple(f for f in FAMILIES if isinstance(f, RecordFamily))
"""The families whose cases write a case record, in the same order."""


def family_of(kind: CaseKind) -> RecordFamily | None:
    """The registered family of a record kind; None for a kind no family of this suite has."""
    return next((f for f in RECORD_FAMILIES if f.kind is kind), None)


def section_of(family: RecordFamily) -> Section:
    """A family's section, imported when an output shows it (the terminal summary, `report`): its
    module sits with the reports, above the record and the baseline, which never ask for it."""
    section = importlib.import_module(family.section).SECTION
    assert isinstance(section, Section), family.section
    return section
