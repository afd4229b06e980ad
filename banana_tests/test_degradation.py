"""The failure matrix: does each metric score the edited image worse than the reference step?"""

from __future__ import annotations

import pytest

from banana_tests.verdicts import Verdict, fail_verdict


def test_detects_degradation(banana_case: Verdict, pytestconfig: pytest.Config) -> None:
    if not banana_case.detected:
        fail_verdict(banana_case.message(), banana_case.summary(), pytestconfig)
