"""The invariance family's vocabulary: which properties are checked, and how one case is named.

Kept apart from the test module (banana_tests/test_invariance.py), which decodes crops with numpy:
the case record, baselines and the gate name invariance cases without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from banana_tests.cases import CaseKind, Field

PARAM = "banana_invariance"
"""The parameter the invariance test is parametrized with (an `Invariance`); the gate finds its
cases by it, so a user's own parameter named `invariance` is never taken for one."""


class Invariance(Enum):
    """What must not change a score."""

    BATCH = "batch"  # scored alone against within a batch of 16
    REPEAT = "repeat"  # the same call twice in one process
    SHIFT = "shift"  # the crop window moved by one pixel
    RESIZE = "resize"  # bicubic resize by +5 %
    PNG = "png"  # a PNG file against its lossless (WebP) round trip

    @property
    def same_pixels(self) -> bool:
        """Checked on the largest change over the crops; the geometric ones on the median."""
        return self in (Invariance.BATCH, Invariance.REPEAT, Invariance.PNG)


@dataclass(frozen=True, order=True)
class InvarianceKey:
    """One invariance case, `test_score_is_invariant[<metric>-<check>]`. `check` is an
    `Invariance` value, kept as text so a record or baseline from a version with more checks
    still reads."""

    metric: str
    check: str

    @property
    def test_id(self) -> str:
        return f"{self.metric}-{self.check}"

    @property
    def kind(self) -> CaseKind:
        return CaseKind.INVARIANCE

    @property
    def unit_image(self) -> None:
        return None

    def identity(self) -> list[tuple[Field, str]]:
        return [(Field.INVARIANCE, self.check)]

    def entry(self) -> dict[str, str]:
        return {"kind": "invariance", "metric": self.metric, "check": self.check}

    def rank(self) -> tuple[int, str]:
        return 3, self.check
