"""Scoring a selection outside a test, as a suite run's cases score it: each (metric, seed image)
group's records, the group's first case first (SuiteState.gap's order, banana_tests.scoring.batching),
one metric's groups after another, then the oracle's figures; what could not be scored is
counted, never raised."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from banana_tests.core.suite import SuiteState, named_metrics
from banana_tests.scoring.batching import case_records, group_records
from banana_tests.scoring.pass_summary import Group, MetricSummary, Progress, ScoreSummary
from banana_tests.scoring.returned_scores import unscored
from banana_tests.trajectories.case_plans import CasePlan
from banana_tests.trajectories.records import DataError, Problem, Record
from metrics_under_test.weights import MissingWeights


def selected_plans(state: SuiteState) -> list[CasePlan]:
    """The Δ cases of the selection, `--shard`'s part of them (dealt by Shard.deal, as `pytest
    --shard` deals them), selected in the state's planning (whose `needs` then holds each
    (metric, seed image) group's records)."""
    plans = list(state.planning.plans.values())
    shard = state.settings.shard
    if shard is not None:
        from banana_tests.core.suite import selection_units
        from banana_tests.scheduler.sharding import Group as Unit

        mine = shard.deal(selection_units(state))
        plans = [plan for plan in plans if Unit(plan.key.metric, plan.key.seed_image) in mine]
    state.planning.select(plan.key for plan in plans)
    return plans


def unusable(state: SuiteState, plans: Sequence[CasePlan]) -> tuple[Problem, ...]:
    """The selection's records that cannot be used (a path that escapes the set, a bad line), of
    the seed images of `plans` or of none known: their cases error in a suite run, so `plan` and
    `score` name each and exit 1, as pytest does."""
    seeds = {plan.key.seed_image for plan in plans}
    return tuple(p for p in state.planning.problems if p.seed_image is None or p.seed_image in seeds)


def score_state(state: SuiteState, progress: Callable[[Progress], None] | None, start: float) -> ScoreSummary:
    plans = selected_plans(state)
    firsts, needs = first_cases(plans), state.planning.needs
    failures: dict[str, Exception] = {}
    passed: set[Group] = set()
    for done, group in enumerate(needs, 1):  # a metric's groups follow each other: one model at a time
        if group[0] not in failures:
            failure = score_group(state, group, firsts.get(group), passed)
            if failure is not None:
                failures[group[0]] = failure
        if progress is not None:
            images = len(dict.fromkeys(needs[group]))
            progress(Progress(done, len(needs), *group, images, time.perf_counter() - start))
    summaries = []
    for metric in state.metrics:
        records = list(dict.fromkeys(r for g, found in needs.items() if g[0] == metric for r in found))
        summaries.append(summarise(state, metric, records, failures.get(metric)))
    score_oracle(state, plans)
    cache = state.scoring.book.cache
    assert cache is not None  # score_selection refuses --no-cache
    problems = tuple(map(str, unusable(state, plans)))
    return ScoreSummary(tuple(summaries), cache.path, time.perf_counter() - start, problems)


def first_cases(plans: Sequence[CasePlan]) -> dict[Group, CasePlan]:
    """Each group's first case that can be scored: the case that, in a suite run, scores the
    group's records in one pass (SuiteState.gap, banana_tests.scoring.batching)."""
    found: dict[Group, CasePlan] = {}
    for plan in plans:
        if not plan.error:
            found.setdefault((plan.key.metric, plan.key.seed_image), plan)
    return found


def score_group(
    state: SuiteState, group: Group, first: CasePlan | None, passed: set[Group]
) -> Exception | None:
    """Score one group's records as its first case in a suite run would, in the batching order
    the suite's cases follow; what stopped the metric when it cannot load or breaks the protocol
    (the group's records then have no score)."""
    spec = state.metrics[group[0]]
    own: list[Record] = [] if first is None else case_records(first.pairs)
    try:
        state.scoring.book.scores(spec, own, group_records(group, passed, state.planning.needs))
    except DataError:
        pass  # the records' own errors: summarise lists them
    except Exception as exc:  # a metric that cannot be built or breaks the protocol
        return exc
    return None


def summarise(
    state: SuiteState, metric: str, records: list[Record], failure: Exception | None
) -> MetricSummary:
    """The metric's counts; a metric that failed is skipped when the suite would skip its cases:
    missing parameter files of a metric only `offline` or `all` chose."""
    spec, book = state.metrics[metric], state.scoring.book
    if failure is not None:
        named = metric in named_metrics(state.settings.metrics, list(state.metrics.values()))
        why = " ".join(f"{type(failure).__name__}: {failure}".split())
        skipped = isinstance(failure, MissingWeights) and not named
        return MetricSummary(metric, len(records), failure=why, skipped=skipped)
    cached = sum(book.cached(spec, records))
    errors = book.failures(spec, records)
    error = unscored(records, errors)
    scored = len(records) - cached - len(errors)
    return MetricSummary(metric, len(records), cached, scored, None if error is None else str(error))


def score_oracle(state: SuiteState, plans: Sequence[CasePlan]) -> None:
    """The oracle's PSNR/SSIM figures of every case's pairs into the cache, so the verdict pass
    decodes no image for them either; a pair that cannot be read is the metrics' unscored record."""
    seen: set[tuple[tuple[Record, Record], ...]] = set()
    for plan in plans:
        if plan.error or plan.pairs in seen:
            continue
        seen.add(plan.pairs)
        try:
            state.scoring.oracle.changes(plan.pairs, state.planning.companions)
        except DataError:
            continue
