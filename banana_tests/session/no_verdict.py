"""A case that cannot be judged: an error in one line, never a verdict that a baseline could list.

A metric that cannot load, whose environment is broken (banana_tests.scoring.faults), or an image
that cannot be read leaves its case without a verdict, in every family. The case says so in one
line naming the metric, the input and the exception: a traceback through the suite's frames
shows their locals (the run's state, the batch's records) and, for a truncated image, the
decoder's chained one. The reporter files such a case as an error
(banana_tests.session.reporter), also when a baseline expects it to fail.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from _pytest.outcomes import Failed  # `pytest.fail.Exception`: pytest shows it without a traceback

from banana_tests.trajectories.records import DataError


class NoVerdict(Failed):
    """The case errors with this one line; raised from `pytest.fail`'s type, so pytest prints the
    line alone, and within hypothesis it ends the case like a stop (the control family's test)."""

    __module__ = "builtins"  # shown as `NoVerdict: ...`, as pytest shows its own `Failed: ...`

    def __init__(self, line: str) -> None:
        super().__init__(" ".join(line.split()), pytrace=False)


def raised(exc: BaseException) -> str:
    """`Type: message` of an exception, on one line; any DataError is a `DataError` (its kinds
    are the suite's own, its message says what happened)."""
    kind = "DataError" if isinstance(exc, DataError) else type(exc).__name__
    return " ".join(f"{kind}: {exc}".split())


@contextmanager
def data_errors_in_one_line() -> Iterator[None]:
    """A DataError in the block (a bad record or image, a metric that could not score one) is the
    case's NoVerdict: its message alone, without the traceback or the exception it was raised from."""
    try:
        yield
    except DataError as exc:
        raise NoVerdict(str(exc)) from None
