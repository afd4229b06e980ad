"""The run's warning when a metric's scores cannot tell images apart, from the Δ cells.

A heuristic clipped to its range (100 on every clean crop, 0 on every noisy one) gives Δ = 0
exactly, or the same Δ for every step: a miss, or a detection, that says nothing about the
metric. The verdict rule stays the paper's (Δ < 0); the run warns instead (`saturations`), once
per metric, from the Δ cases' per-run normalised scores (the matrix the run prints), each (seed
image, run, step) image counted once. docs/metrics.md, "Choosing score_range", says how to pick a
range that fits.
"""

from __future__ import annotations

import contextlib
import warnings
from collections import Counter
from dataclasses import dataclass

from banana_tests.verdicts.matrix import VERDICTS, Matrix
from banana_tests.verdicts.verdict import at_an_end

SHARE = 0.5
"""More than this share of a metric's scored images with one identical score, or at an end of
its score_range (normalised exactly 0 or 100: clipped by the metric), saturates it; so does any
Δ of exactly 0. Scores beyond the range are not at an end: they still tell images apart."""


class BananaSaturationWarning(UserWarning):
    """A metric's scores saturate: its Δ cases cannot tell images apart (see `Saturation`)."""


@dataclass(frozen=True)
class Saturation:
    """One metric's scored images in a run: how many tie on one score or sit at an end of its
    range, and how many of its Δ are exactly 0."""

    metric: str
    images: int
    tied: int  # images that share the most common normalised score
    tied_score: float
    at_ends: int  # images normalised to exactly 0 or 100
    zero_deltas: int
    deltas: int

    @property
    def saturated(self) -> bool:
        return self.tied > SHARE * self.images or self.at_ends > SHARE * self.images or self.zero_deltas > 0

    def message(self) -> str:
        found = []
        if self.tied > SHARE * self.images:
            found.append(
                f"{self.tied / self.images:.0%} of its {self.images} scored images share one score "
                f"({self.tied_score:g} normalised)"
            )
        if self.at_ends > SHARE * self.images:
            found.append(
                f"{self.at_ends / self.images:.0%} sit at an end of its score_range "
                "(normalised exactly 0 or 100)"
            )
        if self.zero_deltas:
            found.append(f"{self.zero_deltas} of its {self.deltas} Δ are exactly 0")
        return (
            f"{self.metric}'s scores saturate: {'; '.join(found)}. Its Δ cases cannot tell those images "
            "apart; see docs/metrics.md, 'Choosing score_range'"
        )


def saturations(matrix: Matrix) -> list[Saturation]:
    """The metrics of `matrix` whose scores saturate, by name; cases without a verdict (skipped,
    errored, not a valid trial) and cells without per-run scores are left out."""
    images: dict[str, dict[tuple[str, int, int], float]] = {}
    deltas: Counter[str] = Counter()
    zeros: Counter[str] = Counter()
    for key, cell in sorted(matrix.cells.items()):
        if cell.outcome not in VERDICTS or not cell.valid_trial or cell.delta is None:
            continue
        deltas[key.metric] += 1
        zeros[key.metric] += cell.delta == 0
        runs = [key.run] if key.run is not None else list(range(len(cell.run_norm_references)))
        seen = images.setdefault(key.metric, {})
        for run, reference, step in zip(runs, cell.run_norm_references, cell.run_norm_steps, strict=False):
            seen[(key.seed_image, run, cell.reference_step or 0)] = reference
            seen[(key.seed_image, run, key.step)] = step
    out = []
    for metric in sorted(deltas):
        scores = list(images.get(metric, {}).values())
        score, tied = Counter(scores).most_common(1)[0] if scores else (0.0, 0)
        ends = sum(map(at_an_end, scores))
        found = Saturation(metric, len(scores), tied, score, ends, zeros[metric], deltas[metric])
        if found.saturated:
            out.append(found)
    return out


def warn(found: Saturation) -> None:
    """`found` as a BananaSaturationWarning, in pytest's warnings summary. Under `-W error` (or a
    project's `filterwarnings = error`) it stays a warning: raised from the terminal summary it
    would end the run with an INTERNALERROR, and the summary line says it anyway."""
    with contextlib.suppress(BananaSaturationWarning):
        warnings.warn(found.message(), BananaSaturationWarning, stacklevel=1)
