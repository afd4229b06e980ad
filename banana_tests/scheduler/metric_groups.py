"""How the suite uses xdist: how many workers `-n auto` starts, and a scheduler that keeps each
metric's cases on one worker, so its model is built once.

`--dist loadgroup` would do the latter but is broken on pytest 9.2 (pytest-xdist#1386). This is
LoadScope scheduling with the metric as the scope; every other test is its own scope.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from banana_tests.cases import metric_of_id
from banana_tests.session.suite import selected_metrics
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import UnknownMetric

SUITE_DIR = Path(__file__).resolve().parent.parent
CORES_PER_WORKER = 2
AUTO_NOTE = pytest.StashKey[str]()
"""Why `-n auto` started fewer workers than xdist would, for the run's header."""


def auto_workers(config: pytest.Config) -> int | None:
    """`-n auto` for a suite run: a worker per metric, each with CORES_PER_WORKER cores or more,
    and a serial run when that makes fewer than two. Each worker pays again for start-up and the
    torch and pyiqa imports (~9 s here), and a serial run already spreads over the cores through
    torch's threads: on 2 cores, `-n 2` took 22.1 s where serial took 20.3 s. None (xdist's own
    count) when the run is not the suite's."""
    if not runs_the_suite(config):
        return None
    try:
        metrics = len(selected_metrics(config))
    except (UnknownMetric, MetricError, ValueError):
        return None  # pytest_configure reports it as a usage error
    cores = os.cpu_count() or 1
    workers = min(metrics, cores // CORES_PER_WORKER)
    chosen = workers if workers >= 2 else 0
    if chosen < cores:
        config.stash[AUTO_NOTE] = (
            f"banana-tests: -n auto chose {'a serial run' if not chosen else f'{chosen} workers'} on {cores}"
            f" cores for {metrics} metric(s): one worker per metric, {CORES_PER_WORKER}+ cores each, serial"
            " below 2 workers (each worker pays the start-up and imports again); -n N overrides"
        )
    return chosen


def runs_the_suite(config: pytest.Config) -> bool:
    """The command line names metrics, or its paths hold the suite: `-n auto` in another project
    of the same environment keeps xdist's count."""
    if any(a == "--metric" or a.startswith("--metric=") for a in config.invocation_params.args):
        return True
    for arg in config.args:
        if config.option.pyargs and arg.split(".")[0] == SUITE_DIR.name:
            return True
        path = (config.invocation_params.dir / arg.split("::")[0]).resolve()
        if path == SUITE_DIR or SUITE_DIR in path.parents or path in SUITE_DIR.parents:
            return True
    return False


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
