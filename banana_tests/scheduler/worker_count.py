"""How many workers `-n auto` starts for a suite run: as many as fit the cores this process may
use, each scoring on the thread policy's torch threads (banana_tests.scoring.process_tuning), so
workers × threads never exceeds the cores, and as many as fit the memory available: a worker
holds one model at a time, and may run any selected metric, so each is counted at the largest
measured peak of the selected metrics (`metrics_under_test.spec`). A metric's cases spread over
the workers (banana_tests.scheduler.metric_groups), so one metric is reason enough for several."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from banana_tests.scoring.process_tuning import score_threads

AUTO_ENV = "PYTEST_XDIST_AUTO_NUM_WORKERS"
AUTO_NOTE = pytest.StashKey[str]()
"""Why `-n auto` started fewer workers than the cores, for the run's header."""


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (a container's or `taskset`'s
    quota), as xdist counts them, else every core."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


GIB = 2**30
MEMINFO = Path("/proc/meminfo")
CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class MemoryFit:
    """The memory a run's workers share (bytes available now) and the largest peak of one
    scoring process among the selected metrics (`metric`, `peak` bytes)."""

    available: int
    metric: str
    peak: int

    @property
    def workers(self) -> int:
        return self.available // max(1, self.peak)

    def why(self) -> str:
        return (
            f"{self.metric} peaks at {self.peak / GIB:.1f} GiB a process and {self.available / GIB:.1f} GiB "
            "of memory is available"
        )


def available_memory() -> int | None:
    """Bytes this process's children may still use: the kernel's MemAvailable, or less under a
    cgroup (v2) memory limit (a container's); None where neither can be read."""
    found = []
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (CGROUP / "memory.max").read_text().strip()
        if limit != "max":
            found.append(int(limit) - int((CGROUP / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def memory_fit(peaks: Mapping[str, int], metrics: list[str], available: int | None) -> MemoryFit | None:
    """The fit of `metrics` (their measured `peaks` in bytes; a metric without one does not
    count) in `available` bytes; None when nothing is known."""
    measured = [(peaks[m], m) for m in metrics if m in peaks]
    if available is None or not measured:
        return None
    peak, metric = max(measured)
    return MemoryFit(available, metric, peak)


def auto_workers(
    cores: int, threads: int, given: str | None = None, memory: MemoryFit | None = None
) -> tuple[int, str | None]:
    """`-n auto`: `given` ($PYTEST_XDIST_AUTO_NUM_WORKERS) when it is a number, as xdist reads
    it; else `cores // threads` workers, or fewer when `memory` fits fewer, and a serial run
    below two (one worker would pay the start-up and imports again for nothing). With a note for
    the header when that leaves cores idle, saying whether memory or threads set the number."""
    if given:
        try:
            return int(given), None
        except ValueError:
            warnings.warn(f"{AUTO_ENV} is not a number: {given!r}. Ignoring it.", stacklevel=2)
    by_cores = cores // max(1, threads)
    workers = by_cores if memory is None else min(by_cores, memory.workers)
    chosen = workers if workers >= 2 else 0
    if max(1, chosen) * threads >= cores:
        return chosen, None
    count = f"{chosen} workers" if chosen else "a serial run"
    if memory is not None and memory.workers < by_cores:
        return chosen, f"banana-tests: -n auto chose {count} on {cores} cores: {memory.why()}; -n N overrides"
    return chosen, (
        f"banana-tests: -n auto chose {count} on {cores} cores:"
        f" {threads} torch thread(s) per process (OMP_NUM_THREADS); -n N overrides"
    )


def this_machine(
    peaks: Mapping[str, int] | None = None, metrics: list[str] | None = None
) -> tuple[int, str | None]:
    """`auto_workers` for this process: its usable cores, the thread policy's threads,
    $PYTEST_XDIST_AUTO_NUM_WORKERS, and the memory available for `metrics` of these `peaks`."""
    fit = memory_fit(peaks or {}, metrics or [], available_memory()) if metrics else None
    return auto_workers(usable_cores(), score_threads(), os.environ.get(AUTO_ENV), fit)
