"""SIGTERM stops banana-tests' own processes as Ctrl-C does.

CI cancels, `docker stop` and Kubernetes send SIGTERM; by default it kills the process (exit
-15), so a suite run left no JUnit file at all. The handler here raises `Terminated`, a
KeyboardInterrupt, in the main thread instead: Python runs a signal handler there between two
bytecodes, never inside torch, so the run stops where Ctrl-C would stop it (a watched batch is
abandoned between two waits, banana_tests.scoring.metric_calls), pytest writes the JUnit file of
the cases that finished and exits 2, and xdist's controller shuts its workers down.

It is installed only in a run that is the suite's (banana_tests.session.ownership) and in the
`banana-tests` commands, only from the main thread, and only over SIGTERM's default action: a
handler another program installed, or SIG_IGN a parent chose, is left alone. It fires once and
puts the default back, so a second SIGTERM ends a process that is slow to stop. SIGINT keeps
Python's own handler and SIGALRM stays pytest-timeout's.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class Terminated(KeyboardInterrupt):
    """The process received SIGTERM: a KeyboardInterrupt, so all that stops on Ctrl-C stops on it."""

    status = 128 + signal.SIGTERM
    """The exit status a shell reports for a process SIGTERM ended, for the commands that stop."""


def _stop(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated("SIGTERM received: banana-tests stops as on Ctrl-C")


def stop_on_sigterm() -> bool:
    """Make SIGTERM raise `Terminated` in this process; whether it now does (see the module)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _stop)
    return True


def default_sigterm() -> None:
    """SIGTERM's default action back, if this module's handler is installed."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is _stop:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def sigterm_stops() -> Iterator[None]:
    """`stop_on_sigterm` for the duration of the block."""
    installed = stop_on_sigterm()
    try:
        yield
    finally:
        if installed:
            default_sigterm()


def interrupt_status(exc: KeyboardInterrupt) -> int:
    """A command's exit status after an interruption: 130 for Ctrl-C, 143 for SIGTERM."""
    return exc.status if isinstance(exc, Terminated) else 128 + signal.SIGINT
