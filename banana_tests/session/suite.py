"""The suite's session: the settings, the case plans read from the data set, and this process's
scoring, each its own object; `SuiteState` holds one of each for the plugin and the fixtures."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from banana_tests.cases import CaseKey
from banana_tests.scoring.batch_watch import BatchWatch, to_stderr
from banana_tests.scoring.hung import Hung
from banana_tests.session.devices import Device, DeviceChoice, gpu_for, worker_index
from banana_tests.session.metric_import import HUNG_IMPORTS, resolve_within
from banana_tests.session.settings import Settings, settings_of
from banana_tests.session.terminal_line import terminal_line
from banana_tests.trajectories.plan import CasePlan, plan_cases
from banana_tests.trajectories.problem_cases import with_problems
from banana_tests.trajectories.records import DataError, DataWarning, Problem, Record
from banana_tests.trajectories.selection import Selection, not_for_iqa_note
from banana_tests.trajectories.sources import SourceOptions, load
from banana_tests.verdicts.gaps import Gap
from banana_tests.verdicts.trend import Trend, TrendKey, TrendPlan, measure, plan_trends
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric
from metrics_under_test.spec import MetricSpec
from metrics_under_test.weights import stage

if TYPE_CHECKING:
    from banana_tests.scoring.oracle import Change
    from banana_tests.scoring.oracle_figures import OracleFigures
    from banana_tests.scoring.score_book import ScoreBook
    from banana_tests.session.scorer import Scorer
    from banana_tests.trajectories.view import Trajectories
    from metrics_under_test.protocol import Metric


@dataclass
class CasePlanning:
    """The selected records, read once at collection, and the cases and trends planned on them."""

    settings: Settings
    metrics: tuple[str, ...]
    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # the bad lines that concern the selection
    plans: dict[CaseKey, CasePlan] = field(default_factory=dict)
    trends: dict[TrendKey, TrendPlan] = field(default_factory=dict)
    # what the selected cases of a (metric, seed image) score: one scheduling group's records
    needs: dict[tuple[str, str], list[Record]] = field(default_factory=dict)
    # the steps the selected cases compare with each reference record (the oracle's)
    companions: dict[Record, list[Record]] = field(default_factory=dict)
    say: Callable[[str], None] = to_stderr  # a line on the terminal

    def collect(self) -> None:
        """Read the data set and plan every case, once; a set that cannot be read, or options it
        cannot satisfy, are a usage error."""
        if self.plans:
            return
        source, selection = trial_source(self.settings), self.settings.selection
        try:
            loaded = load(source, selection)
        except DataError as exc:
            raise pytest.UsageError(f"--dataset={source.source}: {exc}") from exc
        if not loaded.records and not loaded.problems:
            raise pytest.UsageError(
                f"--dataset={source.source}: "
                + selection.describe_empty(loaded.variants, loaded.seed_images, loaded.not_for_iqa)
            )
        if loaded.not_for_iqa and os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":
            self.say(not_for_iqa_note(loaded.not_for_iqa))  # once a run, not once a worker
        held = sorted({step for steps in loaded.held.values() for step in steps})
        self._check_steps(loaded.records, held)
        self.records, self.problems = loaded.records, loaded.problems
        metrics, steps = list(self.metrics), selection.steps

        def planned(per_run: bool) -> list[CasePlan]:
            plans = plan_cases(
                loaded.records, metrics, steps, selection.reference_step, per_run, held=loaded.held
            )
            return with_problems(plans, loaded.problems, selection, metrics)

        cases = planned(self.settings.per_run)
        self.plans = {p.key: p for p in cases}
        if self.settings.trend:  # trends follow the run means, which are the cases unless per run
            with warnings.catch_warnings():  # the cases' planning already warned
                warnings.simplefilter("ignore", DataWarning)
                trends = plan_trends(planned(False) if self.settings.per_run else cases)
            self.trends = {t.key: t for t in trends}

    def select(self, keys: Iterable[CaseKey]) -> None:
        """What the cases that will run need, once collection has chosen them: the first case of
        a (metric, seed image) scores the images of them all, and a run's first oracle figure
        computes the run's other steps too. Only theirs: `-k` or `--lf` on one case decodes that
        case's images."""
        self.needs = {}
        steps: dict[Record, dict[Record, None]] = {}
        for key in keys:
            plan = self.plans.get(key)
            if plan is None:
                continue
            self.needs.setdefault((key.metric, key.seed_image), []).extend(plan.records)
            for reference, step in plan.pairs:
                steps.setdefault(reference, {})[step] = None
        self.companions = {reference: list(found) for reference, found in steps.items()}

    def _check_steps(self, records: list[Record], held: list[int]) -> None:
        """Steps that no selected record has can never give a verdict: when that is the
        reference step or every step asked for, it is the options that are wrong. `held` is
        every step of the selected seed images and runs, before the steps were selected."""
        present = {r.step for r in records}
        steps, reference = self.settings.selection.steps, self.settings.selection.reference_step
        wanted_absent = steps is not None and not set(steps) & present
        if records and (reference not in present or wanted_absent):
            absent = [s for s in [*(steps or ()), reference] if s not in present]
            raise pytest.UsageError(
                f"--dataset={self.settings.source.source}: no selected record is at step(s) "
                f"{', '.join(map(str, absent))} (the data set holds steps {', '.join(map(str, held))}); "
                "see --steps and --reference-step"
            )


def trial_source(settings: Settings) -> SourceOptions:
    """The run's trajectory source: under --artifact, the trial sets, built once into the image
    cache (banana_tests.editors.trial_sets); a set that cannot be rebuilt as shipped is a usage error."""
    if not settings.artifacts:
        return settings.source
    from banana_tests.editors.trial_sets import TrialSetError, ensure

    try:
        folder = ensure(settings.artifacts, settings.source.cache_dir)
    except (OSError, TrialSetError, ValueError) as exc:
        raise pytest.UsageError(f"--artifact={','.join(settings.artifacts)}: {exc}") from exc
    return replace(settings.source, source=str(folder))


@dataclass
class Scoring:
    """Scoring in this process: weights staged and the device checked once, one ScoreBook,
    one Scorer per metric."""

    settings: Settings
    metrics: dict[str, MetricSpec]
    named: frozenset[str]  # metrics the user named, not chosen by `offline` or `all`
    say: Callable[[str], None] = to_stderr  # a line on the terminal from a running test
    hung: dict[str, Hung] = field(default_factory=dict)  # metrics whose import hung
    watch: BatchWatch | None = None  # the watch that imported them; None: a new one
    _book: ScoreBook | None = None
    _oracle: OracleFigures | None = None
    _scorers: dict[str, Scorer] = field(default_factory=dict)
    _prepared: bool = False

    def prepare(self) -> None:
        """What scoring needs, once per process: the weights staged, an explicit device present."""
        if self._prepared:
            return
        self._prepared = True
        mirror = self.settings.weights_dir
        if mirror is not None:
            if not mirror.is_dir():
                raise pytest.UsageError(f"--weights-dir={mirror}: no such directory")
            stage(mirror, ((w.file, w.path) for s in self.metrics.values() for w in s.weights))
        try:
            resolve_device(self.settings.device)
        except RuntimeError as exc:
            raise pytest.UsageError(str(exc)) from exc

    @property
    def book(self) -> ScoreBook:
        if self._book is None:
            from banana_tests.scoring.cache import ScoreCache
            from banana_tests.scoring.score_book import ScoreBook
            from banana_tests.trajectories.images import ImageStore

            settings = self.settings
            cache = ScoreCache(settings.cache_dir) if settings.cache_dir is not None else None
            images = ImageStore(settings.image_budget_mib * 2**20, settings.max_pixels)
            watch = self.watch or BatchWatch(
                settings.heartbeat, settings.batch_timeout, self.say, settings.load_limit
            )
            self._book = ScoreBook(
                resolve_device(settings.device),
                images,
                loader=tuned_load,
                cache=cache,
                watch=watch,
                prober=probe_custom,
                hung=self.hung,
            )
        return self._book

    @property
    def oracle(self) -> OracleFigures:
        """The degradation oracle's figures, over the book's images and cache."""
        if self._oracle is None:
            from banana_tests.scoring.oracle_figures import OracleFigures

            self._oracle = OracleFigures(self.book.images, self.book.cache)
        return self._oracle

    def scorer(self, metric: str) -> Scorer:
        """The public fixtures' Scorer of a selected metric, one per process over this book."""
        if metric not in self._scorers:
            from banana_tests.session.scorer import Scorer

            self.prepare()
            self._scorers[metric] = Scorer(self.metrics[metric], self.book, metric in self.named)
        return self._scorers[metric]


def tuned_load(spec: MetricSpec, device: str) -> Metric:
    """A suite run's metric loader: the metric, then this process tuned for scoring (only in a
    suite run, never in another project's: see banana_tests.scoring.process_tuning). The book
    probes it next (`probe_custom`)."""
    from banana_tests.scoring.loading import built_metric
    from banana_tests.scoring.process_tuning import tune_for_scoring

    metric = built_metric(spec, device)
    tune_for_scoring(metric)
    return metric


def probe_custom(spec: MetricSpec, metric: Metric) -> None:
    from banana_tests.scoring.loading import probe_custom as probe

    probe(spec, metric)


@dataclass
class SuiteState:
    """A suite run in this process: its settings, selected metrics, case plans and scoring."""

    settings: Settings
    metrics: dict[str, MetricSpec]
    planning: CasePlanning
    scoring: Scoring
    usage_error: str | None = None  # why the suite's cases could not be planned
    _prefetched: set[tuple[str, str]] = field(default_factory=set)  # (metric, seed image) groups scored

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        metrics: list[MetricSpec],
        say: Callable[[str], None] = to_stderr,
        hung: dict[str, Hung] | None = None,
        watch: BatchWatch | None = None,
    ) -> SuiteState:
        """`hung`: metrics whose import hung, and `watch` the one that imported the others."""
        by_name = {s.name: s for s in metrics}
        named = named_metrics(settings.metric, metrics)
        scoring = Scoring(settings, by_name, named, say, hung or {}, watch)
        return cls(settings, by_name, CasePlanning(settings, tuple(by_name), say=say), scoring)

    @classmethod
    def from_config(cls, config: pytest.Config) -> SuiteState:
        """The suite of `config`'s run; options it cannot use are a usage error."""
        settings = settings_of(config)
        try:
            metrics = selected_metrics(config)
        except (UnknownMetric, MetricError, ValueError) as exc:
            raise pytest.UsageError(str(exc)) from exc
        if settings.device.kind is Device.CUDA and not _gpu_driver():
            raise pytest.UsageError(no_cuda(settings.device) + " (no GPU driver)")
        return cls.from_settings(
            settings, metrics, terminal_line(config), config.stash[HUNG], config.stash[WATCH]
        )

    @property
    def source(self) -> SourceOptions:
        """Where the trajectories come from: --dataset, the embedded set, or the trial sets."""
        return trial_source(self.settings)

    @property
    def selection(self) -> Selection:
        return self.settings.selection

    @property
    def device(self) -> DeviceChoice:
        return self.settings.device

    @property
    def narrowed(self) -> tuple[str, ...]:
        return self.settings.narrowed

    @property
    def embedded(self) -> bool:
        return self.settings.embedded

    @property
    def variant(self) -> str:
        return self.selection.variant

    @property
    def reference_step(self) -> int:
        return self.selection.reference_step

    @property
    def plans(self) -> dict[CaseKey, CasePlan]:
        return self.planning.plans

    @property
    def trends(self) -> dict[TrendKey, TrendPlan]:
        return self.planning.trends

    def try_collect(self) -> list[CasePlan]:
        """`collect()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            return self.collect()
        except pytest.UsageError as exc:
            self.usage_error = str(exc)
            return []

    def collect(self) -> list[CasePlan]:
        """Prepare scoring, then read the data set and plan every case (once)."""
        self.scoring.prepare()
        self.planning.collect()
        return list(self.plans.values())

    def try_prepare(self) -> None:
        """`prepare()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            self.scoring.prepare()
        except pytest.UsageError as exc:
            self.usage_error = str(exc)

    def scorer(self, metric: str) -> Scorer:
        return self.scoring.scorer(metric)

    def trajectories(self) -> Trajectories:
        """The selected records as the public fixture gives them."""
        from banana_tests.trajectories.view import Trajectories

        self.collect()
        return Trajectories(
            self.planning.records,
            self.planning.problems,
            self.scoring.book.images,
            self.source.source,
            self.variant,
            self.reference_step,
        )

    def score_cached(self, key: CaseKey) -> str:
        """JUnit `score_cached`: "true"/"false" when all/none of the case's scores came from the
        cache, else "cached/total" over its reference and step scores."""
        plan = self.plans[key]
        records = [r for pair in plan.pairs for r in pair]
        hits = sum(self.scorer(key.metric).cached(records))
        return "true" if hits == len(records) else "false" if hits == 0 else f"{hits}/{len(records)}"

    def trend_of(self, key: TrendKey, scorer: Scorer) -> Trend:
        """The trend of one (metric, seed image) with that metric's scorer; its images are scored
        like the Δ cases'."""
        return scorer.guard(lambda: measure(self.trends[key], scorer.spec, scorer.book))

    def gap(self, key: CaseKey, scorer: Scorer) -> Gap:
        """Δ for one case with that metric's scorer (the public Δ engine). The first case of its
        (metric, seed image) in this process also scores every record the group's other cases
        need, in one pass; later cases pass none, since the book scans all it is given
        (banana_tests.scoring.batching, whose order banana_tests.api follows too). The group is
        the scheduler's (banana_tests.scheduler.metric_groups): a worker scores the groups it
        runs, never another worker's, and the batches are the same serial and under xdist, so
        are the scores."""
        plan = self.plans[key]
        if plan.error:
            raise DataError(plan.error)
        from banana_tests.scoring.batching import group_records

        upcoming = group_records((key.metric, key.seed_image), self._prefetched, self.planning.needs)
        return scorer.delta(plan.pairs, upcoming)

    def changes(self, key: CaseKey) -> list[Change]:
        """The degradation oracle's figures for the case's pairs, one per run."""
        return self.scoring.oracle.changes(self.plans[key].pairs, self.planning.companions)


SELECTED = pytest.StashKey[list[MetricSpec]]()
HUNG = pytest.StashKey[dict[str, Hung]]()  # the selected metrics whose import hung
WATCH = pytest.StashKey[BatchWatch]()  # the run's watch: its scoring thread imports, builds and scores


def selected_metrics(config: pytest.Config) -> list[MetricSpec]:
    """`--metric` resolved once per session, within the load limit (see
    banana_tests.session.metric_import): xdist's `-n auto` asks for the count before
    pytest_configure, and resolving builds custom metrics given as factories."""
    if SELECTED not in config.stash:
        settings = settings_of(config)
        watch = BatchWatch(
            settings.heartbeat, settings.batch_timeout, terminal_line(config), settings.load_limit
        )
        known = getattr(config, "workerinput", {}).get(HUNG_IMPORTS)
        config.stash[SELECTED], config.stash[HUNG] = resolve_within(settings, watch, known)
        config.stash[WATCH] = watch
    return config.stash[SELECTED]


def named_metrics(text: str, metrics: list[MetricSpec]) -> frozenset[str]:
    """The metrics the user asked for by name or target; with `offline` or `all` in the list,
    the others came from those and may skip."""
    parts = {p.strip().lower() for p in text.split(",") if p.strip()}
    if not parts & {"offline", "all"}:
        return frozenset(s.name for s in metrics)
    return frozenset(s.name for s in metrics if s.name.lower() in parts)


def no_cuda(device: DeviceChoice) -> str:
    return f"--device={device}: CUDA is not available on this machine; use --device=cpu or --device=auto"


def resolve_device(device: DeviceChoice) -> str:
    """The device this process scores on: `auto` → a GPU when available, else cpu; with GPUs,
    this xdist worker's (`gpu_for`); asking for cuda where there is none is an error. Without a
    GPU driver the answer is cpu without importing torch, so a fully cached run never loads it."""
    if device.kind is Device.CPU or (device.kind is Device.AUTO and not _gpu_driver()):
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        if device.kind is Device.AUTO:
            return "cpu"
        raise RuntimeError(no_cuda(device))
    return gpu_for(device, worker_index(os.environ.get("PYTEST_XDIST_WORKER")), torch.cuda.device_count())


def _gpu_driver() -> bool:
    """An NVIDIA or ROCm kernel driver is loaded; torch cannot see a GPU without one."""
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/kfd").exists() or os.name != "posix"
