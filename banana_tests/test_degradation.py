"""The failure matrix: does each metric score the edited image worse than the reference step?

Written on the public fixtures: `banana_metric` is the metric under trial (the id's first part)
and `banana_case` the verdict its `delta` gives on one (seed image, step[, run]) of the set.
"""

from __future__ import annotations

import pytest

from banana_tests.session.scorer import Scorer
from banana_tests.verdicts.verdict import Verdict, fail_verdict


def test_detects_degradation(
    banana_metric: Scorer, banana_case: Verdict, request: pytest.FixtureRequest
) -> None:
    # banana_metric (the id's first part) is the scorer that measured banana_case. `request`, not
    # `pytestconfig`: one fixture fewer to resolve on each of a run's cases.
    if not banana_case.detected:
        fail_verdict(banana_case.message(), banana_case.summary(), request.config)
