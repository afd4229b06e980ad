"""What became of one case, as the matrix, the reports and the baselines count it.

A StrEnum: each member is its own value (`Outcome.FAILED == "failed"`), so the CSV and JSON the
reports write read as they always did.
"""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    PASSED = "passed"  # Δ < 0: the metric detected the degradation
    FAILED = "failed"  # Δ ≥ 0: the metric missed it
    SKIPPED = "skipped"
    ERROR = "error"
    UNRESOLVED = "unresolved"  # --banana-strict-runs: the runs disagree in sign
    INVALID = "invalid"  # not a valid trial: the step did not change (scoring.oracle)


VERDICTS = frozenset({Outcome.PASSED, Outcome.FAILED})
"""The outcomes that judge the metric."""
