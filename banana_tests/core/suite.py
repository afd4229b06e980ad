"""A suite run in one process: its case planning, its scoring, and the `SuiteState` that holds
one of each for the plugin, the fixtures and the api.

`CasePlanning` reads the trajectories a run selects (`--dataset` or the trial sets) once, at
collection, and plans the cases on them; `Scoring` stages the weights, checks the device once and
keeps one ScoreBook with the suite's metric loader (tuned for scoring). The units `--shard` deals
(banana_tests.scheduler.sharding) are the selection's, so a suite run's collection and the api's
scoring deal the same ones. An option or a data set that no run can satisfy is a `UsageError`:
the session turns it into pytest's usage error (one line, exit 4), the api into ScoreSetupError.
banana_tests.session.run_state builds the state from pytest's config, with the fixtures'
Scorers over its book.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from banana_tests.cases import CaseKey
from banana_tests.core.machine import resolve_device
from banana_tests.core.settings import Settings
from banana_tests.scheduler.sharding import Group
from banana_tests.scoring.metric_calls import BatchWatch, Hung, to_stderr
from banana_tests.trajectories.case_plans import CasePlan, plan_cases, with_problems
from banana_tests.trajectories.records import DataError, DataWarning, Problem, Record
from banana_tests.trajectories.selection import not_for_iqa_note
from banana_tests.trajectories.sources import SourceOptions, load
from metrics_under_test.extras import TAEF2, missing, missing_for_metrics
from metrics_under_test.registry import DEFAULT_METRICS, MetricRequest, stage_mirror
from metrics_under_test.spec import MetricSpec

if TYPE_CHECKING:
    from banana_tests.scoring.oracle import Change, OracleFigures
    from banana_tests.scoring.score_book import ScoreBook
    from banana_tests.scoring.score_identity import Loaded
    from banana_tests.trajectories.selection import Trajectories
    from metrics_under_test.protocol import Metric


class UsageError(ValueError):
    """The message names the option or the data set, as the user wrote it."""


@dataclass
class CasePlanning:
    """The selected records, read once at collection, and the cases planned on them."""

    settings: Settings
    metrics: tuple[str, ...]
    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # the bad lines that concern the selection
    plans: dict[CaseKey, CasePlan] = field(default_factory=dict)
    held: Mapping[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)  # each (seed, run)'s steps
    # what the selected cases of a (metric, seed image) score: one scheduling group's records
    needs: dict[tuple[str, str], list[Record]] = field(default_factory=dict)
    # the steps the selected cases compare with each reference record (the oracle's)
    companions: dict[Record, list[Record]] = field(default_factory=dict)
    say: Callable[[str], None] = to_stderr  # a line on the terminal

    @functools.cached_property
    def source(self) -> SourceOptions:
        """The run's trajectory source, resolved once a process: under --artifact, the trial sets,
        built once into the image cache (banana_tests.editors.embedded_sets); a set that cannot be
        rebuilt as shipped is a usage error."""
        settings = self.settings
        if not settings.artifacts:
            return settings.source
        from banana_tests.editors.embedded_sets import TrialSetError, ensure
        from banana_tests.trajectories.records import Artifact

        absent = missing(f"--artifact={Artifact.VAE_ROUNDTRIP}", TAEF2)
        if Artifact.VAE_ROUNDTRIP in settings.artifacts and absent is not None:
            raise UsageError(absent)

        try:
            folder = ensure(settings.artifacts, settings.source.cache_dir)
        except (OSError, TrialSetError, ValueError) as exc:
            raise UsageError(f"--artifact={','.join(settings.artifacts)}: {exc}") from exc
        return replace(settings.source, source=str(folder))

    def collect(self) -> None:
        """Read the data set and plan every case, once; a set that cannot be read, or options it
        cannot satisfy, are a usage error."""
        if self.plans:
            return
        source, selection = self.source, self.settings.selection
        try:
            loaded = load(source, selection)
        except DataError as exc:
            raise UsageError(f"--dataset={source.source}: {exc}") from exc
        if not loaded.records and not loaded.problems:
            raise UsageError(
                f"--dataset={source.source}: "
                + selection.describe_empty(loaded.variants, loaded.seed_images, loaded.not_for_iqa)
            )
        if loaded.not_for_iqa and os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":
            self.say(not_for_iqa_note(loaded.not_for_iqa))  # once a run: by gw0, the controller is quiet
        held = sorted({step for steps in loaded.held.values() for step in steps})
        self._check_steps(loaded.records, held)
        self.records, self.problems, self.held = loaded.records, loaded.problems, loaded.held
        self.plans = {p.key: p for p in self._planned(self.settings.per_run)}

    def _planned(self, per_run: bool) -> list[CasePlan]:
        selection, metrics = self.settings.selection, list(self.metrics)
        plans = plan_cases(
            self.records, metrics, selection.steps, selection.reference_step, per_run, held=self.held
        )
        return with_problems(plans, self.problems, selection, metrics)

    def run_means(self) -> list[CasePlan]:
        """The run-mean Δ plans, which a family over the steps (the trend) follows: the cases
        themselves unless per run."""
        if not self.settings.per_run:
            return list(self.plans.values())
        with warnings.catch_warnings():  # the cases' planning already warned
            warnings.simplefilter("ignore", DataWarning)
            return self._planned(False)

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
            raise UsageError(
                f"--dataset={self.settings.source.source}: no selected record is at step(s) "
                f"{', '.join(map(str, absent))} (the data set holds steps {', '.join(map(str, held))}); "
                "see --steps and --reference-step"
            )


LOADED_LIBRARIES = "banana_loaded_libraries"
"""The workerinput key of the distributions each metric loads, found once by xdist's controller."""


@dataclass
class Scoring:
    """Scoring in this process: weights staged and the device checked once, one ScoreBook."""

    settings: Settings
    metrics: dict[str, MetricSpec]
    named: frozenset[str]  # metrics the user named, not chosen by `offline` or `all`
    say: Callable[[str], None] = to_stderr  # a line on the terminal from a running test
    hung: dict[str, Hung] = field(default_factory=dict)  # metrics whose import hung
    watch: BatchWatch | None = None  # the watch that imported them; None: a new one
    loaded: Loaded | None = None  # the distributions each metric loads; None: not found yet
    _book: ScoreBook | None = None
    _oracle: OracleFigures | None = None
    _prepared: bool = False

    def prepare(self) -> None:
        """What scoring needs, once per process: the metrics' extras installed, the weights
        staged, an explicit device present."""
        if self._prepared:
            return
        self._prepared = True
        absent = missing_for_metrics(self.metrics.values(), tuple(self.settings.metrics) == DEFAULT_METRICS)
        if absent is not None:
            raise UsageError(absent)
        mirror = self.settings.weights_dir
        if mirror is not None:
            if not mirror.is_dir():
                raise UsageError(f"--weights-dir={mirror}: no such directory")
            stage_mirror(mirror)
        try:
            resolve_device(self.settings.device)
        except RuntimeError as exc:
            raise UsageError(str(exc)) from exc

    def loaded_libraries(self) -> Loaded:
        """The distributions each metric loads (banana_tests.scoring.score_identity), for its
        cache identity: found once a run, by xdist's controller for its workers; none without a
        score cache, which is the only reader."""
        if self.loaded is None:
            from banana_tests.scoring.score_identity import loaded_libraries

            settings = self.settings
            self.loaded = (
                {}
                if settings.cache_dir is None
                else loaded_libraries(
                    self.metrics.values(),
                    resolve_device(settings.device),
                    settings.cache_dir,
                    settings.weights_dir,
                    settings.import_dirs,
                    settings.load_limit.seconds,
                )
            )
        return self.loaded

    @property
    def book(self) -> ScoreBook:
        if self._book is None:
            from banana_tests.scoring.score_book import ScoreBook
            from banana_tests.scoring.score_cache import ScoreCache
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
                loaded=self.loaded_libraries(),
            )
        return self._book

    def close(self) -> None:
        """The score cache closed (its WAL folded into the file) when the process's run ends."""
        if self._book is not None and self._book.cache is not None:
            self._book.cache.close()

    @property
    def oracle(self) -> OracleFigures:
        """The degradation oracle's figures, over the book's images and cache."""
        if self._oracle is None:
            from banana_tests.scoring.oracle import OracleFigures

            self._oracle = OracleFigures(self.book.images, self.book.cache)
        return self._oracle


def tuned_load(spec: MetricSpec, device: str) -> Metric:
    """A suite run's metric loader: the metric, then this process tuned for scoring (only in a
    suite run, never in another project's: see banana_tests.scoring.process_tuning). The book
    probes it next (`probe_custom`)."""
    from banana_tests.scoring.metric_calls import built_metric
    from banana_tests.scoring.process_tuning import tune_for_scoring

    metric = built_metric(spec, device)
    tune_for_scoring(metric)
    return metric


def probe_custom(spec: MetricSpec, metric: Metric) -> None:
    from banana_tests.scoring.metric_calls import probe_custom as probe

    probe(spec, metric)


@dataclass
class SuiteState:
    """A suite run in this process: its settings, selected metrics, case plans and scoring."""

    settings: Settings
    metrics: dict[str, MetricSpec]
    planning: CasePlanning
    scoring: Scoring
    usage_error: str | None = None  # why the suite's cases could not be planned
    prefetched: set[tuple[str, str]] = field(default_factory=set)  # (metric, seed image) groups scored

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
        named = named_metrics(settings.metrics, metrics)
        scoring = Scoring(settings, by_name, named, say, hung or {}, watch)
        return cls(settings, by_name, CasePlanning(settings, tuple(by_name), say=say), scoring)

    def try_collect(self) -> list[CasePlan]:
        """`collect()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            return self.collect()
        except UsageError as exc:
            self.usage_error = str(exc)
            return []

    def collect(self) -> list[CasePlan]:
        """Prepare scoring, then read the data set and plan every case (once)."""
        self.scoring.prepare()
        self.planning.collect()
        return list(self.planning.plans.values())

    def try_prepare(self) -> None:
        """`prepare()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            self.scoring.prepare()
        except UsageError as exc:
            self.usage_error = str(exc)

    def trajectories(self) -> Trajectories:
        """The selected records as the public fixture gives them."""
        from banana_tests.trajectories.selection import Trajectories

        self.collect()
        return Trajectories(
            self.planning.records,
            self.planning.problems,
            self.scoring.book.images,
            self.planning.source.source,
            self.settings.selection.variant,
            self.settings.selection.reference_step,
        )

    def score_cached(self, key: CaseKey) -> str:
        """JUnit `score_cached`: "true"/"false" when all/none of the case's scores came from the
        cache, else "cached/total" over its reference and step scores."""
        plan = self.planning.plans[key]
        records = [r for pair in plan.pairs for r in pair]
        hits = sum(self.scoring.book.cached(self.metrics[key.metric], records))
        return "true" if hits == len(records) else "false" if hits == 0 else f"{hits}/{len(records)}"

    def changes(self, key: CaseKey) -> list[Change]:
        """The degradation oracle's figures for the case's pairs, one per run."""
        return self.scoring.oracle.changes(self.planning.plans[key].pairs, self.planning.companions)


def named_metrics(requests: Sequence[MetricRequest], metrics: list[MetricSpec]) -> frozenset[str]:
    """The metrics the user asked for by name or target; with a group (`offline`, `all`) among
    the requests, the others came from it and may skip."""
    if not any(r.group is not None for r in requests):
        return frozenset(s.name for s in metrics)
    parts = {r.text.lower() for r in requests}
    return frozenset(s.name for s in metrics if s.name.lower() in parts)


def selection_units(state: SuiteState) -> list[Group]:
    """Every selected metric on every seed image of the selection, then each metric alone."""
    seeds = dict.fromkeys(
        [*(r.seed_image for r in state.planning.records), *(k.seed_image for k in state.planning.plans)]
    )
    return [*(Group(m, s) for m in state.metrics for s in seeds), *(Group(m) for m in state.metrics)]
