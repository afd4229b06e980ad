"""The public scoring step: fill a score cache for a selection exactly as a suite run scores it,
without pytest, so a cluster task (Ray, Dask, Slurm) or `banana-tests score` can do the
expensive part and a later `pytest --pyargs banana_tests --cache-dir=SAME` only gives verdicts.

The selection, the metrics and the scoring are the suite's own objects (`SuiteState`: the same
planning, the same ScoreBook and loader, the same (metric, seed image) groups, batched in the
same order, banana_tests.scoring.batching), so a score written here is the one the suite would
have computed, under the same cache key. Loading a metric tunes this process for scoring as a
suite run does (banana_tests.scoring.process_tuning). Neither importing this module nor scoring
imports pytest: the options go through the suite's validator (banana_tests.core.settings) and the
selection is the pytest-free core's (its planning and scoring imported when a selection is built).

    from pathlib import Path
    from banana_tests.api import ScoreRequest, score
    summary = score(ScoreRequest(Path("runs"), ["brisque", "niqe"], seed_images=["alpha"]))
    assert summary.complete, summary.lines()
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from banana_tests.core.machine import Device, DeviceChoice
from banana_tests.core.settings import Settings
from banana_tests.core.suite_options import DEFAULT_STEPS, suite_options
from banana_tests.scheduler.sharding import Shard
from banana_tests.scoring.metric_calls import BatchWatch, to_stderr
from banana_tests.scoring.pass_summary import Group, MetricSummary, Progress, ScoreSummary
from banana_tests.scoring.score_cache import Merged
from banana_tests.scoring.score_cache import merge as merge_caches
from banana_tests.trajectories.case_plans import parse_steps
from banana_tests.trajectories.records import DataError, Problem, Record
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import DEFAULT_METRICS, MetricRequest, UnknownMetric
from metrics_under_test.registry import resolve as resolve_metric
from metrics_under_test.spec import Backend, Cost, MetricSpec

if TYPE_CHECKING:  # the core's planning and scoring: imported when a selection is built
    from banana_tests.core.suite import SuiteState

__all__ = [
    "Backend",
    "Cost",
    "Device",
    "DeviceChoice",
    "Group",
    "Merged",
    "MetricRequest",
    "MetricSpec",
    "MetricSummary",
    "Problem",
    "Progress",
    "Record",
    "ScoreRequest",
    "ScoreSetupError",
    "ScoreSummary",
    "Settings",
    "Shard",
    "merge_caches",
    "records_to_score",
    "resolve_metric",
    "score",
    "score_selection",
    "scoring_settings",
    "seed_images",
    "selection_to_score",
    "settings_from_options",
]

_DEFAULT_METRICS: tuple[str, ...] = tuple(r.text for r in DEFAULT_METRICS)
_DEFAULT_STEPS: tuple[int, ...] = tuple(parse_steps(DEFAULT_STEPS) or ())


class ScoreSetupError(ValueError):
    """Options, metrics or a data set that no scoring can use: what a suite run calls a usage
    error (exit 4 there, 2 for `banana-tests score`)."""


@dataclass(frozen=True)
class ScoreRequest:
    """A selection to score, in the suite's options of the same names (every other option at its
    default), read by the suite's own validator: `dataset` a folder, files or `hf:<repo_id>`
    (None: the embedded set); `metrics` names or `module:callable` targets (a str is `--metric`'s
    comma list); `steps` None for every step; `where` `key=value` filters. Relative paths are
    taken from `root` (default: the current folder)."""

    dataset: Path | str | None = None
    metrics: Sequence[str] = _DEFAULT_METRICS
    variant: str = "replicate"
    seed_images: Sequence[str] = ()
    steps: Sequence[int] | None = _DEFAULT_STEPS
    runs: int | None = None
    where: Sequence[str] = ()
    shard: Shard | None = None
    cache_dir: Path = Path(".banana_cache")
    device: Device | DeviceChoice = Device.AUTO
    weights_dir: Path | None = None
    root: Path | None = None


def score(request: ScoreRequest, progress: Callable[[Progress], None] | None = None) -> ScoreSummary:
    """Score every image the suite's Δ cases of `request` need, with each metric, into the score
    cache at its `cache_dir` (its file is `scores.sqlite`), plus the oracle's PSNR/SSIM figures;
    `progress` is called after each (metric, seed image). Raises ScoreSetupError for what a suite
    run would call a usage error; an image or a metric that cannot be scored is in the summary,
    never raised."""
    return score_selection(scoring_settings(request), progress)


def scoring_settings(request: ScoreRequest) -> Settings:
    """The suite's settings for `request`; ScoreSetupError naming an option no run can satisfy."""
    given: dict[str, object] = {
        "dataset": request.dataset,
        "metric": request.metrics,
        "variant": request.variant,
        "seed-image": request.seed_images,
        "steps": request.steps,
        "runs": request.runs,
        "where": request.where,
        "shard": request.shard,
        "cache-dir": request.cache_dir,
        "device": request.device,
        "weights-dir": request.weights_dir,
    }
    return settings_from_options(given, request.root or Path.cwd())


def settings_from_options(values: Mapping[str, object], root: Path) -> Settings:
    """The suite's settings for option values as a command line parsed them (short names, as
    `banana-tests score` and `plan` read them), every other option at its default;
    ScoreSetupError naming an option no run can satisfy."""
    defaults = {o.name: o.attrs.get("default") for o in suite_options()}
    unknown = sorted(set(values) - set(defaults))
    if unknown:
        raise ScoreSetupError(f"no such suite option: {', '.join('--' + u for u in unknown)}")
    chosen = {**defaults, **values}
    try:
        return Settings.from_values(chosen.__getitem__, root, root, args=[])
    except ValueError as exc:
        raise ScoreSetupError(str(exc)) from exc


def seed_images(settings: Settings) -> list[str]:
    """The seed images of the selection's records, sorted: a cluster's unit of work. They are read
    from the source the suite's planning reads (under `artifact`, the trial sets', built once)."""
    from banana_tests.core.suite import CasePlanning, UsageError
    from banana_tests.trajectories.sources import load

    try:
        records = load(CasePlanning(settings, ()).source, settings.selection).records
    except (DataError, UsageError) as exc:
        raise ScoreSetupError(str(exc)) from exc
    return sorted({r.seed_image for r in records})


def score_selection(
    settings: Settings,
    progress: Callable[[Progress], None] | None = None,
    say: Callable[[str], None] = to_stderr,
) -> ScoreSummary:
    """`score` for settings built already (`scoring_settings`, `settings_from_options`); `say`
    prints the long-batch heartbeat lines."""
    if settings.cache_dir is None:
        raise ScoreSetupError("--no-cache: scoring without the score cache keeps nothing")
    start = time.perf_counter()
    state = _suite_state(settings, say)
    try:
        from banana_tests.core.selection_scoring import score_state

        return score_state(state, progress, start)
    finally:  # its WAL is folded into the file: a task can ship or merge the file as it is
        state.scoring.close()


def records_to_score(settings: Settings) -> dict[Group, list[Record]]:
    """Each (metric, seed image) group's records that `score` would score for `settings`, found
    without building a metric, importing torch or opening a cache."""
    return selection_to_score(settings)[0]


def selection_to_score(settings: Settings) -> tuple[dict[Group, list[Record]], tuple[Problem, ...]]:
    """`records_to_score`, and the selection's records that cannot be used (their cases error)."""
    from banana_tests.core.selection_scoring import selected_plans, unusable

    state = _suite_state(settings, to_stderr)
    plans = selected_plans(state)
    groups = {group: list(dict.fromkeys(found)) for group, found in state.planning.needs.items()}
    return groups, unusable(state, plans)


def _suite_state(settings: Settings, say: Callable[[str], None]) -> SuiteState:
    """The suite's state for `settings`, its metrics resolved, weights staged and cases planned,
    as at a suite run's collection."""
    from banana_tests.core.metric_import import resolve_within
    from banana_tests.core.suite import SuiteState

    watch = BatchWatch(settings.heartbeat, settings.batch_timeout, say, settings.load_limit)
    try:
        specs, hung = resolve_within(settings, watch)
    except (UnknownMetric, MetricError, ValueError) as exc:
        raise ScoreSetupError(str(exc)) from exc
    state = SuiteState.from_settings(settings, specs, say, hung, watch)
    state.try_collect()
    if state.usage_error is not None:
        raise ScoreSetupError(state.usage_error)
    return state
