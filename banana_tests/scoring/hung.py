"""A metric stopped for hanging is hung for the rest of the run.

A thread cannot be killed: the abandoned call may still be inside the model, or inside the
import of the metric's module, holding that module's import lock. Using the metric again could
wait forever (a second import blocks on the lock) or read a half-updated model, and waiting out
the limit again in every case made one hung constructor cost 24 × `--timeout`. So the metric's
remaining cases error at once, in one line naming it and the phase that hung.
"""

from __future__ import annotations

from dataclasses import dataclass

from banana_tests.scoring.batch_watch import Phase
from metrics_under_test.protocol import MetricError


class MetricHung(MetricError):
    """A case of a metric that hung earlier in the run, or the case that stopped it."""


@dataclass(frozen=True)
class Hung:
    """`metric` hung in `phase`; `reason` says what stopped it (the limit, or the case's
    interruption by pytest-timeout)."""

    metric: str
    phase: Phase
    reason: str

    def line(self) -> str:
        return (
            f"metric {self.metric!r} hung in its {self.phase}: {self.reason}; its other cases in this "
            "run error without waiting"
        )

    def error(self) -> MetricHung:
        return MetricHung(self.line())
