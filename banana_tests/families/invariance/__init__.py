"""The invariance family: does a metric give an image the same score whatever happens around it?
Which properties are checked, how one case is named, and its descriptor here; the cases in
`test_invariance`, the table in `invariance_table`.

Kept apart from the test module, which decodes crops with numpy: the case record, baselines and
the gate name invariance cases without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from banana_tests.cases import METRIC_FIXTURE, CaseKind, FamilyKey, Field
from banana_tests.families.family import AddOption, NoSettings, OptionValue, Place
from banana_tests.trajectories.case_plans import CasePlan

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


class InvarianceFamily:
    """The invariance family's descriptor (banana_tests.families.family.Family): collected in
    every run, a case per selected metric and check, named at collection."""

    kind = CaseKind.INVARIANCE
    name = kind.value
    figures = frozenset({Field.CHANGE, Field.TOLERANCE, Field.SCORE_CACHED, Field.CROP_SIDE, Field.RAISED})
    numbers = (Field.CHANGE, Field.TOLERANCE)
    entry_fields = frozenset({"kind", "metric", "check"})
    module = Path(__file__).resolve().with_name("test_invariance.py")
    option = None
    named_at_collection = True
    section = "banana_tests.families.invariance.invariance_table"
    fixture = None  # the test parametrizes itself (PARAM) and `banana_metric`
    params: frozenset[str] = frozenset()  # its cases need the scorers, not the data set
    shard_facts: Mapping[str, str] = {}
    run_facts: Mapping[str, str] = {}
    ini: Mapping[str, str] = {}
    plugin = None

    def add_options(self, addoption: AddOption) -> None:
        """It has none."""

    def read_settings(self, value: OptionValue, place: Place) -> NoSettings:
        return NoSettings()

    def cases(self, run_means: Sequence[CasePlan]) -> list[FamilyKey]:
        return []

    def key(self, fields: Mapping[str, object]) -> FamilyKey:
        """From a record (`invariance`) or a baseline entry (`check`)."""
        check = fields[Field.INVARIANCE] if Field.INVARIANCE in fields else fields["check"]
        return InvarianceKey(str(fields[Field.METRIC]), str(check))

    def item_key(self, params: Mapping[str, object], fixtures: Sequence[str]) -> FamilyKey | None:
        metric, check = params.get(METRIC_FIXTURE), params.get(PARAM)
        return (
            InvarianceKey(metric, check.value)
            if isinstance(metric, str) and isinstance(check, Invariance)
            else None
        )

    def check(self, props: Mapping[str, str]) -> None:
        """Its numbers are checked as the record is read."""

    def schema1_fields(self, name: str, props: Mapping[str, str]) -> Mapping[str, str] | None:
        """Its cases came after record schema 1."""
        return None


FAMILY = InvarianceFamily()
