"""How the suite uses xdist: how many workers `-n auto` starts, and a scheduler that keeps each
metric's cases on one worker, so its model is built once.

`--dist loadgroup` would do the latter but is broken on pytest 9.2 (pytest-xdist#1386). This is
LoadScope scheduling with the metric as the scope; every other test is its own scope.
"""

from __future__ import annotations

import os
import re

import pytest
from xdist.scheduler import LoadScopeScheduling

from banana_tests.cases import metric_of_id

CORES_PER_WORKER = 2
AUTO_NOTE = pytest.StashKey[str]()
"""Why `-n auto` started fewer workers than xdist would, for the run's header."""


def auto_workers(metrics: int) -> tuple[int, str | None]:
    """`-n auto` for a suite run of `metrics` metrics: a worker per metric, each with
    CORES_PER_WORKER cores or more, and a serial run when that makes fewer than two; with a note
    for the header when that is fewer workers than cores. Each worker pays again for start-up and
    the torch and pyiqa imports (~9 s here), and a serial run already spreads over the cores
    through torch's threads: on 2 cores, `-n 2` took 22.1 s where serial took 20.3 s."""
    cores = os.cpu_count() or 1
    workers = min(metrics, cores // CORES_PER_WORKER)
    chosen = workers if workers >= 2 else 0
    if chosen >= cores:
        return chosen, None
    return chosen, (
        f"banana-tests: -n auto chose {'a serial run' if not chosen else f'{chosen} workers'} on {cores}"
        f" cores for {metrics} metric(s): one worker per metric, {CORES_PER_WORKER}+ cores each, serial"
        " below 2 workers (each worker pays the start-up and imports again); -n N overrides"
    )


_PARAM = re.compile(r"\[(?P<id>[^\]]+)\]$")


class MetricScheduling(LoadScopeScheduling):
    """Scope = the metric a test's id starts with: the suite's cases and any test on the public
    `banana_metric` fixture, so each worker builds a metric's model once."""

    def __init__(self, config, log=None, metrics: tuple[str, ...] = ()) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, log)
        self.metrics = metrics

    def _split_scope(self, nodeid: str) -> str:
        m = _PARAM.search(nodeid)
        metric = metric_of_id(m["id"], self.metrics) if m is not None else None
        return nodeid if metric is None else "metric:" + metric
