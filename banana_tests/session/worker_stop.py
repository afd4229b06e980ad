"""SIGTERM at xdist's controller stops its workers at once, as Ctrl-C stops the whole group.

`docker stop` and Kubernetes signal the container's first process only, the controller. On
its KeyboardInterrupt xdist's teardown asks each worker's gateway to exit, and execnet
interrupts a worker busy with a case only after 5 s, or lets it run 10 s more where SIGINT is
ignored (a job started in the background), before the JUnit file is written: past the 10 s
`docker stop` waits before SIGKILL. So the controller passes the SIGTERM on to the workers it
started on this machine, each stopped within one wait of its batch (banana_tests.termination),
and the file is written as soon as they are down.
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import pytest

from banana_tests.termination import Terminated


def worker_process(node: Any) -> subprocess.Popen[bytes] | None:
    """The local process of an xdist worker (execnet's popen gateway), None for any other."""
    process = getattr(getattr(node.gateway, "_io", None), "popen", None)
    return process if isinstance(process, subprocess.Popen) else None


class WorkerStop:
    """Keeps the controller's local workers, to pass them a SIGTERM the controller received."""

    def __init__(self) -> None:
        self.workers: list[subprocess.Popen[bytes]] = []

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        process = worker_process(node)
        if process is not None:
            self.workers.append(process)

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """Popen signals only a process it has not reaped, so never another process's pid."""
        if isinstance(excinfo.value, Terminated):
            for process in self.workers:
                process.send_signal(signal.SIGTERM)
