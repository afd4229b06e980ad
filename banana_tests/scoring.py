"""Scores: each image scored once per metric, one metric model held per worker at a time."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from banana_tests.images import ImageStore
from banana_tests.trajectories import DataError, Record
from metrics_under_test.protocol import Metric, check_scores
from metrics_under_test.registry import MetricSpec

BATCH = 16

Loader = Callable[[MetricSpec, str], Metric]


def load_metric(spec: MetricSpec, device: str) -> Metric:
    """Build the metric behind `spec`; the backend is imported only now."""
    from metrics_under_test.pyiqa_backend import PyiqaMetric

    return PyiqaMetric(spec, device)


class ScoreBook:
    """One worker's scores. Asked for a few records, it scores every record the metric will
    need on this worker in batches, so the model is built once and each image scored once."""

    def __init__(self, device: str, images: ImageStore | None = None, loader: Loader = load_metric) -> None:
        self.device = device
        self.images = images or ImageStore()
        self.builds: Counter[str] = Counter()
        self._loader = loader
        self._current: tuple[str, Metric] | None = None
        self._broken: dict[str, Exception] = {}
        self._scores: dict[tuple[str, Path], float | DataError] = {}

    def scores(
        self, spec: MetricSpec, records: Sequence[Record], upcoming: Sequence[Record] = ()
    ) -> list[float]:
        """Raw scores of `records`. `upcoming` are records this metric needs later on this worker:
        they are scored in the same pass. Raises DataError for a record whose image is bad."""
        todo = {r.path: r for r in (*records, *upcoming) if (spec.name, r.path) not in self._scores}
        if todo:
            self._score(spec, list(todo.values()))
        out = []
        for r in records:
            value = self._scores[(spec.name, r.path)]
            if isinstance(value, DataError):
                raise value
            out.append(value)
        return out

    def _score(self, spec: MetricSpec, records: list[Record]) -> None:
        metric = self._metric(spec)
        for start in range(0, len(records), BATCH):
            chunk, images = [], []
            for r in records[start : start + BATCH]:
                try:
                    images.append(self.images.get(r))
                    chunk.append(r)
                except DataError as exc:
                    self._scores[(spec.name, r.path)] = exc
            if images:
                values = check_scores(spec.name, images, metric(images))
                self._scores.update(((spec.name, r.path), v) for r, v in zip(chunk, values, strict=True))

    def _metric(self, spec: MetricSpec) -> Metric:
        if spec.name in self._broken:
            raise self._broken[spec.name]
        if self._current is not None and self._current[0] == spec.name:
            return self._current[1]
        self._current = None  # drop the previous model before building the next
        gc.collect()
        try:
            metric = self._loader(spec, self.device)
        except Exception as exc:
            self._broken[spec.name] = exc
            raise
        self.builds[spec.name] += 1
        self._current = (spec.name, metric)
        return metric
