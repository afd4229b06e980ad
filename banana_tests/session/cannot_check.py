"""A metric that raised on an image the suite made for a check (a control or an invariance crop).

A fault of its environment (banana_tests.scoring.returned_scores: a missing file, no network, a library
that does not import, no memory) is the case's error, never a verdict. Any other exception is the
metric's answer to that input: the check's failing verdict, which a baseline can list (docs/metrics.md,
"Inputs a metric needs"). The hint to declare `min_side` comes only when the size is what it
rejected: the input is smaller than the load-time probe's crops, which the metric scored, or no
larger than its own `min_side`, or the exception speaks of a size.
"""

from __future__ import annotations

import re
from typing import NoReturn

import pytest

from banana_tests.scoring.returned_scores import environment_fault
from banana_tests.session.no_verdict import NoVerdict, raised
from banana_tests.trajectories.records import DataError
from banana_tests.verdicts.verdict import fail_verdict
from metrics_under_test.custom import PROBE
from metrics_under_test.protocol import raised_at

PROBE_SIDE = min(min(image.height, image.width) for batch in PROBE for image in batch)
"""The smallest side of an image the metric scored before any check (the probe's)."""
SIZE_WORDS = re.compile(
    r"\b(?:sizes?|shapes?|dimensions?|small|smaller|large|larger|pixels?|px|resolution|height|width)\b"
    r"|\d\s*[x×]\s*\d",
    re.IGNORECASE,
)
MIN_SIDE_HINT = "a metric that needs larger images declares min_side (docs/metrics.md)"


def size_rejected(exc: BaseException, shape: tuple[int, int], min_side: int | None) -> bool:
    """Whether the size of an input of `shape` (height, width) is what `exc` rejected, as far as
    one can tell: see the module's docstring."""
    return min(shape) < max(PROBE_SIDE, (min_side or 0) + 1) or bool(SIZE_WORDS.search(str(exc)))


def cannot_check(
    metric: str,
    check: str,
    where: str,
    exc: Exception,
    shape: tuple[int, int],
    min_side: int | None,
    config: pytest.Config,
) -> NoReturn:
    """End the case of `metric`'s `check` (`gaussian_noise`, `batch-invariance`) after it raised
    `exc` on `where` (`the crop …`, `crops of 96 px`), whose images are of `shape`: an error for
    an environment's fault, else a failing verdict, each in one line."""
    at = "" if isinstance(exc, DataError) else raised_at(exc)  # a DataError names its own
    line = f"{metric} cannot be checked for {check} on {where}: it raised {raised(exc)}{at}"
    if environment_fault(exc):
        raise NoVerdict(f"{line}; a fault of its environment, not a verdict") from None
    hint = f"; {MIN_SIDE_HINT}" if size_rejected(exc, shape, min_side) else ""
    fail_verdict(f"{line}{hint}", f"cannot be checked on {where}: {raised(exc)}", config)
