"""The gap engine: normalise raw scores, then Δi = norm(step i) − norm(reference step).

Normalisation and direction come from the metric's registry record and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from banana_tests.verdicts.uncertainty import RunSpread
from metrics_under_test.scale import Scale


@dataclass(frozen=True)
class Gap:
    """Δ for one case, with the numbers a failure message and the JUnit properties need."""

    score_reference: float
    score_step: float
    norm_reference: float
    norm_step: float
    runs: int
    # each run's normalised scores, in run order (the AUC pools them: reports.matrix_sections)
    run_norm_references: tuple[float, ...] = ()
    run_norm_steps: tuple[float, ...] = ()

    @property
    def run_deltas(self) -> tuple[float, ...]:
        """Each run's own Δ."""
        return tuple(s - r for r, s in zip(self.run_norm_references, self.run_norm_steps, strict=True))

    @property
    def spread(self) -> RunSpread:
        """What the runs say together (banana_tests.verdicts.uncertainty); one run when a gap
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
