"""The public scoring step: fill a score cache for a selection exactly as a suite run scores it,
without pytest, so a cluster task (Ray, Dask, Slurm) or `banana-tests score` can do the
expensive part and a later `pytest --pyargs banana_tests --cache-dir=SAME` only gives verdicts.

The selection, the metrics and the scoring are the suite's own objects (`SuiteState`: the same
planning, the same ScoreBook and loader, the same (metric, seed image) groups and batches), so a
score written here is the one the suite would have computed, under the same cache key. Loading a
metric tunes this process for scoring as a suite run does (banana_tests.scoring.process_tuning).

    from banana_tests.api import score
    summary = score("runs/", "brisque,niqe", seed_images=["alpha"], cache_dir="cache-a")
    assert summary.complete, summary.lines()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from banana_tests.scoring.batch_watch import BatchWatch, to_stderr
from banana_tests.scoring.score_book import unscored
from banana_tests.session.metric_import import resolve_within
from banana_tests.session.options import DEFAULT_METRICS, DEFAULT_STEPS, suite_options
from banana_tests.session.settings import Settings
from banana_tests.session.suite import SuiteState, named_metrics
from banana_tests.trajectories.plan import CasePlan
from banana_tests.trajectories.records import DataError, Record
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric
from metrics_under_test.weights import MissingWeights

__all__ = [
    "MetricSummary",
    "Progress",
    "ScoreSetupError",
    "ScoreSummary",
    "records_to_score",
    "score",
    "score_selection",
]

Group = tuple[str, str]  # (metric, seed image): the suite's scheduling group


class ScoreSetupError(ValueError):
    """Options, metrics or a data set that no scoring can use: what a suite run calls a usage
    error (exit 4 there, 2 for `banana-tests score`)."""


@dataclass(frozen=True)
class Progress:
    """One (metric, seed image) group done: `done` of `total` groups."""

    done: int
    total: int
    metric: str
    seed_image: str
    images: int
    seconds: float  # since scoring started


@dataclass(frozen=True)
class MetricSummary:
    """What one metric's selected images got. `failure` is why the metric could not load (none
    of its images scored); `skipped` when only `offline` or `all` chose it and its parameter
    files are missing, as the suite skips it."""

    metric: str
    images: int
    cached: int = 0
    scored: int = 0
    unscored: str | None = None  # one message naming every record without a score
    failure: str | None = None
    skipped: bool = False

    @property
    def complete(self) -> bool:
        return self.skipped or (self.failure is None and self.unscored is None)

    def line(self) -> str:
        if self.failure is not None or self.skipped:
            return f"{self.metric}: {'skipped' if self.skipped else 'failed'}: {self.failure}"
        text = f"{self.metric}: {self.images} images, {self.cached} from the cache, {self.scored} scored"
        return text if self.unscored is None else f"{text}; {self.unscored}"


@dataclass(frozen=True)
class ScoreSummary:
    """A scoring pass: each metric's counts, the cache file filled and the wall time."""

    metrics: tuple[MetricSummary, ...]
    cache: Path
    seconds: float

    @property
    def complete(self) -> bool:
        """Every selected image has a score of every metric that could load (or was skipped)."""
        return all(m.complete for m in self.metrics)

    def lines(self) -> list[str]:
        return [m.line() for m in self.metrics]


def score(
    dataset: str | Path | None = None,
    metrics: str | Sequence[str] = DEFAULT_METRICS,
    *,
    variant: str = "replicate",
    seed_images: Sequence[str] = (),
    steps: str | Sequence[int] = DEFAULT_STEPS,
    cache_dir: str | Path = ".banana_cache",
    device: str = "auto",
    weights_dir: str | Path | None = None,
    options: Mapping[str, object] | None = None,
    root: Path | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> ScoreSummary:
    """Score every image the suite's Δ cases of this selection need, with each metric, into the
    score cache at `cache_dir` (its file is `scores.sqlite`), plus the oracle's PSNR/SSIM
    figures. The arguments are the suite's options of the same names (`--dataset`, `--metric`,
    `--variant`, `--seed-image`, `--steps`, `--cache-dir`, `--device`, `--weights-dir`); any
    other selection option goes in `options` by its short name, e.g. `{"runs": 2, "where":
    ["temperature=0.4"]}`. Relative paths are taken from `root` (default: the current folder).
    Raises ScoreSetupError for what a suite run would call a usage error; an image or a metric
    that cannot be scored is in the summary, never raised."""
    given: dict[str, object] = {
        "dataset": None if dataset is None else str(dataset),
        "metric": metrics if isinstance(metrics, str) else ",".join(metrics),
        "variant": variant,
        "seed-image": list(seed_images),
        "steps": steps if isinstance(steps, str) else ",".join(map(str, steps)),
        "cache-dir": str(cache_dir),
        "device": device,
        "weights-dir": None if weights_dir is None else str(weights_dir),
        **(options or {}),
    }
    return score_selection(settings_from(given, root or Path.cwd()), progress)


def settings_from(values: Mapping[str, object], root: Path) -> Settings:
    """The suite's settings for the options in `values` (short names), every other option at
    its default; ScoreSetupError naming an option no run can satisfy."""
    defaults = {o.name: o.attrs.get("default") for o in suite_options()}
    unknown = sorted(set(values) - set(defaults))
    if unknown:
        raise ScoreSetupError(f"no such suite option: {', '.join('--' + u for u in unknown)}")
    chosen = {**defaults, **values}
    try:
        return Settings.from_values(chosen.__getitem__, root, root, args=[])
    except ValueError as exc:
        raise ScoreSetupError(str(exc)) from exc


def score_selection(
    settings: Settings,
    progress: Callable[[Progress], None] | None = None,
    say: Callable[[str], None] = to_stderr,
) -> ScoreSummary:
    """`score` for settings a suite run would have (`banana-tests score` builds them from its
    options); `say` prints the long-batch heartbeat lines."""
    if settings.cache_dir is None:
        raise ScoreSetupError("--no-cache: scoring without the score cache keeps nothing")
    start = time.perf_counter()
    state = suite_state(settings, say)
    try:
        return _score(state, progress, start)
    finally:  # its WAL is folded into the file: a task can ship or merge the file as it is
        cache = state.scoring.book.cache
        if cache is not None:
            cache.close()


def selected_plans(state: SuiteState) -> list[CasePlan]:
    """The Δ cases of the selection, `--shard`'s part of them, selected in the state's planning
    (whose `needs` then holds each (metric, seed image) group's records)."""
    plans = list(state.plans.values())
    shard = state.settings.shard
    if shard is not None:  # its part of the selection's units, dealt as `pytest --shard` deals them
        from banana_tests.scheduler.metric_groups import Group as Unit
        from banana_tests.session.shard_selection import selection_units

        mine = shard.deal(selection_units(state))
        plans = [plan for plan in plans if Unit(plan.key.metric, plan.key.seed_image) in mine]
    state.planning.select(plan.key for plan in plans)
    return plans


def records_to_score(settings: Settings) -> dict[Group, list[Record]]:
    """Each (metric, seed image) group's records that `score` would score for `settings`, found
    without building a metric, importing torch or opening a cache."""
    state = suite_state(settings, to_stderr)
    selected_plans(state)
    return {group: list(dict.fromkeys(found)) for group, found in state.planning.needs.items()}


def _score(state: SuiteState, progress: Callable[[Progress], None] | None, start: float) -> ScoreSummary:
    plans = selected_plans(state)
    firsts, needs = first_cases(plans), state.planning.needs
    failures: dict[str, Exception] = {}
    for done, group in enumerate(needs, 1):  # a metric's groups follow each other: one model at a time
        if group[0] not in failures:
            failure = score_group(state, group, firsts.get(group))
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
    return ScoreSummary(tuple(summaries), cache.path, time.perf_counter() - start)


def suite_state(settings: Settings, say: Callable[[str], None]) -> SuiteState:
    """The suite's state for `settings`, its metrics resolved, weights staged and cases planned,
    as at a suite run's collection."""
    watch = BatchWatch(settings.heartbeat, settings.batch_timeout, say, settings.load_limit)
    try:
        specs, hung = resolve_within(settings, watch)
    except (UnknownMetric, MetricError, ValueError) as exc:
        raise ScoreSetupError(str(exc)) from exc
    state = SuiteState.from_settings(settings, specs, say, hung, watch)
    try:
        state.collect()
    except pytest.UsageError as exc:
        raise ScoreSetupError(str(exc)) from exc
    return state


def first_cases(plans: Sequence[CasePlan]) -> dict[Group, CasePlan]:
    """Each group's first case that can be scored: the suite's first case of a group scores its
    own pairs, then the group's other records, in one pass (SuiteState.gap); the same order
    here gives the same batches, so the same scores."""
    found: dict[Group, CasePlan] = {}
    for plan in plans:
        if not plan.error:
            found.setdefault((plan.key.metric, plan.key.seed_image), plan)
    return found


def score_group(state: SuiteState, group: Group, first: CasePlan | None) -> Exception | None:
    """Score one group's records as its first case in a suite run would; what stopped the metric
    when it cannot load or breaks the protocol (the group's records then have no score)."""
    spec, needs = state.metrics[group[0]], state.planning.needs[group]
    own: list[Record] = [] if first is None else [*(a for a, _ in first.pairs), *(b for _, b in first.pairs)]
    try:
        state.scoring.book.scores(spec, own, needs)
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
        named = metric in named_metrics(state.settings.metric, list(state.metrics.values()))
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
