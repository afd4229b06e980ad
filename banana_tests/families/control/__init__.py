"""The control family: does a metric see the classical distortions it was built for (noise, blur,
JPEG)? Its key and descriptor here; the cases in `test_control`, the table in `control_table`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.cases import CaseKind, FamilyKey, Field
from banana_tests.families.family import AddOption, NoSettings, OptionValue, Place
from banana_tests.trajectories.case_plans import CasePlan

PARAMS = ("control_metric", "distortion")
"""The parameter names `test_control` parametrizes its cases with."""
SCHEMA1_PREFIX = "test_detects_control_degradation["
"""Its test's name, by which record schema 1 told its cases apart."""


@dataclass(frozen=True, order=True)
class ControlKey:
    """One control case, `test_detects_control_degradation[<metric>-<distortion>]`."""

    metric: str
    distortion: str

    @property
    def test_id(self) -> str:
        return f"{self.metric}-{self.distortion}"

    @property
    def kind(self) -> CaseKind:
        return CaseKind.CONTROL

    @property
    def unit_image(self) -> None:
        return None

    def identity(self) -> list[tuple[Field, str]]:
        return [(Field.DISTORTION, self.distortion)]

    def entry(self) -> dict[str, str]:
        return {"kind": "control", "metric": self.metric, "distortion": self.distortion}

    def rank(self) -> tuple[int, str]:
        return 2, self.distortion


class ControlFamily:
    """The control family's descriptor (banana_tests.families.family.Family): collected in every
    run, a case per selected metric and distortion, named at collection."""

    kind = CaseKind.CONTROL
    name = kind.value
    figures: frozenset[Field] = frozenset()  # its failure's line says what it measured
    numbers: tuple[Field, ...] = ()
    entry_fields = frozenset({"kind", "metric", "distortion"})
    module = Path(__file__).resolve().with_name("test_control.py")
    option = None
    named_at_collection = True
    section = "banana_tests.families.control.control_table"
    fixture = None  # the test parametrizes itself (PARAMS)
    params = frozenset(PARAMS)
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
        return ControlKey(str(fields[Field.METRIC]), str(fields[Field.DISTORTION]))

    def item_key(self, params: Mapping[str, object], fixtures: Sequence[str]) -> FamilyKey | None:
        metric, distortion = (params.get(name) for name in PARAMS)
        if isinstance(metric, str) and isinstance(distortion, str):
            return ControlKey(metric, distortion)
        return None

    def schema1_fields(self, name: str, props: Mapping[str, str]) -> Mapping[str, str] | None:
        """Schema 1 recorded no property on a control case: its id, `<metric>-<distortion>`, is
        all there is. Distortion names hold no '-', so the last '-' splits (metric names may)."""
        if not name.startswith(SCHEMA1_PREFIX):
            return None
        metric, sep, distortion = name[len(SCHEMA1_PREFIX) : -1].rpartition("-")
        if not sep or not metric or not distortion:
            raise ValueError(f"not a control case id: {name[len(SCHEMA1_PREFIX) : -1]!r}")
        return {Field.METRIC: metric, Field.DISTORTION: distortion}

    def check(self, props: Mapping[str, str]) -> None:
        """Its record holds no figure."""


FAMILY = ControlFamily()
