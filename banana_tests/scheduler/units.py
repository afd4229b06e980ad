"""The unit of work the suite's scheduler and `--shard` share: a metric's cases on one seed image,
or a metric's other tests. Plain data, without xdist, so the api can deal shards without pytest."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Group:
    """A work unit: a metric's cases on one seed image (`seed_image` set: Δ cases and trends,
    which share the reference images and their scores), or every other test of a metric
    (controls, invariance, snapshots, tests on `banana_metric`)."""

    metric: str
    seed_image: str | None = None

    @property
    def scope(self) -> str:
        return f"metric:{self.metric}" + ("" if self.seed_image is None else f"/{self.seed_image}")
