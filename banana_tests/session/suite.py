"""The suite's session state, in one place: what was asked, what the data holds, what was scored."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from banana_tests.cases import CaseKey
from banana_tests.data import EMBEDDED
from banana_tests.session.options import DEFAULT_STEPS
from banana_tests.trajectories.plan import CasePlan, parse_steps, plan_cases
from banana_tests.trajectories.records import DataError, DataWarning, Problem, Record
from banana_tests.trajectories.selection import Selection
from banana_tests.trajectories.sources import SourceOptions, from_options, load, with_problems
from banana_tests.verdicts.gaps import Gap
from banana_tests.verdicts.matrix import Matrix
from banana_tests.verdicts.trend import Trend, TrendKey, TrendPlan, measure, plan_trends
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric, resolve
from metrics_under_test.spec import MetricSpec
from metrics_under_test.weights import stage

if TYPE_CHECKING:
    from banana_tests.scoring.score_book import ScoreBook
    from banana_tests.session.scorer import Scorer
    from banana_tests.trajectories.view import Trajectories


@dataclass
class SuiteState:
    """Options as resolved once per process, the case plans, and this process's scores."""

    metrics: dict[str, MetricSpec]
    source: SourceOptions
    selection: Selection
    per_run: bool
    device: str
    max_pixels: int
    image_budget_mib: int
    trend: bool = False
    cache_dir: Path | None = None  # None: --no-cache
    mirror: Path | None = None  # --weights-dir, staged into pyiqa's cache when the suite collects
    named: frozenset[str] = frozenset()  # metrics the user named, not chosen by `offline` or `all`
    narrowed: tuple[str, ...] = ()  # the selection options that keep only part of the data set
    usage_error: str | None = None  # why the suite's cases could not be planned
    records: list[Record] = field(default_factory=list)  # the selected records, read at collection
    problems: list[Problem] = field(default_factory=list)  # the bad lines that concern the selection
    plans: dict[CaseKey, CasePlan] = field(default_factory=dict)
    trends: dict[TrendKey, TrendPlan] = field(default_factory=dict)
    matrix: Matrix = field(default_factory=Matrix)
    _book: ScoreBook | None = None
    _needs: dict[str, list[Record]] = field(default_factory=dict)
    _scorers: dict[str, Scorer] = field(default_factory=dict)
    _prepared: bool = False

    @classmethod
    def from_config(cls, config: pytest.Config) -> SuiteState:
        opt = config.getoption
        try:
            metrics = selected_metrics(config)
            source, selection = from_options(opt, EMBEDDED, parse_steps(opt("steps")))
            check_limits(opt)
        except (UnknownMetric, MetricError, ValueError) as exc:
            raise pytest.UsageError(str(exc)) from exc
        if opt("device") == "cuda" and not _gpu_driver():
            raise pytest.UsageError(NO_CUDA + " (no GPU driver)")
        mirror = opt("weights_dir")
        return cls(
            metrics={s.name: s for s in metrics},
            source=source,
            selection=selection,
            per_run=opt("aggregate") == "per-run",
            device=opt("device"),
            max_pixels=opt("max_pixels"),
            image_budget_mib=opt("image_budget"),
            trend=opt("trend"),
            cache_dir=None if opt("no_cache") else config.rootpath / opt("cache_dir"),
            mirror=Path(mirror) if mirror else None,
            named=named_metrics(opt("metric"), metrics),
            narrowed=narrowing_options(opt),
        )

    @property
    def embedded(self) -> bool:
        return Path(self.source.source) == EMBEDDED

    @property
    def variant(self) -> str:
        return self.selection.variant

    @property
    def reference_step(self) -> int:
        return self.selection.reference_step

    def try_collect(self) -> list[CasePlan]:
        """`collect()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            return self.collect()
        except pytest.UsageError as exc:
            self.usage_error = str(exc)
            return []

    def collect(self) -> list[CasePlan]:
        """Read the data set and plan every case; a set that cannot be read, or options it
        cannot satisfy, are a usage error."""
        if not self.plans:
            self.prepare()
            try:
                loaded = load(self.source, self.selection)
            except DataError as exc:
                raise pytest.UsageError(f"--dataset={self.source.source}: {exc}") from exc
            if not loaded.records and not loaded.problems:
                raise pytest.UsageError(
                    f"--dataset={self.source.source}: "
                    + self.selection.describe_empty(loaded.variants, loaded.seed_images)
                )
            held = sorted({step for steps in loaded.held.values() for step in steps})
            self._check_steps(loaded.records, held)
            self.records, self.problems = loaded.records, loaded.problems
            metrics, steps = list(self.metrics), self.selection.steps

            def planned(per_run: bool) -> list[CasePlan]:
                plans = plan_cases(
                    loaded.records, metrics, steps, self.reference_step, per_run, held=loaded.held
                )
                return with_problems(plans, loaded.problems, self.selection, metrics)

            cases = planned(self.per_run)
            self.plans = {p.key: p for p in cases}
            if self.trend:  # trends follow the run means, which are the cases unless per run
                with warnings.catch_warnings():  # the cases' planning already warned
                    warnings.simplefilter("ignore", DataWarning)
                    trends = plan_trends(planned(False) if self.per_run else cases)
                self.trends = {t.key: t for t in trends}
        return list(self.plans.values())

    def try_prepare(self) -> None:
        """`prepare()`, keeping a usage error for the plugin to raise once collection is done."""
        try:
            self.prepare()
        except pytest.UsageError as exc:
            self.usage_error = str(exc)

    def prepare(self) -> None:
        """What scoring needs, once per process: the weights staged, an explicit device present."""
        if self._prepared:
            return
        self._prepared = True
        if self.mirror is not None:
            if not self.mirror.is_dir():
                raise pytest.UsageError(f"--weights-dir={self.mirror}: no such directory")
            stage(self.mirror, ((w.file, w.path) for s in self.metrics.values() for w in s.weights))
        try:
            resolve_device(self.device)
        except RuntimeError as exc:
            raise pytest.UsageError(str(exc)) from exc

    def _check_steps(self, records: list[Record], held: list[int]) -> None:
        """Steps that no selected record has can never give a verdict: when that is the
        reference step or every step asked for, it is the options that are wrong. `held` is
        every step of the selected seed images and runs, before the steps were selected."""
        present = {r.step for r in records}
        steps = self.selection.steps
        wanted_absent = steps is not None and not set(steps) & present
        if records and (self.reference_step not in present or wanted_absent):
            absent = [s for s in [*(steps or ()), self.reference_step] if s not in present]
            raise pytest.UsageError(
                f"--dataset={self.source.source}: no selected record is at step(s) "
                f"{', '.join(map(str, absent))} (the data set holds steps {', '.join(map(str, held))}); "
                "see --steps and --reference-step"
            )

    @property
    def book(self) -> ScoreBook:
        if self._book is None:
            from banana_tests.scoring.cache import ScoreCache
            from banana_tests.scoring.score_book import ScoreBook
            from banana_tests.trajectories.images import ImageStore

            cache = ScoreCache(self.cache_dir) if self.cache_dir is not None else None
            images = ImageStore(self.image_budget_mib * 2**20, self.max_pixels)
            self._book = ScoreBook(resolve_device(self.device), images, cache=cache)
        return self._book

    def scorer(self, metric: str) -> Scorer:
        """The public fixtures' Scorer of a selected metric, one per process over this book."""
        if metric not in self._scorers:
            from banana_tests.session.scorer import Scorer

            self.prepare()
            self._scorers[metric] = Scorer(self.metrics[metric], self.book, metric in self.named)
        return self._scorers[metric]

    def trajectories(self) -> Trajectories:
        """The selected records as the public fixture gives them."""
        from banana_tests.trajectories.view import Trajectories

        self.collect()
        return Trajectories(
            self.records,
            self.problems,
            self.book.images,
            self.source.source,
            self.variant,
            self.reference_step,
        )

    def needs(self, metric: str) -> list[Record]:
        """Every record this metric's cases need, so they are scored in one pass; empty once asked
        (that pass scored them), since the book scans all it is given: 5,940 cases took 75 s."""
        if metric in self._needs:
            return []
        self._needs[metric] = [r for p in self.plans.values() if p.key.metric == metric for r in p.records]
        return self._needs[metric]

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
        """Δ for one case with that metric's scorer (the public Δ engine); scores every image the
        metric needs here on first use."""
        plan = self.plans[key]
        if plan.error:
            raise DataError(plan.error)
        return scorer.delta(plan.pairs, self.needs(key.metric))


STATE = pytest.StashKey[SuiteState]()
SELECTED = pytest.StashKey[list[MetricSpec]]()
NO_CUDA = "--device=cuda: CUDA is not available on this machine; use --device=cpu or --device=auto"


def selected_metrics(config: pytest.Config) -> list[MetricSpec]:
    """`--metric` resolved once per session: xdist's `-n auto` asks for the count before
    pytest_configure, and resolving builds custom metrics given as factories."""
    if SELECTED not in config.stash:
        mirror = config.getoption("weights_dir")
        with importable_from(config.invocation_params.dir, config.rootpath):
            config.stash[SELECTED] = resolve(config.getoption("metric"), Path(mirror) if mirror else None)
    return config.stash[SELECTED]


@contextmanager
def importable_from(*folders: Path) -> Iterator[None]:
    """`module:callable` metrics import as under `python -m`: a module beside you just works."""
    added = [str(f) for f in dict.fromkeys(folders) if str(f) not in sys.path]
    sys.path[:0] = added
    try:
        yield
    finally:
        for folder in added:
            sys.path.remove(folder)


def named_metrics(text: str, metrics: list[MetricSpec]) -> frozenset[str]:
    """The metrics the user asked for by name or target; with `offline` or `all` in the list,
    the others came from those and may skip."""
    parts = {p.strip().lower() for p in text.split(",") if p.strip()}
    if not parts & {"offline", "all"}:
        return frozenset(s.name for s in metrics)
    return frozenset(s.name for s in metrics if s.name.lower() in parts)


def narrowing_options(opt: Callable[[str], Any]) -> tuple[str, ...]:
    """The options, as typed, that select only part of the data set's records."""
    given = {
        "--seed-image": opt("seed_image"),
        "--where": opt("where"),
        "--runs": opt("runs"),
        "--steps": opt("steps") if parse_steps(opt("steps")) != parse_steps(DEFAULT_STEPS) else None,
    }
    out = []
    for option, value in given.items():
        for v in value if isinstance(value, list) else [] if value is None else [value]:
            out.append(f"{option}={v}")
    return tuple(out)


def check_limits(opt: Callable[[str], Any]) -> None:
    """Numeric options a run can never satisfy, as a ValueError naming the option."""
    for option, value in (("--max-pixels", opt("max_pixels")), ("--image-budget", opt("image_budget"))):
        if value < 1:
            raise ValueError(f"{option} takes a positive number, got {value}")
    steps, reference = parse_steps(opt("steps")), opt("reference_step")
    if reference < 0:
        raise ValueError(f"--reference-step takes a step number (0 or more), got {reference}")
    if steps is not None and reference in steps:
        raise ValueError(
            f"--steps={opt('steps')} includes the reference step {reference}: its Δ is 0 by definition, "
            "which can never pass"
        )


def resolve_device(device: str) -> str:
    """`auto` → cuda when available; asking for cuda where there is none is an error. Without a
    GPU driver the answer is cpu without importing torch, so a fully cached run never loads it."""
    if device == "cpu" or (device == "auto" and not _gpu_driver()):
        return "cpu"
    import torch

    has_cuda = torch.cuda.is_available()
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    if device == "cuda" and not has_cuda:
        raise RuntimeError(NO_CUDA)
    return device


def _gpu_driver() -> bool:
    """An NVIDIA or ROCm kernel driver is loaded; torch cannot see a GPU without one."""
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/kfd").exists() or os.name != "posix"
