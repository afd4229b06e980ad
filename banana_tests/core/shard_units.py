"""The units `--shard` deals (banana_tests.scheduler.sharding): every selected metric on every seed
image of the selection, and each metric's other tests; a suite run's collection and the api's
scoring deal the same ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from banana_tests.scheduler.sharding import Group

if TYPE_CHECKING:
    from banana_tests.core.suite import SuiteState


def selection_units(state: SuiteState) -> list[Group]:
    """Every selected metric on every seed image of the selection, then each metric alone."""
    seeds = dict.fromkeys(
        [*(r.seed_image for r in state.planning.records), *(k.seed_image for k in state.planning.plans)]
    )
    return [*(Group(m, s) for m in state.metrics for s in seeds), *(Group(m) for m in state.metrics)]
