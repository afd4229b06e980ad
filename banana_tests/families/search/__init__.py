"""The worst-escape family (`--search=N`): how degraded can an image get and still score as well as
its clean source? Its key and descriptor here; the verdict in `escape`, the table in
`search_table`, the search in `test_search`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.cases import METRIC_FIXTURE, CaseKind, FamilyKey, Field
from banana_tests.trajectories.plan import CasePlan

FIXTURE = "banana_search"
"""The fixture the search test requests: the gate and the scheduler know its cases by it."""


@dataclass(frozen=True, order=True)
class SearchKey:
    """One metric's search, `test_no_worst_escape[<metric>]`."""

    metric: str

    @property
    def kind(self) -> CaseKind:
        return CaseKind.SEARCH

    @property
    def test_id(self) -> str:
        return self.metric

    @property
    def unit_image(self) -> None:
        return None

    def identity(self) -> list[tuple[Field, str]]:
        return []  # a search is named by its metric alone

    def entry(self) -> dict[str, str]:
        return {"kind": "search", "metric": self.metric}

    def rank(self) -> tuple[int, str]:
        return 4, ""


class SearchFamily:
    """The search family's descriptor (banana_tests.families.family.Family)."""

    kind = CaseKind.SEARCH
    figures = frozenset(
        {Field.EXAMPLES, Field.ESCAPED, Field.SEARCH_SECONDS, Field.DEGRADATION, Field.CLEAN_PNG}
        | {Field.DEGRADED_PNG, Field.NORM_REFERENCE, Field.NORM_STEP, Field.PSNR, Field.SSIM}
    )
    numbers = (Field.EXAMPLES, Field.NORM_REFERENCE, Field.NORM_STEP, Field.PSNR, Field.SSIM)
    entry_fields = frozenset({"kind", "metric"})
    module = Path(__file__).resolve().with_name("test_search.py")
    option = "banana_search"
    named_at_collection = True
    section = "banana_tests.families.search.search_table"

    fixture = None  # the search parametrizes `banana_metric`, as any test on it

    def cases(self, run_means: Sequence[CasePlan]) -> list[FamilyKey]:
        return []

    def key(self, fields: Mapping[str, object]) -> FamilyKey:
        return SearchKey(str(fields[Field.METRIC]))

    def item_key(self, params: Mapping[str, object], fixtures: Sequence[str]) -> FamilyKey | None:
        metric = params.get(METRIC_FIXTURE)
        return SearchKey(metric) if isinstance(metric, str) and FIXTURE in fixtures else None

    def check(self, props: Mapping[str, str]) -> None:
        """Its numbers are checked as the record is read."""


FAMILY = SearchFamily()
