"""`--baseline`: cells that failed before are expected failures, so CI only flags what changed.

A baseline cell that fails again is XFAIL; a new failure is a real failure; a baseline cell that
now passes is XPASS, and a failure under `--strict-baseline`, so the baseline gets refreshed.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from banana_tests.baseline import BaselineError, load_baseline
from banana_tests.cases import CASE_FIXTURE, CaseKey


class BaselineGate:
    """Marks the suite's cases that the baseline lists with a (strict or not) xfail."""

    def __init__(self, path: Path, strict: bool) -> None:
        try:
            self.keys = load_baseline(path)
        except BaselineError as exc:
            raise pytest.UsageError(f"--baseline: {exc}") from exc
        self.path = path
        self.strict = strict

    def expected_failure(self, key: CaseKey) -> bool:
        """A baseline entry without a run covers every run of its cell."""
        return key in self.keys or replace(key, run=None) in self.keys

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            callspec = getattr(item, "callspec", None)
            key = callspec.params.get(CASE_FIXTURE) if callspec is not None else None
            if isinstance(key, CaseKey) and self.expected_failure(key):
                reason = f"fails in baseline {self.path.name}"
                item.add_marker(pytest.mark.xfail(raises=AssertionError, strict=self.strict, reason=reason))

    def pytest_report_header(self) -> str:
        mode = "strict: a fixed cell fails" if self.strict else "a fixed cell is XPASS"
        return f"banana-tests baseline: {self.path} ({len(self.keys)} expected failures; {mode})"
