"""`--shard=K/N`: one of N CI jobs runs every N-th work unit of the suite.

The units are the xdist scheduler's (banana_tests.scheduler.units.Group): a metric's
cases on one seed image, or a metric's other tests (controls, invariance, snapshots), so each
shard builds a model only for the metrics it has units of, every non-Δ case runs in exactly one
shard, and a seed image's reference scores are computed once. The units are those of the
selection (every selected metric on every selected seed image, and each metric's other tests),
not those collected: `-k`, `--lf` and `--ff` narrow a run after it is dealt, so a test belongs
to one shard whatever else is selected, and `banana-tests score --shard` deals the same units
(`Shard.deal`, from `banana_tests.core.suite.selection_units`). The (metric, seed
image) units come first, sorted, then each metric's other tests; they are dealt out in turn
(shard K takes units K-1, K-1+N, ...): balanced to one unit, never Python's per-process `hash()`.
A test on no metric is dealt by a checksum of its id (`Shard.holds`), which needs no list.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from banana_tests.counts import whole_number

if TYPE_CHECKING:
    from banana_tests.scheduler.units import Group

MAX_SHARDS = 10_000  # CI jobs of one run


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def deal(self, units: Iterable[Group]) -> frozenset[Group]:
        """The units that fall to this shard: the (metric, seed image) units sorted, then each
        metric's other tests, dealt out in turn."""
        ordered = sorted(set(units), key=_order)
        return frozenset(ordered[self.index - 1 :: self.count])

    def holds(self, test_id: str) -> bool:
        """Whether a test on no metric falls to this shard: the same in every process."""
        return zlib.crc32(test_id.encode()) % self.count == self.index - 1


def _order(unit: Group) -> tuple[bool, str, str]:
    return unit.seed_image is None, unit.metric, unit.seed_image or ""


def parse_shard(text: str | None) -> Shard | None:
    """`K/N` with 1 <= K <= N <= MAX_SHARDS, each in plain digits (`whole_number`), spaces around
    them allowed; None when not given; ValueError naming the option otherwise."""
    if text is None:
        return None
    k, _, n = text.partition("/")
    try:
        count = whole_number("--shard", n.strip(), 1, MAX_SHARDS)
        return Shard(whole_number("--shard", k.strip(), 1, count), count)
    except ValueError:
        pass
    raise ValueError(
        f"--shard takes K/N, shard K of N jobs with 1 <= K <= N <= {MAX_SHARDS} in digits 0-9 (e.g. 1/3), "
        f"got {text!r}"
    )
