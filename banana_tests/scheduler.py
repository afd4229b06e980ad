"""An xdist scheduler that keeps each metric's cases on one worker, so its model is built once.

`--dist loadgroup` would do this but is broken on pytest 9.2 (pytest-xdist#1386). This is
LoadScope scheduling with the metric as the scope; every other test is its own scope.
"""

from __future__ import annotations

import re

from xdist.scheduler import LoadScopeScheduling

from banana_tests.cases import CaseKey

_PARAM = re.compile(r"\[(?P<id>[^\]]+)\]$")


class MetricScheduling(LoadScopeScheduling):
    """Scope = the metric named in a suite case's id."""

    def __init__(self, config, log=None, metrics: tuple[str, ...] = ()) -> None:  # type: ignore[no-untyped-def]
        super().__init__(config, log)
        self.metrics = metrics

    def _split_scope(self, nodeid: str) -> str:
        m = _PARAM.search(nodeid)
        if m is not None:
            try:
                return "metric:" + CaseKey.from_test_id(m["id"], self.metrics).metric
            except ValueError:
                pass
        return nodeid
