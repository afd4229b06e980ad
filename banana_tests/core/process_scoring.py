"""This process's scoring for a suite run: weights staged and the device checked once, one
ScoreBook, and the suite's metric loader (tuned for scoring). The fixtures' Scorers over the book
are the pytest glue's (banana_tests.session.run_state)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from banana_tests.core.devices import resolve_device
from banana_tests.core.settings import Settings
from banana_tests.core.usage_error import UsageError
from banana_tests.scoring.metric_calls import BatchWatch, Hung, to_stderr
from metrics_under_test.extras import missing_for_metrics
from metrics_under_test.registry import DEFAULT_METRICS, stage_mirror
from metrics_under_test.spec import MetricSpec

if TYPE_CHECKING:
    from banana_tests.scoring.oracle import OracleFigures
    from banana_tests.scoring.score_book import ScoreBook
    from banana_tests.scoring.score_identity import Loaded
    from metrics_under_test.protocol import Metric

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
