"""What a metric returned, checked: one finite float within the score bound per image, or an error
naming the image; and which exceptions say that a metric's environment is broken, not that it
rejects its input.

The conversion of one returned value is metrics_under_test.protocol's; here a batch's values are
matched to its records (or in-memory images) and the bad ones named. A file that is missing or
unreadable (OSError, FileNotFoundError; huggingface_hub's LocalEntryNotFoundError and
OfflineModeIsEnabled are both), no network (ConnectionError, urllib's URLError), a library that
does not import (ImportError, ModuleNotFoundError), no memory (MemoryError, torch's
OutOfMemoryError), a batch past the run's --batch-timeout (BatchTimeout): the case that meets one
is an error in every family (as the Δ cases' images are), never a failing verdict that a baseline
could list. Anything else a metric raises (ValueError, RuntimeError, ...) is its answer to that
input, and a verdict where the family judges one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from banana_tests.scoring.batching import out_of_memory
from banana_tests.scoring.metric_calls import BatchTimeout
from banana_tests.trajectories.records import DataError, Record
from metrics_under_test.protocol import SCORE_BOUND, MetricError, NotAScore, as_list, as_score, in_bound

ENVIRONMENT: Final = (OSError, ImportError, MemoryError, BatchTimeout)
"""The families of an environment's fault; urllib's, requests' and the hub's errors are OSErrors."""


class EnvironmentFault(Exception):
    """Raised by the suite for an environment fault it met earlier and kept as a message: a record
    left unscored by one (`UnscoredByEnvironment`). Kept as text, not the metric's
    exception, whose traceback holds the batch's frames."""


def environment_fault(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from (`raise ... from`), is an environment's fault."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, (*ENVIRONMENT, EnvironmentFault)) or out_of_memory(found):
            return True
        seen.add(id(found))
        found = found.__cause__
    return False


class UnscoredImage(DataError):
    """A record the metric gave no usable score: a non-finite one, none within the time limit, or
    an exception the metric raised on that image alone."""


class UnscoredByEnvironment(UnscoredImage, EnvironmentFault):
    """A record the metric could not score because its environment is broken (`environment_fault`)."""


def unscored(records: Sequence[Record], errors: dict[Path, DataError]) -> DataError | None:
    """One error listing every record of `records` that has one (each once), or None: a case over
    several runs names all its bad records, not only the first; records with the same reason
    share it. It is an environment's fault when one of them is."""
    bad = {r.path: (r, errors[r.path]) for r in records if r.path in errors}
    if len(bad) <= 1:
        return next(iter(bad.values()))[1] if bad else None
    by_reason: dict[str, list[str]] = {}
    for r, error in bad.values():
        name, text = r.named, str(error)
        reason = text.removeprefix(f"{name}: ") if text.startswith(f"{name}: ") else text
        by_reason.setdefault(reason, []).append(name)
    listed = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())
    what = "image files" if all(r.is_file for r, _ in bad.values()) else "records"
    environment = any(isinstance(error, EnvironmentFault) for _, error in bad.values())
    kind = UnscoredByEnvironment if environment else DataError
    return kind(f"{len(bad)} {what} cannot be scored: {listed}")


def record_scores(name: str, records: Sequence[Record], scores: Sequence[float]) -> list[float | DataError]:
    """One finite float per record, or an error naming each record whose score is not one (see
    metrics_under_test.protocol's `as_score`). A metric that returns the wrong number of scores
    errors each record of that batch, by file: which score is whose cannot be known, and no other
    record is touched."""
    try:
        returned = as_list(scores)
    except NotAScore as exc:
        return [UnscoredImage(f"{r.named}: metric {name!r} returned {exc}") for r in records]
    if len(returned) != len(records):
        what = f"metric {name!r} returned {len(returned)} scores for a batch of {len(records)} images"
        return [UnscoredImage(f"{r.named}: {what}, this one among them") for r in records]
    return [_record_score(name, r, v) for r, v in zip(records, returned, strict=True)]


def _record_score(name: str, record: Record, value: object) -> float | DataError:
    try:
        score = as_score(value)
    except NotAScore as exc:
        return UnscoredImage(f"{record.named}: metric {name!r} returned {exc}")
    if in_bound(score):
        return score
    return UnscoredImage(f"{record.named}: metric {name!r} scored it {score!r}, {not_a_score(score)}")


def not_a_score(score: float) -> str:
    """Why a float is no score the suite keeps (see metrics_under_test.protocol)."""
    return "not a finite number" if not math.isfinite(score) else f"beyond ±{SCORE_BOUND:g}"


def pixel_scores(name: str, positions: Sequence[Sequence[int]], scores: Sequence[float]) -> list[float]:
    """`record_scores` for in-memory images, named by their positions in the caller's list."""
    try:
        values = [as_score(s) for s in scores]
    except NotAScore as exc:
        raise MetricError(f"metric {name!r} returned {exc}") from None
    if len(values) != len(positions):
        raise MetricError(f"metric {name!r} returned {len(values)} scores for {len(positions)} images")
    bad = [(p, v) for p, v in zip(positions, values, strict=True) if not in_bound(v)]
    if bad:
        named = ", ".join(f"item {' and '.join(map(str, p))}: {v!r}, {not_a_score(v)}" for p, v in bad)
        raise MetricError(f"metric {name!r} returned unusable scores ({named})")
    return values
