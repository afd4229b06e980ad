"""Tuning a scoring process: torch's threads, glibc's freed memory, the garbage
collector, a quick exit; and each setting as it was, put back when the pytest run ends.

Only a suite run tunes its processes: the plugin freezes what its collection built, and
banana_tests.core.suite loads its metrics through `tune_for_scoring`, once the first one is
built. Another project's run in the same environment, and code that loads a metric itself, are
left as they are (docs/research/speed.md "What a suite run changes in its process").

Each change is recorded first, in `SAVED`, and the plugin's pytest_unconfigure calls `restore`, so
a run inside a longer-lived process (`pytest.main` from a notebook, an in-process pytester run)
hands it back as it found it:

- the collector's threshold, as it was;
- objects frozen by the run unfrozen, when none were frozen before it (Python cannot unfreeze
  some objects and not others: with the caller's own frozen, the run's stay frozen too);
- torch's thread count, as it was;
- glibc's malloc thresholds at its dynamic ceiling (32 MiB mmap, 64 MiB trim): glibc cannot be
  asked its settings, and once set they no longer move with the allocations, so this is the
  nearest to where the dynamic thresholds settle.

An xdist worker is not restored: its process ends with the session. The at-exit freeze
(`freeze_heap_at_exit`) stays: it acts only as the interpreter exits, and spares it the teardown's
full collections.
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import gc
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from types import ModuleType


@dataclass
class SavedState:
    """The settings before the run's first change of each; None (False) for one not changed."""

    gc_threshold: tuple[int, int, int] | None = None
    unfreeze: bool = False  # the run froze objects, and none were frozen before
    torch_threads: int | None = None
    torch: ModuleType | None = None
    malloc_undo: Callable[[], object] | None = None

    def before_gc_change(self) -> None:
        if self.gc_threshold is None:
            young, middle, old = gc.get_threshold()
            self.gc_threshold = (young, middle, old)
            self.unfreeze = gc.get_freeze_count() == 0

    def before_threads_change(self, torch: ModuleType) -> None:
        if self.torch is None:
            self.torch, self.torch_threads = torch, int(torch.get_num_threads())

    def before_malloc_change(self, undo: Callable[[], object]) -> None:
        """`undo` puts malloc back: glibc cannot be asked its settings, so the tuner says how."""
        if self.malloc_undo is None:
            self.malloc_undo = undo

    def restore(self) -> None:
        """Put back what was changed, and forget it: a later run saves afresh."""
        if self.gc_threshold is not None:
            gc.set_threshold(*self.gc_threshold)
            if self.unfreeze:
                gc.unfreeze()
        if self.torch is not None and self.torch_threads is not None:
            self.torch.set_num_threads(self.torch_threads)
        if self.malloc_undo is not None:
            self.malloc_undo()
        for each in fields(self):
            setattr(self, each.name, each.default)


SAVED = SavedState()
"""The process's record: one pytest run at a time owns it."""


M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 * 2**20  # above scoring.BATCH_PIXELS × NIQE's ~400 B per pixel
TRIM_THRESHOLD = 256 * 2**20
GLIBC_MMAP_CEILING = 32 * 2**20  # where glibc's own dynamic mmap threshold stops growing
PYTHON_YOUNG_COLLECTION = 700  # gc.get_threshold()[0] as Python starts
YOUNG_COLLECTION = 5_000
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


SCORE_THREADS = 1
"""torch's intra-op threads in a scoring process, serial or under xdist: parallelism comes from
workers, one image batch per thread. A reduction split over more threads sums in another order,
so scores would depend on the thread count, and threads beside other load spin and wait
(figures in docs/research/speed.md, "Why the scoring process is tuned")."""


def score_threads() -> int:
    """The intra-op threads of every scoring process: OMP_NUM_THREADS when the user set it
    (torch reads it too), else SCORE_THREADS."""
    given = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else SCORE_THREADS


def fix_threads() -> None:
    """Give torch `score_threads()` threads, so a Δ is the same whatever the worker count. An
    explicit OMP_NUM_THREADS is left to torch, which obeys it; without torch loaded there is
    nothing to do."""
    torch = sys.modules.get("torch")
    if torch is None or "OMP_NUM_THREADS" in os.environ:
        return
    SAVED.before_threads_change(torch)
    torch.set_num_threads(SCORE_THREADS)


@cache
def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def keep_freed_memory(keep: bool = True) -> bool:
    """Let freed tensor buffers up to 256 MiB go back to the heap instead of to the kernel.

    glibc hands every allocation above 32 MiB to mmap and returns it on free, so each batch
    would page-fault its buffers in afresh, mostly kernel time (docs/research/speed.md). `keep` False (a
    metric whose buffers fragment such a heap, see `reuses_freed_memory`) puts the thresholds
    back at glibc's 32 MiB ceiling, also after an earlier metric of the process raised them.
    Left alone when the user tunes glibc malloc through its environment variables, off glibc,
    and under an address-space limit (`ulimit -v`, `prlimit --as`): there the memory a heap
    keeps counts against the limit and cannot serve a library or arena mapped later, so a metric
    that ran out of memory would leave the next one none. Returns whether the setting was made."""
    libc = _glibc()
    if libc is None or any(name in os.environ for name in USER_SETTINGS) or address_space_limited():
        return False
    SAVED.before_malloc_change(lambda: keep_freed_memory(False))
    mmap, trim = (MMAP_THRESHOLD, TRIM_THRESHOLD) if keep else (GLIBC_MMAP_CEILING, 2 * GLIBC_MMAP_CEILING)
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap)) and bool(libc.mallopt(M_TRIM_THRESHOLD, trim))


def address_space_limited() -> bool:
    """Whether this process runs under an address-space limit (RLIMIT_AS)."""
    import resource

    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY


def reuses_freed_memory(metric: object) -> bool:
    """Whether keeping freed buffers pays for `metric`: yes unless it says otherwise. ILNIQE's
    buffers, in sizes that grow through each call, fragment a heap that keeps them: no freed
    buffer fits the next, larger one, so its peak memory multiplies (docs/research/speed.md;
    metrics_under_test.pyiqa_backend sets `reuses_freed_memory` False for it)."""
    return bool(getattr(metric, "reuses_freed_memory", True))


def release_freed_memory() -> None:
    """Give the heap's free memory back to the kernel, as when one metric's model is dropped
    for the next, so the memory kept for reuse is never more than one metric's."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@cache
def freeze_heap_at_exit() -> None:
    """At exit, move every live object out of the garbage collector's view. Interpreter teardown
    otherwise runs full collections over the millions of objects torch and pyiqa leave behind,
    seconds per process for nothing. Registered once, by the first metric a process loads."""
    atexit.register(gc.freeze)


def freeze_collected() -> None:
    """Move what collection left alive (the items, the case plans, the set's records) out of the
    garbage collector's view, and collect young objects every YOUNG_COLLECTION allocations, not
    700. Collection's objects live until the session ends, and the run's own (reports, JUnit
    elements, matrix cells) grow with it: each full collection would walk them all again. A threshold the user
    chose (any but Python's 700) and a disabled collector are left alone."""
    SAVED.before_gc_change()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    if gc.isenabled() and young == PYTHON_YOUNG_COLLECTION:
        gc.set_threshold(YOUNG_COLLECTION, middle, old)


def tune_for_scoring(metric: object) -> None:
    """All of the above that a process can keep, for the `metric` just built: torch's fixed
    thread count, freed buffers kept for reuse (when that pays for it), and the heap frozen at exit.
    Each is idempotent."""
    fix_threads()
    keep_freed_memory(reuses_freed_memory(metric))
    freeze_heap_at_exit()
