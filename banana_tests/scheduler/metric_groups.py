"""The suite's xdist scheduler: it spreads a metric's cases over the workers in groups of one
seed image, so each worker builds each model once and a seed image's reference scores are
computed on one worker.

`--dist loadgroup` would group too but is broken on the pytest the suite supports (docs/research/speed.md).
This is LoadScope scheduling with (metric, seed image) as the scope (a metric alone for its other
tests); every test on no metric is its own scope. The controller collects nothing and sees node ids
only: a planned case's unit is read off its typed key (`units_of`, built from the plan), not out of
its id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from xdist.scheduler import LoadScopeScheduling

from banana_tests.cases import CaseKey, FamilyKey, metric_of_id, strip_xdist_group
from banana_tests.scheduler.sharding import Group

_PARAM = re.compile(r"\[(?P<id>[^\]]+)\]$")


def units_of(keys: Iterable[CaseKey | FamilyKey]) -> dict[str, Group]:
    """Each planned case's unit by its test id, read off its typed key: a Δ case's (metric, seed
    image), a family case's metric and `unit_image`."""
    return {
        key.test_id: Group(key.metric, key.seed_image if isinstance(key, CaseKey) else key.unit_image)
        for key in keys
    }


def group_of(nodeid: str, metrics: tuple[str, ...], units: Mapping[str, Group] | None = None) -> Group | None:
    """The group of a test by its id, for the xdist controller, which sees node ids only: a planned
    case's from `units` (`units_of`); any other test on a metric, whose id the plugin starts with
    that metric, is in the metric's group of other tests (`--shard` reads the same units off the
    items: session.collection.unit_of); None for a test on none of `metrics`."""
    m = _PARAM.search(nodeid)
    if m is None:
        return None
    test_id = strip_xdist_group(m["id"])
    unit = (units or {}).get(test_id)
    if unit is not None:
        return unit
    metric = metric_of_id(test_id, metrics)
    return None if metric is None else Group(metric)


class MetricScheduling(LoadScopeScheduling):
    """xdist's LoadScope scheduling with a `Group` as the scope, so one metric's Δ cases spread
    over the workers a seed image at a time. A worker asks for the next unit of the metric it
    holds while there is one, and moves on to another metric only when none is left, so it
    builds each metric's model at most once (a unit of a metric never comes back to the queue,
    except from a crashed worker)."""

    def __init__(  # type: ignore[no-untyped-def]
        self, config, log=None, metrics: tuple[str, ...] = (), units: Mapping[str, Group] | None = None
    ) -> None:
        super().__init__(config, log)
        self.metrics = metrics
        self.units = dict(units or {})
        self._metric_of_scope: dict[str, str] = {}
        self._metric_on: dict[object, str] = {}  # the metric each worker was last given

    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid, self.metrics, self.units)
        if group is None:
            return nodeid
        self._metric_of_scope[group.scope] = group.metric
        return group.scope

    def _assign_work_unit(self, node) -> None:  # type: ignore[no-untyped-def]
        held = self._metric_on.get(node)
        if held is not None:
            same = next((s for s in self.workqueue if self._metric_of_scope.get(s) == held), None)
            if same is not None:
                self.workqueue.move_to_end(same, last=False)
        scope = next(iter(self.workqueue))
        if scope in self._metric_of_scope:
            self._metric_on[node] = self._metric_of_scope[scope]
        super()._assign_work_unit(node)
