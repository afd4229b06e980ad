"""The batching policy: which images a metric is called on together, and in what order.

A metric's call has a fixed cost (tensor set-up, the model's own per-call work) that a batch
shares; a batch holds images of one size, since a metric stacks them, and is bounded in pixels,
since a metric's buffers grow with them. A batch that raises is tried again smaller (`smaller`).
The order in which a (metric, seed image) group's records reach the book is `case_records` and
`group_records`: the suite (SuiteState.gap) and banana_tests.api follow it alike, so they batch
the same images together and get the same scores. Figures: docs/research/speed.md."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import TypeVar

from metrics_under_test.protocol import Image

BATCH = 16
# NIQE's largest buffer is ~400 B per pixel: this keeps it below process_tuning.MMAP_THRESHOLD.
BATCH_PIXELS = 2**19
WINDOW_BYTES = 64 * 2**20  # decoded images per window, scored after the whole window is decoded

K = TypeVar("K")
G = TypeVar("G", bound=Hashable)
R = TypeVar("R")


def case_records(pairs: Sequence[tuple[R, R]]) -> list[R]:
    """A case's own images in the order they are scored: every run's reference, then every
    run's step (the Δ engine splits the scores at len(pairs))."""
    return [*(a for a, _ in pairs), *(b for _, b in pairs)]


def group_records(group: G, scored: set[G], needs: Mapping[G, Sequence[R]]) -> Sequence[R]:
    """The records to score beside a case of `group`: on the group's first case in this
    process, every record the group's cases need (one pass, so one set of batches), then none,
    since the book scans all it is given. `scored` holds the groups already passed and gains
    `group`."""
    if group in scored:
        return ()
    scored.add(group)
    return needs.get(group, ())


def batches(window: list[tuple[K, Image]]) -> Iterator[list[tuple[K, Image]]]:
    """Images of one size together, at most BATCH images and BATCH_PIXELS pixels in a batch (an
    image bigger than that alone), so a call's fixed cost is shared while its buffers stay
    bounded whatever the images' size."""
    batch: list[tuple[K, Image]] = []
    pixels = 0
    for item in sorted(window, key=lambda item: item[1].shape):
        shape = item[1].shape
        if batch and (
            len(batch) == BATCH or pixels + shape[0] * shape[1] > BATCH_PIXELS or shape != batch[0][1].shape
        ):
            yield batch
            batch, pixels = [], 0
        batch.append(item)
        pixels += shape[0] * shape[1]
    if batch:
        yield batch


class OutOfMemory(MemoryError):
    """A metric ran out of memory on in-memory images (a test's crops); its model was dropped."""


def out_of_memory(exc: BaseException) -> bool:
    """MemoryError, or torch's CUDA OutOfMemoryError."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError"


def smaller(chunk: Sequence[K], exc: Exception) -> list[Sequence[K]]:
    """The batches to try a batch in after the metric raised `exc` on it: out of memory, its two
    halves (each halved again if it runs out too); anything else, one image at a time."""
    if out_of_memory(exc):
        half = (len(chunk) + 1) // 2
        return [chunk[:half], chunk[half:]]
    return [[item] for item in chunk]
