"""The failure matrix: does each metric score the edited image worse than the reference step?

Each case is one metric's verdict (the id's first part) on one (seed image, step[, run]) of the
set: `banana_case`, Δ by the metric's `Scorer.delta`, the `Scorer` the public `banana_metric`
fixture gives (a test of yours that requests both gets the case's metric as `banana_metric`).
"""

from __future__ import annotations

import pytest

from banana_tests.families.degradation import Verdict
from banana_tests.verdicts.verdict import fail_verdict


def test_detects_degradation(banana_case: Verdict, request: pytest.FixtureRequest) -> None:
    # The case's fixture only, and `request` rather than `pytestconfig`: each fixture a case sets
    # up is paid on every one of a run's cases.
    if not banana_case.detected:
        fail_verdict(banana_case.message(), banana_case.summary(), request.config)
