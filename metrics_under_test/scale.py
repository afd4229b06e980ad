"""A metric's typical range and direction: the Table 2 rule that maps raw scores to [0, 100]."""

from __future__ import annotations

import math
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
