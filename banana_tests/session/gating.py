"""`--baseline`: cases that failed before are expected failures, so CI only flags what changed.

A baseline case that fails again is XFAIL; a new failure is a real failure; a baseline case that
now passes is XPASS, and a failure under `--strict-baseline`, so the baseline gets refreshed.
Δ cells, trend cases, control degradations and invariance checks are all gated: a baseline written from a run
makes that run pass. Errors (bad data) and snapshot drift are never expected: fix those.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from banana_tests.cases import CASE_FIXTURE, CaseKey
from banana_tests.families.family_list import FAMILIES
from banana_tests.verdicts.baseline import BaselineError, Known, load_baseline


def item_key(item: pytest.Item) -> Known | None:
    """The suite case an item runs, from its parameters; None for any other test."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    params = callspec.params
    key = params.get(CASE_FIXTURE)
    if isinstance(key, CaseKey):
        return key
    fixtures = getattr(item, "fixturenames", ())
    return next((k for f in FAMILIES if (k := f.item_key(params, fixtures)) is not None), None)


VERDICT_FAILURES = (pytest.fail.Exception, AssertionError)
"""How a verdict fails: the suite's through `pytest.fail` (fail_verdict), a user's own test on
`banana_case` by an assertion. Any other error is no verdict a baseline can expect."""


class BaselineGate:
    """Marks the suite's cases that the baseline lists with a (strict or not) xfail."""

    def __init__(self, path: Path, strict: bool) -> None:
        try:
            self.keys = load_baseline(path)
        except BaselineError as exc:
            raise pytest.UsageError(f"--baseline: {exc}") from exc
        self.path = path
        self.strict = strict

    def expected_failure(self, key: Known) -> bool:
        """A baseline Δ entry without a run covers every run of its cell."""
        return key in self.keys or (isinstance(key, CaseKey) and replace(key, run=None) in self.keys)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            key = item_key(item)
            if key is not None and self.expected_failure(key):
                reason = f"fails in baseline {self.path.name}"
                mark = pytest.mark.xfail(raises=VERDICT_FAILURES, strict=self.strict, reason=reason)
                item.add_marker(mark)

    def pytest_report_header(self) -> str:
        mode = "strict: a fixed case fails" if self.strict else "a fixed case is XPASS"
        return f"banana-tests baseline: {self.path} ({len(self.keys)} expected failures; {mode})"
