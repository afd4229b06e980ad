"""The failure matrix: one model behind the terminal summary, `report` and baselines.

Cells are built from a case's JUnit properties, whether they come from live test reports
(serial or xdist) or from JUnit XML files read back later.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from banana_tests.cases import CaseKey

OUTCOMES = ("passed", "failed", "skipped", "error")


def _float(props: Mapping[str, str], name: str) -> float | None:
    value = props.get(name)
    return None if value in (None, "") else float(value)


@dataclass(frozen=True)
class Cell:
    """One case's verdict. `failed` means Δ ≥ 0: the metric missed the degradation."""

    key: CaseKey
    outcome: str
    delta: float | None = None
    score_reference: float | None = None
    score_step: float | None = None
    reference_step: int | None = None
    runs: int | None = None
    message: str = ""

    @classmethod
    def from_properties(cls, outcome: str, props: Mapping[str, str], message: str = "") -> Cell:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}")
        ref = props.get("reference_step")
        runs = props.get("runs")
        return cls(
            CaseKey.from_properties(props),
            outcome,
            _float(props, "delta"),
            _float(props, "score_reference"),
            _float(props, "score_step"),
            None if ref in (None, "") else int(ref),
            None if runs in (None, "") else int(runs),
            message,
        )

    def as_verdict(self) -> Cell:
        """The cell as its Δ decides it. Under --baseline a report says xfail or XPASS; the
        matrix (terminal and `report` alike) keeps the verdict: passed only when Δ < 0, as the
        suite asserts, so a nan Δ (a metric that returned nan) stays a failure."""
        if self.delta is None:
            return self
        return replace(self, outcome="passed" if self.delta < 0 else "failed")


@dataclass
class OutcomeCounts:
    """Outcome counts of a group of cells, and their short label for the terminal."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    error: int = 0

    def add(self, outcome: str) -> None:
        setattr(self, outcome, getattr(self, outcome) + 1)

    def label(self) -> str:
        """`failed/verdicts`, then `E<n>` when some cases errored: an error never hides failures."""
        verdicts = self.passed + self.failed
        parts = [f"{self.failed}/{verdicts}" if verdicts else "s" if self.skipped else ""]
        if self.error:
            parts.append(f"E{self.error}")
        return " ".join(p for p in parts if p)


@dataclass
class Matrix:
    """Cells by case key; a later cell for the same key replaces the earlier one."""

    cells: dict[CaseKey, Cell] = field(default_factory=dict)

    def add(self, cell: Cell) -> Cell | None:
        """Add `cell`; return the cell it replaced, if any."""
        old = self.cells.get(cell.key)
        self.cells[cell.key] = cell
        return old

    @classmethod
    def of(cls, cells: Iterable[Cell]) -> Matrix:
        m = cls()
        for c in cells:
            m.add(c)
        return m

    @property
    def metrics(self) -> list[str]:
        return sorted({k.metric for k in self.cells})

    @property
    def seed_images(self) -> list[str]:
        return sorted({k.seed_image for k in self.cells})

    @property
    def steps(self) -> list[int]:
        return sorted({k.step for k in self.cells})

    def counts(self, metric: str, seed_image: str | None = None) -> OutcomeCounts:
        """Outcomes of one metric's cells: on one seed image, or on all of them."""
        return self.tally()[(metric, seed_image)]

    def tally(self) -> defaultdict[tuple[str, str | None], OutcomeCounts]:
        """Outcome counts by (metric, seed image) and by (metric, None) for all its images, in one
        pass over the cells; an absent group counts nothing."""
        groups: defaultdict[tuple[str, str | None], OutcomeCounts] = defaultdict(OutcomeCounts)
        for k, cell in self.cells.items():
            groups[(k.metric, k.seed_image)].add(cell.outcome)
            groups[(k.metric, None)].add(cell.outcome)
        return groups

    def render(self) -> list[str]:
        """Rows are seed images, columns metrics; a cell counts failing steps out of those run.
        `s` marks an all-skipped cell, `E<n>` the cases with errors beside the failures."""
        metrics, seeds = self.metrics, self.seed_images
        if not metrics:
            return []
        tally = self.tally()
        labels = {(m, s): tally[(m, s)].label() for m in metrics for s in [*seeds, None]}
        width = max(7, *(len(m) for m in metrics), *(len(x) for x in labels.values()))
        first = max(10, *(len(s) for s in seeds))
        lines = [" " * first + " " + " ".join(m.rjust(width) for m in metrics)]
        for seed in [*seeds, None]:
            row = [labels[(m, seed)].rjust(width) for m in metrics]
            lines.append(("total" if seed is None else seed).ljust(first) + " " + " ".join(row))
        return lines
