"""Trend cases (`--trend`): does each metric's score fall with the step on each seed image?

`banana_trend` is measured with the scores of its metric's `Scorer`, the one `banana_metric` gives.
"""

from __future__ import annotations

import pytest

from banana_tests.verdicts.trend import Trend
from banana_tests.verdicts.verdict import fail_verdict


def test_trend_detects_degradation(banana_trend: Trend, request: pytest.FixtureRequest) -> None:
    # The trend's fixture only, and `request` rather than `pytestconfig`: each fixture a case sets
    # up is paid on every one of a run's cases.
    if not banana_trend.detected:
        fail_verdict(banana_trend.message(), banana_trend.summary(), request.config)
