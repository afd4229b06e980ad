"""How a case of any family fails or skips as the suite counts it: the failing verdict's one line
(on its exception and its report, under every `--tb`), the suite's own skip outcomes, and the tie
at an end of a metric's range that is saturation, not blindness."""

from __future__ import annotations

from typing import NoReturn

import pytest

from banana_tests.verdicts.matrix import Outcome

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


CASE_OUTCOME = "banana_outcome"
"""The attribute that carries one of the suite's own outcomes (unresolved, not a valid trial) on a
case's skip exception and then on its test report, where it travels under xdist: the terminal
counts the case by it, never by the reason's words."""


def skip_as(outcome: Outcome, reason: str) -> NoReturn:
    """Skip the running case as `outcome` (Outcome.UNRESOLVED or Outcome.INVALID), with `reason`."""
    skip = pytest.skip.Exception(reason)
    setattr(skip, CASE_OUTCOME, outcome.value)
    raise skip


def at_an_end(normalised: float) -> bool:
    """Normalised exactly 0 or 100: clipped to an end of the metric's score_range."""
    return normalised in (0.0, 100.0)


def clipped_tie(first: float, second: float) -> bool:
    """Two normalised scores that tie at an end of the range: the metric cannot tell the images
    apart, whatever they are. Still not a detection (the rule is strict), but saturation, not
    blindness: the Δ cases warn of it, and the control family says so in its line."""
    return first == second and at_an_end(first)
