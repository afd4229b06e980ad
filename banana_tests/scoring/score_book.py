"""The score book: one worker's scores, each image scored once per metric, and in-memory images
(a test's own crops) beside them.

Checking what a metric returned is banana_tests.scoring.returned_scores, the batches
banana_tests.scoring.batching, loading and holding the model banana_tests.scoring.metric_calls;
the degradation oracle's figures, which need no model, are banana_tests.scoring.oracle's. In-memory
images are scored in the book's batches under the watch, each once per worker, and kept in the
persistent cache by their pixels rather than a file's hash.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from banana_tests.scoring.batching import WINDOW_BYTES, OutOfMemory, batches, out_of_memory, smaller
from banana_tests.scoring.metric_calls import (
    KEPT,
    Abandoned,
    BatchTimeout,
    BatchWatch,
    HeldModel,
    Hung,
    Loader,
    Phase,
    Prober,
    load_metric,
)
from banana_tests.scoring.returned_scores import (
    UnscoredByEnvironment,
    UnscoredImage,
    environment_fault,
    pixel_scores,
    record_scores,
    unscored,
)
from banana_tests.scoring.score_cache import ScoreCache
from banana_tests.scoring.score_identity import identity, identity_key
from banana_tests.trajectories.images import ImageStore
from banana_tests.trajectories.records import DataError, Record
from metrics_under_test.protocol import Image, raised_at
from metrics_under_test.spec import MetricSpec

if TYPE_CHECKING:
    from banana_tests.scoring.score_identity import Loaded


class ScoreBook:
    """One worker's scores. Asked for a few records, it scores every record the metric will
    need on this worker in batches, so the model is built once and each image scored once."""

    def __init__(
        self,
        device: str,
        images: ImageStore | None = None,
        loader: Loader = load_metric,
        cache: ScoreCache | None = None,
        watch: BatchWatch | None = None,
        prober: Prober | None = None,
        hung: Mapping[str, Hung] | None = None,
        loaded: Loaded | None = None,
    ) -> None:
        """`loader` builds a metric and `prober` checks it once built (None: `loader` does); each
        runs under the watch's load limit. `hung`: metrics that hung before scoring (their import).
        `loaded`: the distributions each metric loads and the modules it could not import
        (banana_tests.scoring.score_identity), part of its cache identity."""
        self.device = device
        self.loaded = loaded or {}
        self.cache = cache
        self.watch = watch or BatchWatch()
        self.hits: set[tuple[str, Path]] = set()  # scores that came from the cache
        self._keys: dict[str, tuple[str, dict[str, object]]] = {}
        self.images = images or ImageStore()
        self.models = HeldModel(device, loader, prober, self.watch, hung)
        self._scores: dict[tuple[str, Path], float | DataError] = {}
        self.pixels = PixelScores(self.call, cache, self._key)

    def scores(
        self, spec: MetricSpec, records: Sequence[Record], upcoming: Sequence[Record] = ()
    ) -> list[float]:
        """Raw scores of `records`. `upcoming` are records this metric needs later on this worker:
        they are scored in the same pass. Raises DataError naming every record of `records` that
        has no score (a bad image, a non-finite score, a batch over the time limit)."""
        self.models.check_hung(spec)
        todo = {r.path: r for r in (*records, *upcoming) if (spec.name, r.path) not in self._scores}
        if todo and self.cache is not None:
            self._recall(spec, todo)
        if todo:
            self._score(spec, list(todo.values()))
            self._remember(spec, todo)
        values = [self._scores[(spec.name, r.path)] for r in records]
        errors = {r.path: v for r, v in zip(records, values, strict=True) if isinstance(v, DataError)}
        error = unscored(records, errors)
        if error is not None:
            raise error
        return [v for v in values if not isinstance(v, DataError)]

    def score_pixels(self, spec: MetricSpec, images: Sequence[Image]) -> list[float]:
        """Raw scores of in-memory images (a test's own crops): batched as records are, each
        scored once per worker and kept in the persistent cache (`PixelScores`)."""
        self.models.check_hung(spec)
        return self.pixels.scores(spec, images)

    def figure(self, spec: MetricSpec, name: str, measure: Callable[[], float]) -> tuple[float, bool]:
        """A figure measured on the metric (an invariance check's change), kept in the persistent
        cache under the metric's identity and `name`, so a rerun builds no model for it and any
        change to the metric measures it again; `(value, whether it came from the cache)`.
        `name` must say everything else the figure depends on, and be no sha256 (the images' keys)."""
        self.models.check_hung(spec)
        if self.cache is not None:
            found = self.cache.get(self._key(spec)[0], [name])
            if name in found:
                return found[name], True
        value = float(measure())
        if self.cache is not None and math.isfinite(value):
            key, description = self._key(spec)
            self.cache.put(key, {name: value}, description)
        return value, False

    def model(self, spec: MetricSpec) -> WatchedModel:
        """The metric's model, built on first use, its calls under the watch (`call`); the
        worker holds one model at a time."""
        self.models.get(spec)
        return WatchedModel(self, spec)

    def call(self, spec: MetricSpec, images: Sequence[Image], first: str = "item 0") -> Sequence[float]:
        """One call of the metric on in-memory `images` (`first` names the first), bounded as a
        batch is, as the metric returns them: no cache, no checks. Out of memory, the model is
        dropped at once and OutOfMemory raised in one line, so the process (and pytest) has
        memory again."""
        exhausted = ""
        try:
            return self.watch.run(
                spec.name,
                len(images),
                first,
                partial(self.models.get(spec), list(images)),
                self.models.abandon(spec, Phase.BATCH),
            )
        except Exception as exc:
            if not out_of_memory(exc):
                raise
            exhausted = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        self.models.drop()  # out of the handler: its frames, which hold the model, are gone
        height, width = images[0].shape[:2]
        raise OutOfMemory(
            f"{spec.name} ran out of memory scoring {len(images)} image(s) of {width}x{height} px "
            f"({exhausted}); its model was dropped and is built again for the next batch"
        )

    def cached(self, spec: MetricSpec, records: Sequence[Record]) -> list[bool]:
        """Whether each record's score came from the persistent cache."""
        return [(spec.name, r.path) in self.hits for r in records]

    def failures(self, spec: MetricSpec, records: Sequence[Record]) -> dict[Path, DataError]:
        """The error of each record of `records` that was tried and got no score, by path."""
        found = ((r.path, self._scores.get((spec.name, r.path))) for r in records)
        return {path: value for path, value in found if isinstance(value, DataError)}

    def _recall(self, spec: MetricSpec, todo: dict[Path, Record]) -> None:
        """Move every record the cache knows out of `todo` and into the scores. Each record is
        checked first, as decoding would (sha256 against its metadata, pixel limit, mode): a
        cached score of a file that has since changed, or that the options now refuse, is an error."""
        assert self.cache is not None
        key = self._key(spec)[0]
        hashes = {}
        for path, record in list(todo.items()):
            try:
                hashes[path] = self.images.check(record)
            except DataError as exc:
                self._scores[(spec.name, path)] = exc
                del todo[path]
        found = self.cache.get(key, hashes.values())
        for path, digest in hashes.items():
            if digest in found:
                self._scores[(spec.name, path)] = found[digest]
                self.hits.add((spec.name, path))
                del todo[path]

    def _remember(self, spec: MetricSpec, scored: dict[Path, Record]) -> None:
        if self.cache is None:
            return
        key, description = self._key(spec)
        new = {}
        for path, record in scored.items():
            value, digest = self._scores.get((spec.name, path)), self.images.digest(record)
            if isinstance(value, float) and digest is not None:
                new[digest] = value
        self.cache.put(key, new, description)

    def _key(self, spec: MetricSpec) -> tuple[str, dict[str, object]]:
        """The metric's cache identity, weight files hashed once per worker."""
        if spec.name not in self._keys:
            assert self.cache is not None
            description = identity(spec, self.device, self.cache.file_hash)
            if spec.name in self.loaded:
                found = self.loaded[spec.name]
                description["loaded"] = dict(found["distributions"])
                description["missing"] = list(found["missing"])
            self._keys[spec.name] = (identity_key(description), description)
        return self._keys[spec.name]

    def _score(self, spec: MetricSpec, records: list[Record]) -> None:
        """Decode a window of images first, then score it in batches: decoding between batches
        put each long-lived image array between the model's short-lived buffers on the heap, which
        then could not be reused (docs/research/speed.md)."""
        self.models.get(spec)  # a metric that cannot be built fails before any image is decoded
        window: list[tuple[Record, Image]] = []
        size = 0
        for r in records:
            try:
                image = self.images.get(r)
            except DataError as exc:
                self._scores[(spec.name, r.path)] = exc
                continue
            window.append((r, image))
            size += image.nbytes
            if size >= WINDOW_BYTES:
                self._score_window(spec, window)
                window, size = [], 0
        self._score_window(spec, window)

    def _score_window(self, spec: MetricSpec, window: list[tuple[Record, Image]]) -> None:
        for chunk in batches(window):
            self._score_batch(spec, chunk)

    def _score_batch(self, spec: MetricSpec, chunk: Sequence[tuple[Record, Image]]) -> None:
        """Score one batch. When the metric raises on it, the images are tried in smaller batches
        (see `smaller`), so that only the image that makes it raise errors, with what it raised."""
        from metrics_under_test.protocol import UnscoredImages

        records = [r for r, _ in chunk]
        values: list[float | DataError] = []
        parts: list[Sequence[tuple[Record, Image]]] = []
        exhausted = False
        try:
            raw = self._watched(spec, chunk)
        except BatchTimeout:
            return  # its images' errors are in
        except UnscoredImages as exc:  # a VLM answered without a score: those images fail alone
            values = [
                value
                if value is not None
                else DataError(f"{r.path}: {spec.name} gave no score: {exc.reasons.get(i)}")
                for i, (r, value) in enumerate(zip(records, exc.scores, strict=True))
            ]
        except KEPT:
            raise
        except Exception as exc:  # the metric's own: an image it cannot take, or out of memory
            exhausted = out_of_memory(exc)
            if len(chunk) > 1:
                parts = smaller(chunk, exc)
            else:
                (record, _), what = chunk[0], " ".join(f"{type(exc).__name__}: {exc}".split())
                kind = UnscoredByEnvironment if environment_fault(exc) else UnscoredImage
                values = [kind(f"{record.named}: {spec.name} raised {what}{raised_at(exc)}")]
        else:
            values = record_scores(spec.name, records, raw)
        if exhausted:  # out of the handler: its frames, which hold the model, are gone
            self.models.drop()
        if parts:
            for part in parts:
                self._score_batch(spec, part)
            return
        self._scores.update(((spec.name, r.path), v) for r, v in zip(records, values, strict=True))

    def _watched(self, spec: MetricSpec, chunk: Sequence[tuple[Record, Image]]) -> Sequence[float]:
        """The metric's scores of one batch of records under the watch (a model abandoned with a
        batch is rebuilt for the next); an abandoned batch's records get its reason as their error."""
        metric, images, (first, _) = self.models.get(spec), [image for _, image in chunk], chunk[0]

        def abandon(abandoned: Abandoned) -> None:
            self.models.abandon(spec, Phase.BATCH)(abandoned)
            self._scores.update(
                ((spec.name, r.path), UnscoredImage(f"{r.named}: {abandoned.reason}")) for r, _ in chunk
            )

        return self.watch.run(spec.name, len(chunk), first.named, partial(metric, images), abandon)


class WatchedModel:
    """A metric's model as `ScoreBook.model` hands it out: a call runs under the watch, as the
    suite's batches do (a hang stops the case and leaves the metric hung, never the run); every
    other attribute is the model's own."""

    def __init__(self, book: ScoreBook, spec: MetricSpec) -> None:
        self._book, self._spec = book, spec

    def __call__(self, images: Sequence[Image]) -> Sequence[float]:
        return self._book.call(self._spec, images)

    def __getattr__(self, attribute: str) -> object:
        if attribute.startswith("__") or attribute in ("_book", "_spec"):  # copy, pickle: not the model's
            raise AttributeError(attribute)
        return getattr(self._book.models.get(self._spec), attribute)

    def __repr__(self) -> str:
        return f"<watched {self._spec.name}>"


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
