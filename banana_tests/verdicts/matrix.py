"""The failure matrix: one model behind the terminal summary, `report` and baselines, with what
became of each case (`Outcome`).

Cells are built from case records (banana_tests.verdicts.record), whether they come from live
test reports (serial or xdist) or from JUnit XML files read back later. `Outcome` is a StrEnum:
each member is its own value (`Outcome.FAILED == "failed"`), so the CSV and JSON the reports
write read as they always did.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum

from banana_tests.cases import CaseKey
from banana_tests.verdicts.gaps import StrictOutcome


class Outcome(StrEnum):
    PASSED = "passed"  # Δ < 0: the metric detected the degradation
    FAILED = "failed"  # Δ ≥ 0: the metric missed it
    SKIPPED = "skipped"
    ERROR = "error"
    UNRESOLVED = "unresolved"  # --banana-strict-runs: the runs disagree in sign
    INVALID = "invalid"  # not a valid trial: the step did not change (scoring.oracle)


VERDICTS = frozenset({Outcome.PASSED, Outcome.FAILED})
"""The outcomes that judge the metric."""


STRICT_OUTCOMES = {
    StrictOutcome.DETECTED: Outcome.PASSED,
    StrictOutcome.MISSED: Outcome.FAILED,
    StrictOutcome.UNRESOLVED: Outcome.UNRESOLVED,
}
"""A cell's outcome from its strict verdict (--banana-strict-runs, verdicts.gaps)."""


@dataclass(frozen=True)
class Cell:
    """One case's verdict. `failed` means Δ ≥ 0: the metric missed the degradation."""

    key: CaseKey
    outcome: Outcome
    delta: float | None = None
    score_reference: float | None = None
    score_step: float | None = None
    reference_step: int | None = None
    runs: int | None = None
    message: str = ""
    strict: StrictOutcome | None = None  # when the run judged by run range (--banana-strict-runs)
    valid_trial: bool = True  # False: no run's step measurably changed (scoring.oracle)
    # each run's normalised scores (families.degradation.matrix_sections)
    run_norm_references: tuple[float, ...] = ()
    run_norm_steps: tuple[float, ...] = ()
    psnr: tuple[float, ...] = ()  # each run's step against its reference step, dB (scoring.oracle)
    ssim: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.outcome, Outcome):
            raise TypeError(f"a cell's outcome is an Outcome, not {self.outcome!r}")
        if self.strict is not None and not isinstance(self.strict, StrictOutcome):
            raise TypeError(f"a cell's strict verdict is a StrictOutcome, not {self.strict!r}")

    def as_verdict(self) -> Cell:
        """The cell as its Δ decides it. Under --baseline a report says xfail or XPASS; the
        matrix (terminal and `report` alike) keeps the verdict: passed only when Δ < 0, as the
        suite asserts, so a nan Δ (a metric that returned nan) stays a failure. Under
        --banana-strict-runs the recorded strict verdict decides, `unresolved` included. A step
        that did not change is `invalid`, whatever its Δ: no trial of the metric."""
        if not self.valid_trial:
            outcome = Outcome.INVALID
        elif self.strict is not None:
            outcome = STRICT_OUTCOMES[self.strict]
        elif self.delta is None:
            outcome = self.outcome
        else:
            outcome = Outcome.PASSED if self.delta < 0 else Outcome.FAILED
        return self if outcome == self.outcome else replace(self, outcome=outcome)


@dataclass
class OutcomeCounts:
    """Outcome counts of a group of cells, and their short label for the terminal."""

    counts: Counter[Outcome] = field(default_factory=Counter)

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> OutcomeCounts:
        return cls(Counter(outcomes))

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome] += 1

    @property
    def passed(self) -> int:
        return self.counts[Outcome.PASSED]

    @property
    def failed(self) -> int:
        return self.counts[Outcome.FAILED]

    @property
    def skipped(self) -> int:
        return self.counts[Outcome.SKIPPED]

    @property
    def error(self) -> int:
        return self.counts[Outcome.ERROR]

    @property
    def unresolved(self) -> int:
        return self.counts[Outcome.UNRESOLVED]

    @property
    def invalid(self) -> int:
        return self.counts[Outcome.INVALID]

    def label(self) -> str:
        """`failed/verdicts`, then `U<n>` for unresolved cells (--banana-strict-runs) and `E<n>` when
        some cases errored: neither hides failures."""
        verdicts = self.passed + self.failed
        parts = [f"{self.failed}/{verdicts}" if verdicts else "s" if self.skipped else ""]
        if self.unresolved:
            parts.append(f"U{self.unresolved}")
        if self.invalid:
            parts.append(f"I{self.invalid}")
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

    def legend(self) -> list[str]:
        """What a cell counts (steps, and runs when each run is its own case) and its marks."""
        steps = len({k.step for k in self.cells})
        runs = {k.run for k in self.cells}
        over = f"{steps} step(s)" if runs == {None} else f"{len(runs - {None})} run(s) × {steps} step(s)"
        lines = [
            f"cell: failing cases (Δ ≥ 0, missed) / cases with a verdict, over {over} of one seed image",
            "normalised scores are higher-is-better, so Δ < 0 is detected; s = all skipped;",
            "E<n> = cases with errors, shown beside the failures",
        ]
        if any(c.outcome is Outcome.UNRESOLVED for c in self.cells.values()):
            lines.append("U<n> = unresolved cases: their runs' Δs disagree in sign (--banana-strict-runs)")
        if any(c.outcome is Outcome.INVALID for c in self.cells.values()):
            lines.append("I<n> = not valid trials: the step did not measurably change from the reference")
        return lines

    def render(self, width: int = 100, max_rows: int = 40) -> list[str]:
        """Rows are seed images, columns metrics; a cell counts failing cases out of those with a
        verdict. Columns that do not fit in `width` fold into further blocks; over `max_rows` seed
        images, the rows with the most failures are shown and the rest counted in one line."""
        metrics, seeds = self.metrics, self.seed_images
        if not metrics:
            return []
        tally = self.tally()
        labels = {(m, s): tally[(m, s)].label() for m in metrics for s in [*seeds, None]}
        shown = seeds
        if len(seeds) > max_rows:
            worst = sorted(seeds, key=lambda s: (-sum(tally[(m, s)].failed for m in metrics), s))
            shown = sorted(worst[: max_rows - 1])
        col = max(7, *(len(m) for m in metrics), *(len(x) for x in labels.values()))
        first = max(10, *(len(s) for s in shown))
        per_block = max(1, (width - first) // (col + 1))
        lines: list[str] = []
        for start in range(0, len(metrics), per_block):
            block = metrics[start : start + per_block]
            if start:
                lines.append("")
            lines.append(" " * first + " " + " ".join(m.rjust(col) for m in block))
            for seed in [*shown, None]:
                row = [labels[(m, seed)].rjust(col) for m in block]
                lines.append(("total" if seed is None else seed).ljust(first) + " " + " ".join(row))
        if len(shown) < len(seeds):
            hidden = [s for s in seeds if s not in set(shown)]
            failing = sum(any(tally[(m, s)].failed for m in metrics) for s in hidden)
            note = f"… {len(hidden)} more seed images ({failing} with failures): in the totals and the report"
            lines.append(note)
        return lines
