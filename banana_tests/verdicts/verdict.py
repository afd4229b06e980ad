"""A case's verdict: its gap, the failure message people read and the JUnit properties CI reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import pytest

from banana_tests.cases import CaseKey, Field
from banana_tests.verdicts.gaps import Gap
from banana_tests.verdicts.outcome import Outcome
from banana_tests.verdicts.uncertainty import StrictOutcome

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
