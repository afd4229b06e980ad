"""A case's verdict: its gap, the failure message people read and the JUnit properties CI reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import pytest
from _pytest.outcomes import Failed  # `pytest.fail.Exception`, by a name mypy can follow

from banana_tests.cases import CaseKey
from banana_tests.verdicts.gaps import Gap


class VerdictFailure(Failed, AssertionError):
    """A suite case's verdict said "missed". pytest reports its one-line message without a
    traceback (a traceback through the fixture says nothing and costs ~5 ms a case), unless
    `--tb=long` or `--full-trace` asks for one. It is an AssertionError, so a baseline's
    `xfail(raises=AssertionError)` still matches it."""

    def __init__(self, message: str, summary: str, pytrace: bool) -> None:
        super().__init__(message, pytrace=pytrace)
        self.summary = summary


def fail_verdict(message: str, summary: str, config: pytest.Config) -> NoReturn:
    """Fail the running case with the one-line `message` as its report and `summary` (its figure,
    e.g. Δ) as the failure's JUnit message; see VerdictFailure."""
    traceback = config.option.tbstyle == "long" or config.option.fulltrace
    raise VerdictFailure(message, summary, pytrace=traceback)


@dataclass(frozen=True)
class Verdict:
    key: CaseKey
    reference_step: int
    gap: Gap

    @property
    def detected(self) -> bool:
        return self.gap.detected

    def message(self) -> str:
        """One line: metric, seed image, step, Δ, both raw and both normalised scores."""
        k, g = self.key, self.gap
        run = f"run {k.run}" if k.run is not None else f"the mean of {g.runs} run(s)"
        return (
            f"{k.metric} did not detect the degradation of {k.seed_image} at step {k.step}: "
            f"Δ{k.step} = {g.delta:+.3f} ≥ 0 ({run}); "
            f"step {self.reference_step:>3}: raw {g.score_reference:.4f}"
            f" → normalised {g.norm_reference:.2f}, "
            f"step {k.step:>3}: raw {g.score_step:.4f} → normalised {g.norm_step:.2f}"
        )

    def summary(self) -> str:
        return f"Δ{self.key.step} = {self.gap.delta:+.3f} ≥ 0"

    def properties(self) -> dict[str, str]:
        """The gap as JUnit properties; `repr` keeps every digit so the XML rebuilds the matrix."""
        g = self.gap
        return {
            "delta": repr(g.delta),
            "score_reference": repr(g.score_reference),
            "score_step": repr(g.score_step),
            "norm_reference": repr(g.norm_reference),
            "norm_step": repr(g.norm_step),
            "runs": str(g.runs),
        }
