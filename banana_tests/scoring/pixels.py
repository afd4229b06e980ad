"""In-memory images (a test's own crops): scored in the book's batches under the watch, each
once per worker, and kept in the persistent cache by their pixels rather than a file's hash."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from banana_tests.scoring.batching import batches
from banana_tests.scoring.cache import ScoreCache
from banana_tests.scoring.returned_scores import pixel_scores
from metrics_under_test.protocol import Image
from metrics_under_test.spec import MetricSpec

Call = Callable[[MetricSpec, Sequence[Image], str], Sequence[float]]
Identity = Callable[[MetricSpec], tuple[str, dict[str, object]]]


def pixel_digest(image: Image) -> str:
    """A cache key for an in-memory image: its shape and pixels. The prefix keeps it apart from
    the files' sha256 in the same cache table."""
    h = hashlib.sha256(f"{image.dtype}{image.shape}".encode())
    h.update(memoryview(image.tobytes()))
    return "pixels:" + h.hexdigest()


class PixelScores:
    """One worker's scores of in-memory images, by metric and `pixel_digest`. `call` runs the
    metric on a batch as the book does (watched, out of memory handled); `identity` is the
    metric's cache key and description."""

    def __init__(self, call: Call, cache: ScoreCache | None, identity: Identity) -> None:
        self._call, self._cache, self._identity = call, cache, identity
        self._scores: dict[tuple[str, str], float] = {}
        self.hits: set[tuple[str, str]] = set()  # scores that came from the cache

    def scores(self, spec: MetricSpec, images: Sequence[Image]) -> list[float]:
        """Raw scores of `images`, in order; MetricError naming the items a metric gave no finite score."""
        digests = [pixel_digest(img) for img in images]
        todo = {d: img for d, img in zip(digests, images, strict=True) if (spec.name, d) not in self._scores}
        positions: dict[str, list[int]] = {}
        for i, d in enumerate(digests):
            positions.setdefault(d, []).append(i)
        if todo and self._cache is not None:
            for d, value in self._cache.get(self._identity(spec)[0], todo).items():
                self._scores[(spec.name, d)] = value
                self.hits.add((spec.name, d))
                del todo[d]
        if todo:
            for chunk in batches(list(todo.items())):
                raw = self._call(spec, [img for _, img in chunk], f"item {positions[chunk[0][0]][0]}")
                values = pixel_scores(spec.name, [positions[d] for d, _ in chunk], raw)
                self._scores.update(((spec.name, d), v) for (d, _), v in zip(chunk, values, strict=True))
            if self._cache is not None:
                key, description = self._identity(spec)
                self._cache.put(key, {d: self._scores[(spec.name, d)] for d in todo}, description)
        return [self._scores[(spec.name, d)] for d in digests]
