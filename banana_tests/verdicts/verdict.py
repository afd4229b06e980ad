"""A case's verdict: its gap, the failure message people read and the JUnit properties CI reads;
and the run's warning when a metric's scores cannot tell images apart.

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
from typing import NoReturn

import pytest

from banana_tests.cases import CaseKey, Field
from banana_tests.verdicts.gaps import Gap, StrictOutcome
from banana_tests.verdicts.matrix import VERDICTS, Matrix, Outcome

VERDICT_LINE = "banana_verdict"
"""The attribute that carries a failing verdict's one-line message, on its exception and then on
its test report (where it travels under xdist) for the suite's summary section."""


def keeps_traceback(config: pytest.Config) -> bool:
    """`--tb=long` or `--full-trace`: a failing verdict keeps its traceback (see fail_verdict)."""
    return bool(config.option.tbstyle == "long" or config.option.fulltrace)


def fail_verdict(message: str, summary: str, config: pytest.Config) -> NoReturn:
    """Fail the running case with `summary`, its figure (e.g. Δ), and the one-line `message`
    (the suite's summary lists it) as pytest's failure text. Raised through `pytest.fail`
    without a traceback (one through the fixture says nothing, and costs time: docs/research/speed.md) unless
    `--tb=long` or `--full-trace` asks for one. JUnit's failure text holds both lines: pytest
    shortens the failure's message attribute past 500 characters (an escape's line, with its
    drawn degradation and PNG pair, is longer) to its first line. The line rides on the exception
    under every `--tb`: the terminal counts the case as missed by it (session.reporter.MISSED)."""
    traceback = keeps_traceback(config)
    failure = pytest.fail.Exception(message if traceback else f"{summary}\n{message}", pytrace=traceback)
    setattr(failure, VERDICT_LINE, message)
    raise failure


UNRESOLVED = "unresolved"
"""How an unresolved cell's skip reason starts, for people reading it."""

CASE_OUTCOME = "banana_outcome"
"""The attribute that carries one of the suite's own outcomes (unresolved, not a valid trial) on a
case's skip exception and then on its test report, where it travels under xdist: the terminal
counts the case by it, never by the reason's words."""


def skip_as(outcome: Outcome, reason: str) -> NoReturn:
    """Skip the running case as `outcome` (Outcome.UNRESOLVED or Outcome.INVALID), with `reason`."""
    skip = pytest.skip.Exception(reason)
    setattr(skip, CASE_OUTCOME, outcome.value)
    raise skip


@dataclass(frozen=True)
class Verdict:
    """`strict` (--banana-strict-runs): the sign of the whole run range decides, not the mean's."""

    key: CaseKey
    reference_step: int
    gap: Gap
    strict: bool = False

    @property
    def outcome(self) -> StrictOutcome:
        if self.strict:
            return self.gap.spread.strict
        return StrictOutcome.DETECTED if self.gap.detected else StrictOutcome.MISSED

    @property
    def detected(self) -> bool:
        """False only for a miss: an unresolved cell is skipped before a test sees it."""
        return self.outcome is not StrictOutcome.MISSED

    @property
    def unresolved(self) -> bool:
        return self.outcome is StrictOutcome.UNRESOLVED

    def runs_text(self) -> str:
        """The runs' Δs and their range, e.g. `runs Δ -1.20, +0.40, -0.30 in [-1.20, +0.40]`."""
        s = self.gap.spread
        values = ", ".join(f"{d:+.2f}" for d in s.deltas)
        low, high = s.interval
        return f"runs Δ {values} in [{low:+.2f}, {high:+.2f}]"

    def unresolved_reason(self) -> str:
        k = self.key
        return (
            f"{UNRESOLVED}: {k.metric} on {k.seed_image} at step {k.step}: the runs disagree in sign "
            f"({self.runs_text()}), so the run range straddles 0"
        )

    def message(self) -> str:
        """One line: metric, seed image, step, Δ, both raw and both normalised scores."""
        k, g = self.key, self.gap
        run = f"run {k.run}" if k.run is not None else f"the mean of {g.runs} run(s)"
        if self.strict:
            run += f"; {self.runs_text()}"
        return (
            f"{k.metric} did not detect the degradation of {k.seed_image} at step {k.step}: "
            f"Δ{k.step} = {g.delta:+.3f} ≥ 0 ({run}); "
            f"step {self.reference_step:>3}: raw {g.score_reference:.4f}"
            f" → normalised {g.norm_reference:.2f}, "
            f"step {k.step:>3}: raw {g.score_step:.4f} → normalised {g.norm_step:.2f}"
        )

    def summary(self) -> str:
        if self.strict:
            return f"Δ{self.key.step} ≥ 0 in every run ({self.runs_text()})"
        return f"Δ{self.key.step} = {self.gap.delta:+.3f} ≥ 0"

    def properties(self) -> dict[Field, str]:
        """The gap as record figures; `repr` keeps every digit so the XML rebuilds the matrix."""
        g = self.gap
        return {
            Field.DELTA: repr(g.delta),
            Field.SCORE_REFERENCE: repr(g.score_reference),
            Field.SCORE_STEP: repr(g.score_step),
            Field.NORM_REFERENCE: repr(g.norm_reference),
            Field.NORM_STEP: repr(g.norm_step),
            Field.RUNS: str(g.runs),
            **self.spread_properties(),
        }

    def spread_properties(self) -> dict[Field, str]:
        """Each run's normalised scores, from which its Δ, their spread and range follow (7
        significant digits: the JUnit file stays small; Δ itself keeps every digit)."""
        g = self.gap
        if not g.run_norm_references:
            return {}
        out = {
            Field.RUN_NORM_REFERENCES: " ".join(f"{n:.7g}" for n in g.run_norm_references),
            Field.RUN_NORM_STEPS: " ".join(f"{n:.7g}" for n in g.run_norm_steps),
        }
        if self.strict:
            out[Field.STRICT] = g.spread.strict.value
        return out


SHARE = 0.5
"""More than this share of a metric's scored images with one identical score, or at an end of
its score_range (normalised exactly 0 or 100: clipped by the metric), saturates it; so does any
Δ of exactly 0. Scores beyond the range are not at an end: they still tell images apart."""


def at_an_end(normalised: float) -> bool:
    """Normalised exactly 0 or 100: clipped to an end of the metric's score_range."""
    return normalised in (0.0, 100.0)


def clipped_tie(first: float, second: float) -> bool:
    """Two normalised scores that tie at an end of the range: the metric cannot tell the images
    apart, whatever they are. Still not a detection (the rule is strict), but saturation, not
    blindness: the Δ cases warn of it, and the control family says so in its line."""
    return first == second and at_an_end(first)


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
