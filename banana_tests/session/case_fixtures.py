"""The work behind the suite's own fixtures: one Δ case's verdict and one trend, each measured
with its metric's `Scorer` (the one `banana_metric` gives) and recorded as JUnit properties, so
the plugin's fixtures stay a line into the session."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from banana_tests.cases import CaseKey, Field
from banana_tests.scoring import oracle
from banana_tests.core.suite import SuiteState
from banana_tests.verdicts.outcome import Outcome
from banana_tests.verdicts.record import CaseRecord, figure_properties
from banana_tests.verdicts.trend import Trend, TrendKey
from banana_tests.verdicts.verdict import Verdict, skip_as

Measured = TypeVar("Measured", Verdict, Trend)


def measured(request: pytest.FixtureRequest, record: CaseRecord, measure: Callable[[], Measured]) -> Measured:
    """Record the case's identity first (so a skip or error still names it), then measure it
    (the scorer skips or fails a metric that cannot load) and record its figures."""
    properties = request.node.user_properties
    properties.extend(record.identity())
    result = measure()
    properties.extend(figure_properties(result.properties()))
    return result


def record_figure(request: pytest.FixtureRequest, name: Field, value: str) -> None:
    """One more figure of the running case. Straight into `user_properties`: the
    `record_property` fixture warns on every case under junit_family xunit2 (pytest's default
    in a user's project), and the properties are written all the same."""
    request.node.user_properties.extend(figure_properties({name: value}))


def case_verdict(state: SuiteState, request: pytest.FixtureRequest, key: CaseKey) -> Verdict:
    """The case's verdict, Δ by `Scorer.delta`, with its score-cache and oracle figures; a trial
    whose step did not change, or a Δ within its uncertainty, skips as its own outcome, never a
    pass or the metric's failure."""
    plan = state.planning.plans[key]
    scorer = state.scoring.scorer(key.metric)
    strict = state.settings.strict_runs
    verdict = measured(
        request,
        CaseRecord(key, plan.reference_step),
        lambda: Verdict(key, plan.reference_step, state.gap(key, scorer), strict),
    )
    record_figure(request, Field.SCORE_CACHED, state.score_cached(key))
    trial = oracle.Trial(tuple(state.changes(key)))
    for name, value in trial.properties().items():
        record_figure(request, name, value)
    if not trial.valid:
        skip_as(Outcome.INVALID, trial.reason(key, plan.reference_step))
    if verdict.unresolved:
        skip_as(Outcome.UNRESOLVED, verdict.unresolved_reason())
    return verdict


def trend(state: SuiteState, request: pytest.FixtureRequest, key: TrendKey) -> Trend:
    """One (metric, seed image) trend, its images scored like the Δ cases'."""
    plan = state.planning.trends[key]
    scorer = state.scoring.scorer(key.metric)
    return measured(request, CaseRecord(plan.key, plan.reference_step), lambda: state.trend_of(key, scorer))
