"""Which exceptions say that a metric's environment is broken, not that it rejects its input.

A file that is missing or unreadable (OSError, FileNotFoundError; huggingface_hub's
LocalEntryNotFoundError and OfflineModeIsEnabled are both), no network (ConnectionError, urllib's
URLError), a library that does not import (ImportError, ModuleNotFoundError), no memory
(MemoryError, torch's OutOfMemoryError), a batch past the run's --batch-timeout (BatchTimeout): the
case that meets one is an error in every family (as the Δ cases' images are), never
a failing verdict that a baseline could list. Anything else a metric raises (ValueError,
RuntimeError, ...) is its answer to that input, and a verdict where the family judges one.
"""

from __future__ import annotations

from typing import Final

from banana_tests.scoring.batch_watch import BatchTimeout
from banana_tests.scoring.batching import out_of_memory

ENVIRONMENT: Final = (OSError, ImportError, MemoryError, BatchTimeout)
"""The families of an environment's fault; urllib's, requests' and the hub's errors are OSErrors."""


class EnvironmentFault(Exception):
    """Raised by the suite for an environment fault it met earlier and kept as a message: a record
    left unscored by one (banana_tests.scoring.returned_scores). Kept as text, not the metric's
    exception, whose traceback holds the batch's frames."""


def environment_fault(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from (`raise ... from`), is an environment's fault."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, (*ENVIRONMENT, EnvironmentFault)) or out_of_memory(found):
            return True
        seen.add(id(found))
        found = found.__cause__
    return False
