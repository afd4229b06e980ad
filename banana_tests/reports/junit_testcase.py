"""One JUnit testcase as the suite's cases: its record (or, in a file of record schema 1, written
before `banana_record` existed, the record that schema's rules find), its outcome as a gate reads
it, and the run facts it carries."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

from banana_tests.cases import CaseKey, CaseKind, Field, strip_xdist_group
from banana_tests.families.family import Case
from banana_tests.families.family_list import RECORD_FAMILIES, family_of
from banana_tests.reports.sourced import OtherOutcome, Read, Sourced
from banana_tests.verdicts.matrix import Outcome
from banana_tests.verdicts.record import CaseRecord, RecordError

LEGACY_DELTA_PREFIX = "test_detects_degradation["
"""Schema 1: the shipped Δ test, whose name told its cases apart (each family knows its own)."""
LEGACY_DELTA = frozenset({Field.METRIC, Field.SEED_IMAGE, Field.STEP, Field.REFERENCE_STEP})
"""Schema 1: a Δ case on `banana_case` under another test function's name recorded all of these."""
RUN_PROPERTIES = frozenset({"variant", "dataset", "versions", "libraries", "device", "command"})
"""The run's facts: testsuite properties; in schema 1, on the first case of each process (a trend
case may be that one) or on every case in older files."""
VERDICT_FAILURES = (
    "Failed",
    "VerdictFailure",
    "banana_tests.verdicts.verdict.VerdictFailure",
    "AssertionError",
)
"""How a verdict's failure message starts: `pytest.fail` (fail_verdict), or as earlier versions
wrote it: their VerdictFailure (the full name under --tb=long) or a plain assertion."""


class JUnitError(ValueError):
    """A file that is not JUnit XML, or not JUnit XML written by the suite."""


def testcase_items(
    path: Path, case: ET.Element, suite_props: dict[str, str], stamp: datetime, order: tuple[int, int]
) -> tuple[list[tuple[Sourced[Read], dict[str, str]]], bool]:
    """One testcase as suite cases with their run metadata (a family's case gives its outcome and
    its record, for its section; none for another test), and whether it was read by schema 1's
    rules."""
    name = strip_xdist_group(case.get("name", ""))
    props = _properties(case)
    try:
        record = CaseRecord.read(props)
        legacy = record is None
        if record is None:
            record = legacy_record(name, props)
    except RecordError as exc:
        raise JUnitError(f"{path}: testcase {name!r}: {exc}") from exc
    if record is None:
        return [], False  # another test
    # Schema 1 carried the run's facts on cases; this version writes them on the testsuite.
    meta = (
        {**suite_props, **{k: v for k, v in props.items() if k in RUN_PROPERTIES}} if legacy else suite_props
    )
    outcome, message = outcome_of(case)
    if isinstance(record.key, CaseKey):
        # xfail (<skipped>) or strict XPASS (<failure>) under a baseline: the Δ decides
        return [(Sourced(record.cell(outcome, message).as_verdict(), path, stamp, order), meta)], legacy
    # The gate expects only a failed assertion (the verdict): any other failure is no verdict.
    verdict = Outcome.ERROR if outcome is Outcome.FAILED and not _asserted(case) else outcome
    found: list[tuple[Sourced[Read], dict[str, str]]] = [
        (Sourced(OtherOutcome(record.key, verdict, message), path, stamp, order), meta)
    ]
    family = family_of(record.kind)
    if family is not None:
        props = dict(record.properties())
        try:
            family.check(props)
        except (KeyError, ValueError) as exc:
            raise JUnitError(f"{path}: {record.kind.value} testcase {name!r}: {exc}") from exc
        found.append((Sourced(Case(record.key, verdict.value, props, message), path, stamp, order), {}))
    return found, legacy


def legacy_record(name: str, props: dict[str, str]) -> CaseRecord | None:
    """A testcase as record schema 1 told its cases apart: a family's case as the family says
    (`schema1_fields`), a Δ case by its test's name or, on `banana_case` in a user's test, by the
    properties it always recorded."""
    for family in RECORD_FAMILIES:
        try:
            fields = family.schema1_fields(name, props)
        except ValueError as exc:
            raise RecordError(str(exc)) from exc
        if fields is not None:
            return CaseRecord.of(family.kind, fields)
    if "kind" in props or not (name.startswith(LEGACY_DELTA_PREFIX) or props.keys() >= LEGACY_DELTA):
        return None
    return CaseRecord.of(CaseKind.DELTA, props)


def _properties(node: ET.Element) -> dict[str, str]:
    found = node.find("properties")
    if found is None:
        return {}
    return {p.get("name", ""): p.get("value", "") for p in found.findall("property")}


def outcome_of(case: ET.Element) -> tuple[Outcome, str]:
    """passed/failed/skipped/error from the testcase's children, with the message if any. Under
    a baseline an xfail is a failure still there, and a strict XPASS a case that now passes."""
    for tag, outcome in (("failure", Outcome.FAILED), ("error", Outcome.ERROR), ("skipped", Outcome.SKIPPED)):
        node = case.find(tag)
        if node is not None:
            message = node.get("message", "") or (node.text or "")
            if tag == "skipped" and node.get("type") == "pytest.xfail":
                return Outcome.FAILED, message
            if tag == "failure" and message.startswith("[XPASS(strict)]"):
                return Outcome.PASSED, message
            return outcome, message
    return Outcome.PASSED, ""


def _asserted(case: ET.Element) -> bool:
    """The case failed on its assertion, or xfailed (which a baseline allows only for that)."""
    failure, skipped = case.find("failure"), case.find("skipped")
    if skipped is not None:
        return skipped.get("type") == "pytest.xfail"
    return failure is not None and failure.get("message", "").startswith(VERDICT_FAILURES)
