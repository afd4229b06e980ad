"""Score snapshots: a metric's raw scores on the data set, compared within a relative tolerance
and an absolute one of 0.01 normalised points (scores near zero move by float noise alone).

A pyiqa upgrade or a code change that moves scores then fails with a list of the images and
steps that moved and by how much, instead of a wall of JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from syrupy.extensions.json import JSONSnapshotExtension

from banana_tests.suite import SuiteState
from banana_tests.trajectories import Record
from metrics_under_test.registry import MetricSpec

Scores = dict[str, float]


def score_id(record: Record) -> str:
    """A score's place in the snapshot: seed image, run and step."""
    return f"{record.seed_image}/run{record.run}/step{record.step}"


def score_snapshot(state: SuiteState, spec: MetricSpec) -> Scores:
    """Raw scores of every selected record, in a stable order."""
    state.collect()
    records = sorted(state.records, key=lambda r: (r.seed_image, r.run, r.step))
    return dict(zip(map(score_id, records), state.book.scores(spec, records), strict=True))


ATOL_NORMALISED = 0.01  # normalised points; BRISQUE near 0 moved 0.004 with the batch composition


def abs_tolerance(spec: MetricSpec) -> float:
    """ATOL_NORMALISED in the metric's raw units."""
    return ATOL_NORMALISED * (spec.scale.high - spec.scale.low) / 100


def drift(
    expected: Mapping[str, float], actual: Mapping[str, float], rtol: float, atol: float = 0.0
) -> list[str]:
    """One line per score that moved beyond both `rtol` and `atol`, appeared or disappeared;
    empty when it matches."""
    lines = []
    for name in sorted(expected.keys() | actual.keys()):
        if name not in actual:
            lines.append(f"{name}: {expected[name]!r} in the snapshot, not scored now")
        elif name not in expected:
            lines.append(f"{name}: scored {actual[name]!r}, not in the snapshot")
        elif not math.isclose(actual[name], expected[name], rel_tol=rtol, abs_tol=atol):
            old, new = expected[name], actual[name]
            rel = f" ({(new - old) / abs(old):+.2%})" if old else ""
            lines.append(f"{name}: {old:.6g} → {new:.6g}, moved {new - old:+.6g}{rel}")
    return lines


class ScoreSnapshotExtension(JSONSnapshotExtension):
    """JSON snapshots of {score id: raw score} that match within `rtol` or `atol` and diff as
    moved scores."""

    rtol: ClassVar[float] = 1e-3
    atol: ClassVar[float] = 0.0

    @classmethod
    def with_tolerance(cls, rtol: float, atol: float) -> type[ScoreSnapshotExtension]:
        return type(cls.__name__, (cls,), {"rtol": rtol, "atol": atol})

    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        if snapshot_data is None:
            return False
        return not drift(json.loads(snapshot_data), json.loads(serialized_data), self.rtol, self.atol)

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        moved = drift(json.loads(snapshot_data), json.loads(serialized_data), self.rtol, self.atol)
        limits = f"rtol={self.rtol:g} and atol={self.atol:g}"
        yield f"{len(moved)} score(s) moved beyond {limits} (snapshot → now):"
        yield from (f"  {line}" for line in moved)
