"""The test families of the suite, one line each: delete a family's folder and its line, and the
suite runs without it (banana_tests.families.protocol)."""

from __future__ import annotations

import importlib

from banana_tests.cases import CaseKind, FamilyKey
from banana_tests.families.protocol import Family, Section
from banana_tests.families.search import FAMILY as SEARCH
from banana_tests.families.trend import FAMILY as TREND

FAMILIES: tuple[Family, ...] = (SEARCH, TREND)
"""In the order their sections are shown."""


def family_of(kind: CaseKind) -> Family | None:
    """The registered family of a record kind; None for a kind no family of this suite has."""
    return next((f for f in FAMILIES if f.kind is kind), None)


def family_of_key(key: FamilyKey) -> Family:
    family = family_of(key.kind)
    assert family is not None, key
    return family


def section_of(family: Family) -> Section:
    """A family's section, imported when an output shows it (the terminal summary, `report`): its
    module sits with the reports, above the record and the baseline, which never ask for it."""
    section = importlib.import_module(family.section).SECTION
    assert isinstance(section, Section), family.section
    return section
