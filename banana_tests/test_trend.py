"""Trend cases (`--trend`): does each metric's score fall with the step on each seed image?"""

from __future__ import annotations

import pytest

from banana_tests.trend import Trend
from banana_tests.verdicts import fail_verdict


def test_trend_detects_degradation(banana_trend: Trend, pytestconfig: pytest.Config) -> None:
    if not banana_trend.detected:
        fail_verdict(banana_trend.message(), banana_trend.summary(), pytestconfig)
