"""A case as read from a JUnit file, with where it came from and when: the newest of a case read
twice wins (the testsuite timestamp, then the file order), and each replacement says what it
replaced."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Generic, TypeVar, cast

from banana_tests.families.family import Case
from banana_tests.verdicts.baseline import Other
from banana_tests.verdicts.matrix import Cell, Outcome

T = TypeVar("T", covariant=True)
U = TypeVar("U")

OLDEST = datetime.min.replace(tzinfo=UTC)
"""The time of a testsuite without a timestamp: older than any."""


@dataclass(frozen=True)
class OtherOutcome:
    """The outcome of a case outside the matrix (a trend, control or invariance case), for baselines."""

    key: Other
    outcome: Outcome
    message: str = ""


Read = Cell | OtherOutcome | Case
"""What one testcase gives: a matrix cell, an outcome outside the matrix, or a registered family's
case."""


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A case read from a file, with the file, its suite's timestamp and its place in the input:
    one ordering for every kind of case (newest timestamp, then the later place)."""

    value: T
    path: Path
    timestamp: datetime
    order: tuple[int, int]

    @property
    def label(self) -> str:
        stamp = "no timestamp" if self.timestamp == OLDEST else self.timestamp.isoformat()
        return f"{self.path} ({stamp})"

    @property
    def when(self) -> tuple[datetime, tuple[int, int]]:
        """The sort key: older first, ties in the order read."""
        return self.timestamp, self.order

    def of(self, kind: type[U]) -> Sourced[U] | None:
        """This, typed as holding a `kind`, or None when it holds another kind of case."""
        return cast("Sourced[U]", self) if isinstance(self.value, kind) else None


@dataclass(frozen=True)
class Replacement:
    """A case read twice: `kept` is the newer result, `dropped` the one it replaced."""

    kept: Sourced[Cell]
    dropped: Sourced[Cell]

    @property
    def same_result(self) -> bool:
        """The same cell from a run with the same start: one run read twice, nothing replaced."""
        return self.kept.value == self.dropped.value and self.kept.timestamp == self.dropped.timestamp

    def describe(self) -> str:
        k, d = self.kept, self.dropped
        return (
            f"{k.value.key.test_id}: kept {k.value.outcome} from {k.label}, "
            f"replaced {d.value.outcome} from {d.label}"
        )


def describe_replacements(replaced: Sequence[Replacement]) -> list[str]:
    """One line per case whose result changed, and one per pair of files for the cases a file
    repeats with the same result from the same run (a copy of a file given beside it)."""
    same: dict[tuple[Path, Path], int] = {}
    lines = []
    for r in replaced:
        if r.same_result:
            pair = (r.kept.path, r.dropped.path)
            same[pair] = same.get(pair, 0) + 1
        else:
            lines.append(r.describe())
    for (kept, dropped), count in same.items():
        lines.append(f"{count} case(s) of {dropped} are repeated in {kept} with the same results")
    return lines
