"""Trend cases (`--trend`): does each metric's score fall with the step on each seed image?

Written on the public fixtures: `banana_trend` is measured with `banana_metric`'s scores.
"""

from __future__ import annotations

import pytest

from banana_tests.session.scorer import Scorer
from banana_tests.verdicts.trend import Trend
from banana_tests.verdicts.verdict import fail_verdict


def test_trend_detects_degradation(
    banana_metric: Scorer, banana_trend: Trend, request: pytest.FixtureRequest
) -> None:
    # banana_metric (the id's first part) is the scorer that measured banana_trend. `request`, not
    # `pytestconfig`: one fixture fewer to resolve on each of a run's cases.
    if not banana_trend.detected:
        fail_verdict(banana_trend.message(), banana_trend.summary(), request.config)
