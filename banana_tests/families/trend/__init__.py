"""The trend family (`--trend`): does each metric's score fall with the step on each seed image?
Its key and descriptor here; the verdict in `trend`, the figures in `trends`, the cases in
`test_trend`."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.cases import CaseKind, FamilyKey, Field
from banana_tests.trajectories.plan import CasePlan
from banana_tests.trajectories.records import DataError, check_index

FIXTURE = "banana_trend"  # the indirect parameter that carries a trend key


@dataclass(frozen=True, order=True)
class TrendKey:
    """One trend case: `metric` on `seed_image` over all selected steps."""

    metric: str
    seed_image: str

    @property
    def kind(self) -> CaseKind:
        return CaseKind.TREND

    @property
    def test_id(self) -> str:
        return f"{self.metric}-{self.seed_image}"

    @property
    def unit_image(self) -> str:
        return self.seed_image  # a trend shares its seed image's reference scores with the Δ cases

    def identity(self) -> list[tuple[Field, str]]:
        return [(Field.SEED_IMAGE, self.seed_image)]

    def entry(self) -> dict[str, str]:
        return {"kind": "trend", "metric": self.metric, "seed_image": self.seed_image}

    def rank(self) -> tuple[int, str]:
        return 1, self.seed_image


class TrendFamily:
    """The trend family's descriptor (banana_tests.families.family.Family)."""

    kind = CaseKind.TREND
    figures = frozenset({Field.SPEARMAN, Field.FIRST_DETECTION_STEP, Field.TREND_STEPS, Field.TREND_SERIES})
    numbers: tuple[Field, ...] = ()
    entry_fields = frozenset({"kind", "metric", "seed_image"})
    module = Path(__file__).resolve().with_name("test_trend.py")
    option = "banana_trend"
    named_at_collection = False  # its reference step is known once planned
    section = "banana_tests.families.trend.trends"

    fixture = FIXTURE

    def cases(self, run_means: Sequence[CasePlan]) -> list[FamilyKey]:
        from banana_tests.families.trend.trend import plan_trends

        found: list[FamilyKey] = []
        found.extend(sorted(t.key for t in plan_trends(run_means)))
        return found

    def key(self, fields: Mapping[str, object]) -> FamilyKey:
        return TrendKey(str(fields[Field.METRIC]), str(fields[Field.SEED_IMAGE]))

    def item_key(self, params: Mapping[str, object], fixtures: Sequence[str]) -> FamilyKey | None:
        key = params.get(FIXTURE)
        return key if isinstance(key, TrendKey) else None

    def check(self, props: Mapping[str, str]) -> None:
        if Field.TREND_SERIES in props:
            series_of(props)


FAMILY = TrendFamily()


def series_of(props: Mapping[str, str]) -> tuple[int, tuple[tuple[int, float, float, float], ...]]:
    """A trend record's reference step and `trend_series` rows (step, mean, low, high), sorted by
    step; ValueError naming the property when malformed."""
    text = props["trend_series"]
    try:
        rows = tuple(
            (check_index("step", s), float(mean), float(lo), float(hi))
            for s, mean, lo, hi in json.loads(text)
        )
    except (TypeError, ValueError, DataError) as exc:
        raise ValueError(f"trend_series {text!r} is not a JSON list of [step, mean, min, max]") from exc
    try:
        reference_step = check_index("reference_step", props["reference_step"], columnar=True)
    except DataError as exc:
        raise ValueError(str(exc)) from None
    if reference_step not in {r[0] for r in rows}:
        raise ValueError(f"trend_series has no row for the reference step {reference_step}")
    return reference_step, tuple(sorted(rows))
