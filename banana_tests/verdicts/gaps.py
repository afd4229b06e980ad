"""The gap engine: normalise raw scores, then Δi = norm(step i) − norm(reference step), and how
sure a cell's verdict is from its runs alone.

Normalisation and direction come from the metric's registry record and nowhere else.

With 3-5 runs a bootstrap has 10-126 distinct resamples and a t interval leans on normality that
nothing here supports. The run range [min Δ, max Δ] is exact instead: for n independent runs
from any continuous distribution it covers the median Δ with probability 1 − 2·2⁻ⁿ (75 % at 3
runs, 87.5 % at 4, 93.75 % at 5), because the median lies outside it only when every run falls
on one side of it. Strict mode reads the sign of that interval.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from metrics_under_test.spec import Scale


class StrictOutcome(Enum):
    """A cell's verdict when only the whole run range may decide it."""

    DETECTED = "detected"  # every run has Δ < 0
    MISSED = "missed"  # every run has Δ ≥ 0
    UNRESOLVED = "unresolved"  # the runs disagree in sign: the interval straddles 0


@dataclass(frozen=True)
class RunSpread:
    """The per-run Δ values of one cell and what they say together."""

    deltas: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.deltas:
            raise ValueError("a cell needs at least one run")
        if not all(math.isfinite(d) for d in self.deltas):
            raise ValueError(f"non-finite Δ among the runs: {self.deltas}")

    @property
    def mean(self) -> float:
        return math.fsum(self.deltas) / len(self.deltas)

    @property
    def stdev(self) -> float:
        """Sample standard deviation across runs; 0 for a single run."""
        return statistics.stdev(self.deltas) if len(self.deltas) > 1 else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return min(self.deltas), max(self.deltas)

    @property
    def confidence(self) -> float:
        """Coverage of `interval` for the median Δ; 0 for a single run, which bounds nothing."""
        return 1.0 - 2.0 ** (1 - len(self.deltas))

    @property
    def strict(self) -> StrictOutcome:
        low, high = self.interval
        if high < 0:
            return StrictOutcome.DETECTED
        if low >= 0:
            return StrictOutcome.MISSED
        return StrictOutcome.UNRESOLVED


def spread(deltas: Sequence[float]) -> RunSpread:
    return RunSpread(tuple(float(d) for d in deltas))


@dataclass(frozen=True)
class Gap:
    """Δ for one case, with the numbers a failure message and the JUnit properties need."""

    score_reference: float
    score_step: float
    norm_reference: float
    norm_step: float
    runs: int
    # each run's normalised scores, in run order (the AUC pools them: families.degradation.matrix_sections)
    run_norm_references: tuple[float, ...] = ()
    run_norm_steps: tuple[float, ...] = ()

    @property
    def run_deltas(self) -> tuple[float, ...]:
        """Each run's own Δ."""
        return tuple(s - r for r, s in zip(self.run_norm_references, self.run_norm_steps, strict=True))

    @property
    def spread(self) -> RunSpread:
        """What the runs say together (banana_tests.verdicts.gaps); one run when a gap
        was built without its runs' Δs."""
        return RunSpread(self.run_deltas or (self.delta,))

    @property
    def delta(self) -> float:
        return self.norm_step - self.norm_reference

    @property
    def detected(self) -> bool:
        """The paper's verdict: the metric saw the degradation when Δ < 0."""
        return self.delta < 0


def run_mean(scores: Sequence[float]) -> float:
    """The run mean of raw scores; the default aggregate, taken before normalising."""
    if not scores:
        raise ValueError("no scores to average")
    return math.fsum(scores) / len(scores)


def gap(scale: Scale, reference: Sequence[float], step: Sequence[float]) -> Gap:
    """Δ from the raw scores of the runs at the reference step and at step i.

    The runs are averaged first, then normalised. Since normalisation is affine the order
    does not change Δ, but averaging raw scores matches how the paper reports scores.
    """
    if len(reference) != len(step):
        raise ValueError(f"reference has {len(reference)} runs but step has {len(step)}")
    ref, cur = run_mean(reference), run_mean(step)
    references = tuple(scale.normalise(r) for r in reference)
    steps = tuple(scale.normalise(s) for s in step)
    return Gap(ref, cur, scale.normalise(ref), scale.normalise(cur), len(step), references, steps)
