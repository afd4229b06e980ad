"""What a suite run changed in its process, as it was before: put back when the pytest run ends.

banana_tests.scoring.process_tuning tunes a suite run's process (docs/research/speed.md "What a suite run
changes in its process"); each change is recorded here first, by `SAVED`, and the plugin's
pytest_unconfigure calls `restore`, so a run inside a longer-lived process (`pytest.main` from a
notebook, an in-process pytester run) hands it back as it found it:

- the collector's threshold, as it was;
- objects frozen by the run unfrozen, when none were frozen before it (Python cannot unfreeze
  some objects and not others: with the caller's own frozen, the run's stay frozen too);
- torch's thread count, as it was;
- glibc's malloc thresholds at its dynamic ceiling (32 MiB mmap, 64 MiB trim): glibc cannot be
  asked its settings, and once set they no longer move with the allocations, so this is the
  nearest to where the dynamic thresholds settle.

An xdist worker is not restored: its process ends with the session. The at-exit freeze
(process_tuning.freeze_heap_at_exit) stays: it acts only as the interpreter exits, and spares it
the teardown's full collections.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass, fields
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
