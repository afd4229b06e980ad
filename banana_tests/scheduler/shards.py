"""`--shard=K/N`: one of N CI jobs runs every N-th work unit of the suite.

The units are the xdist scheduler's (banana_tests.scheduler.metric_groups.Group): a metric's
cases on one seed image, or a metric's other tests (controls, invariance, snapshots), so each
shard builds a model only for the metrics it has units of, every non-Δ case runs in exactly one
shard, and a seed image's reference scores are computed once. The units are sorted by their
scope and dealt out in turn (shard K takes units K-1, K-1+N, ...): the same split in every job
that collects the same tests, balanced to one unit, and never Python's per-process `hash()`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_SHARD = re.compile(r"^\s*(?P<k>\d+)\s*/\s*(?P<n>\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Shard `index` (1-based) of `count`."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def keeps(self, nodeids: Sequence[str], metrics: tuple[str, ...]) -> list[bool]:
        """For each test, whether this shard runs it: its unit's place among the sorted units."""
        return self.deals([_scope(nodeid, metrics) for nodeid in nodeids])

    def deals(self, scopes: Sequence[str]) -> list[bool]:
        """For each unit's scope (repeats allowed), whether it falls to this shard."""
        place = {scope: i for i, scope in enumerate(sorted(set(scopes)))}
        return [place[scope] % self.count == self.index - 1 for scope in scopes]


def _scope(nodeid: str, metrics: tuple[str, ...]) -> str:
    """A test's unit: its Group's scope, or the test itself for one on no metric."""
    from banana_tests.scheduler.metric_groups import group_of  # imports xdist: only when sharding

    group = group_of(nodeid, metrics)
    return nodeid if group is None else group.scope


def parse_shard(text: str | None) -> Shard | None:
    """`K/N` with 1 <= K <= N; None when not given; ValueError naming the option otherwise."""
    if text is None:
        return None
    m = _SHARD.match(text)
    if m is not None:
        index, count = int(m["k"]), int(m["n"])
        if 1 <= index <= count:
            return Shard(index, count)
    raise ValueError(f"--shard takes K/N, shard K of N jobs with 1 <= K <= N (e.g. 1/3), got {text!r}")
