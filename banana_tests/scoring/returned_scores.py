"""What a metric returned, checked: one finite float within the score bound per image, or an error
naming the image.
The conversion of one returned value is metrics_under_test.score_value's; here a batch's
values are matched to its records (or in-memory images) and the bad ones named."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from banana_tests.scoring.faults import EnvironmentFault
from banana_tests.trajectories.records import DataError, Record
from metrics_under_test.protocol import MetricError
from metrics_under_test.score_value import SCORE_BOUND, NotAScore, as_list, as_score, in_bound


class UnscoredImage(DataError):
    """A record the metric gave no usable score: a non-finite one, none within the time limit, or
    an exception the metric raised on that image alone."""


class UnscoredByEnvironment(UnscoredImage, EnvironmentFault):
    """A record the metric could not score because its environment is broken (banana_tests.scoring.faults)."""


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
    `score_value`). A metric that returns the wrong number of scores errors each record of that
    batch, by file: which score is whose cannot be known, and no other record is touched."""
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
    """Why a float is no score the suite keeps (see metrics_under_test.score_value)."""
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
