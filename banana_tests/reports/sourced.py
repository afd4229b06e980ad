"""A case as read from a JUnit file, with where it came from and when: the newest of a case read
twice wins (the testsuite timestamp, then the file order), and each replacement says what it
replaced."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from banana_tests.families.family import Case
from banana_tests.verdicts.baseline import Other
from banana_tests.verdicts.matrix import Cell
from banana_tests.verdicts.outcome import Outcome

OLDEST = datetime.min.replace(tzinfo=UTC)
"""The time of a testsuite without a timestamp: older than any."""


@dataclass(frozen=True)
class Sourced:
    """A cell with where it came from: the file, its suite's timestamp and its place in the input."""

    cell: Cell
    path: Path
    timestamp: datetime
    order: tuple[int, int]

    @property
    def label(self) -> str:
        stamp = "no timestamp" if self.timestamp == OLDEST else self.timestamp.isoformat()
        return f"{self.path} ({stamp})"


@dataclass(frozen=True)
class Replacement:
    """A case read twice: `kept` is the newer result, `dropped` the one it replaced."""

    kept: Sourced
    dropped: Sourced

    @property
    def same_result(self) -> bool:
        """The same cell from a run with the same start: one run read twice, nothing replaced."""
        return self.kept.cell == self.dropped.cell and self.kept.timestamp == self.dropped.timestamp

    def describe(self) -> str:
        k, d = self.kept, self.dropped
        return (
            f"{k.cell.key.test_id}: kept {k.cell.outcome} from {k.label}, "
            f"replaced {d.cell.outcome} from {d.label}"
        )


@dataclass(frozen=True)
class SourcedOther:
    """The outcome of a case outside the matrix (a trend, control or invariance case), ordered
    like `Sourced`."""

    key: Other
    outcome: Outcome
    timestamp: datetime
    order: tuple[int, int]
    message: str = ""


@dataclass(frozen=True)
class SourcedCase:
    """A registered family's case with its record, for its section, ordered like `Sourced`."""

    case: Case
    timestamp: datetime
    order: tuple[int, int]


Item = Sourced | SourcedOther | SourcedCase


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


def when(item: Item) -> tuple[datetime, tuple[int, int]]:
    return item.timestamp, item.order
