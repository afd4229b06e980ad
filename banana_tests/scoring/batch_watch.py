"""A batch that runs long: a line on the terminal every so often, and an optional time limit.

A metric taking 30 s an image showed nothing for minutes, and a hung one held the run forever.
Both use SIGALRM in the main thread, so the line and the limit also come while the metric is in
Python or between torch operations (one single operation is not cut short). Any timer already set
(pytest-timeout's signal method) is put back afterwards with the time it had left. Outside the main
thread, or where there is no SIGALRM, batches run unwatched.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

HEARTBEAT_SECONDS = 30.0
RETRY_SECONDS = 1.0  # a metric that swallowed the timeout meets it again this much later


class BatchTimeout(Exception):
    """A batch ran past the time limit and was stopped; its images have no score."""


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class BatchWatch:
    """`heartbeat`: seconds between "still scoring" lines (None: none); `timeout`: seconds a batch
    may take (None: no limit); `say` writes one line where the user sees it."""

    heartbeat: float | None = HEARTBEAT_SECONDS
    timeout: float | None = None
    say: Callable[[str], None] = to_stderr

    @contextmanager
    def batch(self, metric: str, size: int, first: str) -> Iterator[None]:
        """Watch one call of `metric` on `size` images, `first` naming the first of them."""
        if not (self.heartbeat or self.timeout) or not _can_alarm():
            yield
            return
        start = time.monotonic()
        beats = 0

        def elapsed() -> float:
            return time.monotonic() - start

        def schedule() -> None:
            waits = []
            if self.heartbeat:
                waits.append((beats + 1) * self.heartbeat - elapsed())
            if self.timeout:
                waits.append(self.timeout - elapsed())
            signal.setitimer(signal.ITIMER_REAL, max(min(waits), 1e-3))

        def on_alarm(signum: int, frame: FrameType | None) -> None:
            nonlocal beats
            if self.timeout and elapsed() >= self.timeout:
                signal.setitimer(signal.ITIMER_REAL, RETRY_SECONDS)
                raise BatchTimeout(
                    f"no score within --batch-timeout={self.timeout:g}: {metric}'s batch of {size} "
                    f"image(s) was stopped after {self.timeout:g} s; the other batches still run"
                )
            if self.heartbeat and elapsed() >= (beats + 1) * self.heartbeat:
                beats = int(elapsed() // self.heartbeat)
                more = f" and {size - 1} more" if size > 1 else ""
                self.say(
                    f"banana-tests: {metric} still scoring a batch of {size} image(s) ({first}{more}), "
                    f"{elapsed():.0f} s so far"
                )
            schedule()

        previous_handler = signal.signal(signal.SIGALRM, on_alarm)
        previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            schedule()
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_handler)
            if previous_delay:
                left = max(previous_delay - elapsed(), 1e-3)  # one that fell due meanwhile fires now
                signal.setitimer(signal.ITIMER_REAL, left, previous_interval)


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
