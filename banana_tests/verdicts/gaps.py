"""The gap engine: normalise raw scores, then Δi = norm(step i) − norm(reference step).

Normalisation and direction come from the metric's registry record and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """A metric's typical range and direction; maps raw scores to [0, 100], higher = better."""

    low: float
    high: float
    lower_better: bool

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.high > self.low):
            raise ValueError(f"typical range must be finite with high > low, got [{self.low}, {self.high}]")

    def normalise(self, score: float) -> float:
        """`100·(s−lo)/(hi−lo)`, or `100·(hi−s)/(hi−lo)` for lower-is-better. Not clipped:
        a score outside the typical range keeps its distance, so Δ keeps its sign."""
        span = self.high - self.low
        if self.lower_better:
            return 100.0 * (self.high - score) / span
        return 100.0 * (score - self.low) / span

    def flipped(self) -> Scale:
        return Scale(self.low, self.high, not self.lower_better)


@dataclass(frozen=True)
class Gap:
    """Δ for one case, with the numbers a failure message and the JUnit properties need."""

    score_reference: float
    score_step: float
    norm_reference: float
    norm_step: float
    runs: int

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
    return Gap(ref, cur, scale.normalise(ref), scale.normalise(cur), len(step))
