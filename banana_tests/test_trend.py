"""Trend cases (`--trend`): does each metric's score fall with the step on each seed image?"""

from __future__ import annotations

from banana_tests.trend import Trend


def test_trend_detects_degradation(banana_trend: Trend) -> None:
    assert banana_trend.detected, banana_trend.message()
