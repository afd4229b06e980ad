"""The work behind the suite's fixtures: who chooses the metrics of a test, and one case
parametrized per key, measured with its metric's `Scorer` and recorded as JUnit properties, so
the plugin's fixture, and a family's, stay a line into the session.

The plugin parametrizes `banana_metric` over the `--metric` selection first, so every id starts
with the metric (the scheduler keeps a metric's tests together by it). A user may choose instead
(docs/trial.md "Choosing metrics"), in any of pytest's ways: `@pytest.mark.parametrize(
"banana_metric", [...], indirect=True)`, a fixture overriding `banana_metric` with `params=[...]`,
or `metafunc.parametrize("banana_metric", ...)` in their own `pytest_generate_tests`. Each of those
calls `Metafunc.parametrize` after the plugin's hook, so the plugin's default stays in place only
until one of them names `banana_metric`: then it is withdrawn and the user's choice is the test's,
as if the plugin had never parametrized it. An override without params gets the selected metric
as `request.param`; one that returns another metric's `Scorer` fails the test (`wrong_metric`),
never runs it on a metric its id does not name.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

import pytest

from banana_tests.cases import METRIC_FIXTURE, CaseKey, FamilyKey, Field
from banana_tests.core.suite import SuiteState
from banana_tests.families.degradation import DegradationSettings, Verdict
from banana_tests.scoring import oracle
from banana_tests.scoring.batching import group_records
from banana_tests.session.run_state import scorer_of
from banana_tests.session.scorer import Scorer, data_errors_in_one_line
from banana_tests.trajectories.records import DataError
from banana_tests.verdicts.gaps import Gap
from banana_tests.verdicts.matrix import Outcome
from banana_tests.verdicts.record import CaseRecord, figure_properties
from banana_tests.verdicts.verdict import skip_as


class Figures(Protocol):
    """A measured case: its figures as record fields."""

    def properties(self) -> dict[Field, str]: ...


Measured = TypeVar("Measured", bound=Figures)


def parametrize_cases(metafunc: pytest.Metafunc, keys: Sequence[CaseKey | FamilyKey], fixture: str) -> None:
    """One test per case, its id starting with its metric. A test that also requests
    `banana_metric` gets the case's metric as it, in (metric, case) pairs: a fixture set up and
    torn down again on each case, which the shipped tests spare themselves."""
    ids = [k.test_id for k in keys]
    if METRIC_FIXTURE in metafunc.fixturenames:
        pairs = [(k.metric, k) for k in keys]
        metafunc.parametrize((METRIC_FIXTURE, fixture), pairs, ids=ids, indirect=True, scope="function")
    else:
        metafunc.parametrize(fixture, keys, ids=ids, indirect=True)


def measured(request: pytest.FixtureRequest, record: CaseRecord, measure: Callable[[], Measured]) -> Measured:
    """Record the case's identity first (so a skip or error still names it), then measure it
    (the scorer skips or errors a metric that cannot load; a bad record or image errors the case
    in one line) and record its figures."""
    properties = request.node.user_properties
    properties.extend(record.identity())
    with data_errors_in_one_line():
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
    scorer = scorer_of(request.config, state, key.metric)
    strict = DegradationSettings.of(state.settings).strict_runs
    verdict = measured(
        request,
        CaseRecord(key, plan.reference_step),
        lambda: Verdict(key, plan.reference_step, gap(state, key, scorer), strict),
    )
    record_figure(request, Field.SCORE_CACHED, state.score_cached(key))
    with data_errors_in_one_line():  # an image the oracle cannot decode
        trial = oracle.Trial(tuple(state.changes(key)))
    for name, value in trial.properties().items():
        record_figure(request, name, value)
    if not trial.valid:
        skip_as(Outcome.INVALID, trial.reason(key, plan.reference_step))
    if verdict.unresolved:
        skip_as(Outcome.UNRESOLVED, verdict.unresolved_reason())
    return verdict


def gap(state: SuiteState, key: CaseKey, scorer: Scorer) -> Gap:
    """Δ for one case with that metric's scorer (the public Δ engine). The first case of its
    (metric, seed image) in this process also scores every record the group's other cases
    need, in one pass; later cases pass none, since the book scans all it is given
    (banana_tests.scoring.batching, whose order banana_tests.api follows too). The group is
    the scheduler's (banana_tests.scheduler.metric_groups): a worker scores the groups it
    runs, never another worker's, and the batches are the same serial and under xdist, so
    are the scores."""
    plan = state.planning.plans[key]
    if plan.error:
        raise DataError(plan.error)
    upcoming = group_records((key.metric, key.seed_image), state.prefetched, state.planning.needs)
    return scorer.delta(plan.pairs, upcoming)


SUPPORTED = (
    "choose a test's metrics with @pytest.mark.parametrize('banana_metric', [...], indirect=True), "
    "params=[...] on your banana_metric fixture, or metafunc.parametrize('banana_metric', [...], "
    "indirect=True) in pytest_generate_tests (docs/trial.md)"
)


def argnames_of(argnames: str | Sequence[str]) -> list[str]:
    """The names a `parametrize` call sets, as pytest reads them ("a, b" or a sequence)."""
    if isinstance(argnames, str):
        return [name.strip() for name in argnames.split(",") if name.strip()]
    return list(argnames)


@contextmanager
def default_metrics(metafunc: pytest.Metafunc, metrics: Sequence[str]) -> Generator[None, None, None]:
    """Parametrize `banana_metric` over `metrics` now, outermost, and withdraw it when a later
    `parametrize` call inside the block names `banana_metric`: the calls made since are replayed
    without it, then the user's call is made."""
    plain = metafunc.parametrize
    since: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    withdrawn = False

    def parametrize(argnames: str | Sequence[str], argvalues: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal withdrawn
        argvalues = list(argvalues)  # a generator would be spent before a replay
        if not withdrawn and METRIC_FIXTURE in argnames_of(argnames):
            withdrawn = True
            metafunc._calls = []  # the plugin's were the first calls: nothing else to keep
            for replayed_args, replayed_kwargs in since:
                plain(*replayed_args, **replayed_kwargs)
        elif not withdrawn:
            since.append(((argnames, argvalues, *args), kwargs))
        plain(argnames, argvalues, *args, **kwargs)

    plain(METRIC_FIXTURE, list(metrics), ids=list(metrics), indirect=True)
    setattr(metafunc, "parametrize", parametrize)  # noqa: B010 - an instance attribute shadows the method
    try:
        yield
    finally:
        delattr(metafunc, "parametrize")


def wrong_metric(item: pytest.Item, metrics: Sequence[str]) -> str | None:
    """Why `item` cannot run: its `banana_metric` is parametrized with one selected metric and the
    fixture (a user's override) returned another's `Scorer`; None when it can."""
    from banana_tests.session.scorer import Scorer

    callspec = getattr(item, "callspec", None)
    scorer = getattr(item, "funcargs", {}).get(METRIC_FIXTURE)
    if callspec is None or not isinstance(scorer, Scorer):
        return None
    wanted = callspec.params.get(METRIC_FIXTURE)
    if not isinstance(wanted, str) or wanted == scorer.name or wanted not in metrics:
        return None
    return (
        f"banana_metric: {item.nodeid} is parametrized with {wanted!r} but your banana_metric "
        f"fixture returned the Scorer for {scorer.name!r}. A fixture overriding banana_metric without "
        "params gets the metric as request.param, or from the plugin's banana_metric it requests; "
        + SUPPORTED
    )
