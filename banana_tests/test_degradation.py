"""The failure matrix: does each metric score the edited image worse than the reference step?"""

from __future__ import annotations

from banana_tests.verdicts import Verdict


def test_detects_degradation(banana_case: Verdict) -> None:
    assert banana_case.detected, banana_case.message()
