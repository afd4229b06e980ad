"""Could one global threshold on a metric filter degraded images out?

A data team picks one cut-off for all content. That works only if reference-step images score
above step-k images across seed images and runs, pooled: the AUC of the normalised score as a
classifier (Mann-Whitney: the chance that a random clean image outscores a random degraded one,
ties counting half). 0.5 is chance; below 0.5 the metric prefers the degraded images. The
clean images' own spread sits beside it, because content moves scores more than degradation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Separability:
    """One metric at one step, pooled over seed images and runs; scores are normalised (higher = better)."""

    step: int
    auc: float
    clean: int  # reference-step images
    degraded: int  # step-k images
    clean_low: float  # the clean images' lowest and highest normalised score: the content confound
    clean_high: float

    @property
    def clean_spread(self) -> float:
        return self.clean_high - self.clean_low


def auc(clean: Sequence[float], degraded: Sequence[float]) -> float:
    """P(clean > degraded) + ½·P(tie), from mid-ranks in O(n log n)."""
    if not clean or not degraded:
        raise ValueError("AUC needs at least one clean and one degraded score")
    pooled = sorted([(s, True) for s in clean] + [(s, False) for s in degraded])
    rank_sum = 0.0  # of the clean scores, 1-based mid-ranks
    i = 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j][0] == pooled[i][0]:
            j += 1
        mid_rank = (i + 1 + j) / 2
        rank_sum += mid_rank * sum(1 for _, is_clean in pooled[i:j] if is_clean)
        i = j
    n_clean = len(clean)
    return (rank_sum - n_clean * (n_clean + 1) / 2) / (n_clean * len(degraded))


def separability(step: int, clean: Sequence[float], degraded: Sequence[float]) -> Separability:
    return Separability(step, auc(clean, degraded), len(clean), len(degraded), min(clean), max(clean))
