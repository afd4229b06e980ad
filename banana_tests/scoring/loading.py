"""Loading a metric: building the model behind a spec, probing a custom one, and remembering
why one could not load, so each of its cases fails alike without building it again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
    (banana_tests.core.process_scoring.tuned_load)."""
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
