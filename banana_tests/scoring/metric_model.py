"""The metric's model in a worker: built behind its spec, a custom one probed, one held at a time.

Loading builds the model (the backend imported only then) and probes a custom metric; why one
could not load is remembered, so each of its cases fails alike without building it again. The one
model a worker holds is built, then probed, each within the watch's load limit; a model that failed
to build fails again at once, and a metric that hung is never built again
(banana_tests.scoring.batch_watch.Hung). Dropping the model returns its memory before anything
else allocates.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from banana_tests.scoring.batch_watch import Abandoned, BatchWatch, Hung, MetricHangs, MetricHung, Phase
from banana_tests.scoring.process_tuning import release_freed_memory
from metrics_under_test.protocol import Metric, MetricError
from metrics_under_test.spec import Backend, MetricSpec
from metrics_under_test.weights import MissingWeights, NotPublished, UnwritableCache

Loader = Callable[[MetricSpec, str], Metric]
Prober = Callable[[MetricSpec, Metric], None]
# Load failures the suite's rules tell apart, and what a metric raises about itself rather than
# an image: the whole metric's cases error.
KEPT = (MissingWeights, UnwritableCache, NotPublished, MetricError)


@dataclass(frozen=True)
class LoadFailure:
    """Why a metric could not load, kept as its exception's type and message, never the object."""

    metric: str
    kind: type[Exception]
    message: str

    def again(self) -> Exception:
        """A new exception for the next case: of the same type when the suite's rules read it
        (a skip for MissingWeights, one line for UnwritableCache, NotPublished and MetricError), else a
        MetricError in one line; the first case showed the whole traceback."""
        if self.kind in KEPT:
            return self.kind(self.message)
        return MetricError(
            f"metric {self.metric!r} could not load: {self.kind.__name__}: {self.message} "
            "(the traceback is in the first case that loaded it)"
        )


def load_metric(spec: MetricSpec, device: str) -> Metric:
    """Build the metric behind `spec` and probe it (`probe_custom`); the backend is imported only
    now. The process is left as it is: a suite run tunes its own
    (banana_tests.core.suite.tuned_load)."""
    metric = built_metric(spec, device)
    probe_custom(spec, metric)
    return metric


def probe_custom(spec: MetricSpec, metric: Metric) -> None:
    """A custom metric's load-time probe (metrics_under_test.probe); the others have none."""
    if spec.backend is Backend.CUSTOM:
        from metrics_under_test.probe import probe

        probe(spec.name, metric)


def built_metric(spec: MetricSpec, device: str) -> Metric:
    """The metric behind `spec`, built, not yet probed: the book bounds the two apart."""
    if spec.backend is Backend.CUSTOM:
        from metrics_under_test.custom import build

        return build(spec, device, probed=False)
    if spec.backend is Backend.VLM:
        from metrics_under_test.vlm import adapters

        return adapters.build(spec, device)
    from metrics_under_test.pyiqa_backend import PyiqaMetric

    return PyiqaMetric(spec, device)


T = TypeVar("T")


class HeldModel:
    """The worker's current model, and what it remembers of the metrics that could not load."""

    def __init__(
        self,
        device: str,
        loader: Loader,
        prober: Prober | None,
        watch: BatchWatch,
        hung: Mapping[str, Hung] | None = None,
    ) -> None:
        self.device = device
        self.watch = watch
        self.hung: dict[str, Hung] = dict(hung or {})  # stopped for the run, by metric name
        self._loader = loader
        self._prober = prober
        self._current: tuple[str, Metric] | None = None
        self._broken: dict[str, LoadFailure] = {}

    def load_failed(self, spec: MetricSpec) -> bool:
        """Whether the metric could not be built in this process (its cases say so; see LoadFailure)."""
        return spec.name in self._broken

    def abandon(self, spec: MetricSpec, phase: Phase) -> Callable[[Abandoned], None]:
        """What abandoning `spec` in `phase` does: forget the current model (the abandoned thread
        may still be inside it). Past --batch-timeout the next batch builds a new one; a load
        phase stopped either way, or a batch stopped by the case's interruption (pytest-timeout),
        leaves the metric hung for the run."""

        def abandon(abandoned: Abandoned) -> None:
            self._current = None
            if abandoned.interrupted or phase is not Phase.BATCH:
                self.hung[spec.name] = Hung(spec.name, phase, abandoned.reason)

        return abandon

    def check_hung(self, spec: MetricSpec) -> None:
        if spec.name in self.hung:
            raise self.hung[spec.name].error()

    def _load(self, spec: MetricSpec) -> Metric:
        """Build the metric, then probe it, each in the scoring thread within the load limit."""
        metric = self._phase(spec, Phase.CONSTRUCTION, partial(self._loader, spec, self.device))
        if self._prober is not None:
            self._phase(spec, Phase.PROBE, partial(self._prober, spec, metric))
        return metric

    def _phase(self, spec: MetricSpec, phase: Phase, call: Callable[[], T]) -> T:
        try:
            return self.watch.load(spec.name, phase, call, self.abandon(spec, phase))
        except MetricHangs:
            raise self.hung[spec.name].error() from None

    def get(self, spec: MetricSpec) -> Metric:
        """The metric's model. One that failed to load fails again without building, as a fresh
        exception (LoadFailure.again): re-raising the first one grew its traceback by every case
        that met it, and carried the notes another test (hypothesis) added to it. One that hung
        is never built again (banana_tests.scoring.batch_watch)."""
        self.check_hung(spec)
        if spec.name in self._broken:
            raise self._broken[spec.name].again() from None
        if self._current is not None and self._current[0] == spec.name:
            return self._current[1]
        if self._current is not None:
            self._current = None  # drop the previous model before building the next
            gc.collect()  # a full pass costs ~0.25 s with torch loaded: only when a model is dropped
            release_freed_memory()
        try:
            metric = self._load(spec)
        except MetricHung:
            raise
        except Exception as exc:
            self._broken[spec.name] = LoadFailure(spec.name, type(exc), str(exc))
            raise
        self._current = (spec.name, metric)
        return metric

    def drop(self) -> None:
        """After a metric ran out of memory: drop its model, and what the model holds, before
        anything else allocates (pytest's report of the case, xdist's message to its controller),
        so the process goes on; the next batch builds the model again."""
        self._current = None
        gc.collect()
        release_freed_memory()
