"""Trend cases (`--trend`): does each metric's score fall with the step on each seed image?

`banana_trend` is measured with the scores of its metric's `Scorer`, the one `banana_metric` gives;
its cases are planned on the run-mean Δ plans (banana_tests.core.suite) when collection reads
the data set. A module of yours runs them by importing `banana_trend` and the test.
"""

from __future__ import annotations

import pytest

from banana_tests.families.trend import FIXTURE, Trend, TrendKey, TrendPlan, measure, plan_trends
from banana_tests.session.case_fixtures import measured
from banana_tests.session.ownership import STATE
from banana_tests.session.run_state import scorer_of
from banana_tests.verdicts.record import CaseRecord
from banana_tests.verdicts.verdict import fail_verdict

PLANS = pytest.StashKey[dict[TrendKey, TrendPlan]]()


def trend_plans(config: pytest.Config) -> dict[TrendKey, TrendPlan]:
    """The run's trends, one per metric and seed image, planned once a process (the plugin
    parametrizes the test with their keys: banana_tests.families.trend.TrendFamily.cases)."""
    if PLANS not in config.stash:
        state = config.stash[STATE]
        state.try_collect()
        config.stash[PLANS] = {t.key: t for t in plan_trends(state.planning.run_means())}
    return config.stash[PLANS]


@pytest.fixture(name=FIXTURE)
def banana_trend(request: pytest.FixtureRequest) -> Trend:
    """One (metric, seed image) trend measured with its metric's `Scorer` (the one `banana_metric`
    gives), its images scored like the Δ cases', with its JUnit properties; skips when the metric
    cannot load (see banana_tests.session.scorer.load_or_skip)."""
    state, key = request.config.stash[STATE], request.param
    plan = trend_plans(request.config)[key]
    scorer = scorer_of(request.config, state, key.metric)
    return measured(
        request,
        CaseRecord(plan.key, plan.reference_step),
        lambda: scorer.guard(lambda: measure(plan, scorer.spec, scorer.book)),
    )


def test_trend_detects_degradation(banana_trend: Trend, request: pytest.FixtureRequest) -> None:
    # The trend's fixture only, and `request` rather than `pytestconfig`: each fixture a case sets
    # up is paid on every one of a run's cases.
    if not banana_trend.detected:
        fail_verdict(banana_trend.message(), banana_trend.summary(), request.config)
