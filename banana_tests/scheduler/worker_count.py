"""How many workers `-n auto` starts for a suite run: as many as fit the cores this process may
use, each scoring on the thread policy's torch threads (banana_tests.scoring.process_tuning), so
workers × threads never exceeds the cores. A metric's cases spread over the workers
(banana_tests.scheduler.metric_groups), so one metric is reason enough for several."""

from __future__ import annotations

import os
import warnings

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


def auto_workers(cores: int, threads: int, given: str | None = None) -> tuple[int, str | None]:
    """`-n auto`: `given` ($PYTEST_XDIST_AUTO_NUM_WORKERS) when it is a number, as xdist reads
    it; else `cores // threads` workers, and a serial run below two (one worker would pay the
    start-up and imports again for nothing). With a note for the header when that leaves cores
    idle."""
    if given:
        try:
            return int(given), None
        except ValueError:
            warnings.warn(f"{AUTO_ENV} is not a number: {given!r}. Ignoring it.", stacklevel=2)
    workers = cores // max(1, threads)
    chosen = workers if workers >= 2 else 0
    if max(1, chosen) * threads >= cores:
        return chosen, None
    return chosen, (
        f"banana-tests: -n auto chose {f'{chosen} workers' if chosen else 'a serial run'} on {cores} cores:"
        f" {threads} torch thread(s) per process (OMP_NUM_THREADS); -n N overrides"
    )


def this_machine() -> tuple[int, str | None]:
    """`auto_workers` for this process: its usable cores, the thread policy's threads, and
    $PYTEST_XDIST_AUTO_NUM_WORKERS."""
    return auto_workers(usable_cores(), score_threads(), os.environ.get(AUTO_ENV))
