"""The trend family (`--trend`): does each metric's score fall with the step on each seed image,
and from which step on? Its key, descriptor, option and verdict here; the figures in `trends`, the
cases in `test_trend`.

Beyond the paper's three Δ verdicts: the Spearman correlation of the run-mean normalised score
against the step over every selected step (negative = the metric sees the trend), and the first
detection step, from which the score stays below the reference. The latter compares with the
paper's "humans see it at 5-10 steps, the generator admits it at 20-37".
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from banana_tests.cases import CaseKind, FamilyKey, Field
from banana_tests.families.family import AddOption, OptionValue, Place, RunSettings
from banana_tests.trajectories.case_plans import CasePlan
from banana_tests.trajectories.records import DataError, check_index
from banana_tests.verdicts.gaps import gap
from banana_tests.verdicts.matrix import VERDICTS, Outcome, OutcomeCounts
from metrics_under_test.spec import MetricSpec

if TYPE_CHECKING:
    from banana_tests.scoring.score_book import ScoreBook

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


@dataclass(frozen=True)
class TrendSettings:
    """`--trend`: whether the run tests the trends."""

    on: bool = False

    def facts(self) -> tuple[tuple[str, str], ...]:
        return (("trend", str(self.on).lower()),)

    @classmethod
    def of(cls, settings: RunSettings) -> TrendSettings:
        found = settings.families.get(CaseKind.TREND.value)
        return found if isinstance(found, cls) else cls()


class TrendFamily:
    """The trend family's descriptor (banana_tests.families.family.Family)."""

    kind = CaseKind.TREND
    name = kind.value
    figures = frozenset({Field.SPEARMAN, Field.FIRST_DETECTION_STEP, Field.TREND_STEPS, Field.TREND_SERIES})
    numbers: tuple[Field, ...] = ()
    entry_fields = frozenset({"kind", "metric", "seed_image"})
    module = Path(__file__).resolve().with_name("test_trend.py")
    option = "banana_trend"
    named_at_collection = False  # its reference step is known once planned
    section = "banana_tests.families.trend.trends"
    fixture = FIXTURE
    params: frozenset[str] = frozenset()  # its fixture's cases are planned on the data set
    shard_facts: Mapping[str, str] = {"trend": "--trend"}
    run_facts: Mapping[str, str] = {}
    ini: Mapping[str, str] = {}
    plugin = None

    def add_options(self, addoption: AddOption) -> None:
        addoption(
            "--trend",
            action="store_true",
            default=False,
            help="also test, per metric and seed image, the Spearman trend over all steps selected",
        )

    def read_settings(self, value: OptionValue, place: Place) -> TrendSettings:
        return TrendSettings(bool(value("trend")))

    def cases(self, run_means: Sequence[CasePlan]) -> list[FamilyKey]:
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

    def schema1_fields(self, name: str, props: Mapping[str, str]) -> Mapping[str, str] | None:
        """Schema 1 wrote a trend case's properties under `kind=trend`, this schema's names."""
        return props if props.get("kind") == self.kind.value else None


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


@dataclass(frozen=True)
class TrendPlan:
    """The run-mean Δ plans of one (metric, seed image), one per step, or the error that stops it."""

    key: TrendKey
    reference_step: int
    steps: tuple[CasePlan, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Trend:
    """Normalised run-mean scores by step (the reference included) and what they show.

    `spread` holds each step's (min, max) normalised score over the runs, for the report's band.
    """

    key: TrendKey
    reference_step: int
    points: tuple[tuple[int, float], ...]
    spread: tuple[tuple[int, float, float], ...] = ()

    @property
    def reference(self) -> float:
        return dict(self.points)[self.reference_step]

    @property
    def spearman(self) -> float:
        """Rank correlation of score against step; nan when the scores do not vary."""
        try:
            return statistics.correlation(
                _ranks([s for s, _ in self.points]), _ranks([n for _, n in self.points])
            )
        except statistics.StatisticsError:  # a constant series
            return math.nan

    @property
    def first_detection_step(self) -> int | None:
        """The first step after the reference from which every later score is below the reference."""
        first = None
        for step, norm in sorted(self.points, reverse=True):
            if step <= self.reference_step or norm >= self.reference:
                break
            first = step
        return first

    @property
    def detected(self) -> bool:
        return self.spearman < 0

    def message(self) -> str:
        """One line however many steps: ρ, the first detection step and the two ends of the curve
        (the whole series is in the JUnit property `trend_series`)."""
        key, points = self.key, sorted(self.points)
        (s0, n0), (s1, n1) = points[0], points[-1]
        return (
            f"{key.metric} shows no falling trend on {key.seed_image}: "
            f"Spearman ρ = {self.spearman:+.3f} over {len(points)} steps, first detection step "
            f"{self.first_detection_step or 'none'}; normalised {n0:.2f} at step {s0} → {n1:.2f} at step {s1}"
        )

    def summary(self) -> str:
        return f"Spearman ρ = {self.spearman:+.3f}"

    def series(self) -> list[tuple[int, float, float, float]]:
        """(step, run mean, min over runs, max over runs) per step, normalised; without a spread
        the band collapses onto the mean."""
        spread = {s: (lo, hi) for s, lo, hi in self.spread}
        return [(s, n, *spread.get(s, (n, n))) for s, n in sorted(self.points)]

    def properties(self) -> dict[Field, str]:
        """The trend as record figures."""
        first = self.first_detection_step
        return {
            Field.SPEARMAN: repr(self.spearman),
            Field.FIRST_DETECTION_STEP: "none" if first is None else str(first),
            Field.TREND_STEPS: ",".join(str(s) for s, _ in sorted(self.points)),
            Field.TREND_SERIES: json.dumps(self.series(), separators=(",", ":")),
        }


def plan_trends(plans: Sequence[CasePlan]) -> list[TrendPlan]:
    """One trend per metric and seed image, over the run-mean Δ plans of its steps."""
    by_key: dict[TrendKey, list[CasePlan]] = {}
    for p in plans:
        by_key.setdefault(TrendKey(p.key.metric, p.key.seed_image), []).append(p)
    out = []
    for key, group in by_key.items():
        errors = list(dict.fromkeys(p.error for p in group if p.error))
        if len(group) < 2 and not errors:
            errors.append(
                f"a trend needs 2 or more steps besides the reference; {key.seed_image} has {len(group)}"
            )
        out.append(TrendPlan(key, group[0].reference_step, tuple(group), "; ".join(errors) or None))
    return out


def measure(plan: TrendPlan, spec: MetricSpec, book: ScoreBook) -> Trend:
    """Score the plan's images (each once, in one pass) and normalise the run means by step,
    keeping each step's spread over the runs."""
    if plan.error:
        raise DataError(plan.error)
    upcoming = [r for p in plan.steps for r in p.records]
    book.scores(spec, upcoming)  # all at once, so an error names every bad record, not the first
    points: list[tuple[int, float]] = []
    spread: list[tuple[int, float, float]] = []
    for p in plan.steps:
        refs = book.scores(spec, [a for a, _ in p.pairs], upcoming)
        cur = book.scores(spec, [b for _, b in p.pairs])
        g = gap(spec.scale, refs, cur)
        points.append((p.key.step, g.norm_step))
        spread.append((p.key.step, *_range(spec, cur)))
        reference, reference_range = g.norm_reference, _range(spec, refs)
    return Trend(
        plan.key,
        plan.reference_step,
        ((plan.reference_step, reference), *points),
        ((plan.reference_step, *reference_range), *spread),
    )


def _range(spec: MetricSpec, scores: Sequence[float]) -> tuple[float, float]:
    """The lowest and highest normalised score over the runs."""
    norms = [spec.scale.normalise(s) for s in scores]
    return min(norms), max(norms)


def _ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank (as Spearman's ρ needs)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start  # the run of ties order[start..end]
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


@dataclass
class TrendTally:
    """Trend cases (`--trend`) by metric, for one summary line each: on how many seed images the
    score falls (Spearman ρ < 0), the spread of ρ, and the first detection step."""

    cases: dict[str, list[tuple[Outcome, float, int | None]]] = field(default_factory=dict)

    def add(
        self, metric: str, outcome: Outcome, spearman: float | None, first_detection_step: int | None
    ) -> None:
        """One trend case: its outcome, ρ (None before it was measured) and first detection step."""
        entry = (outcome, math.nan if spearman is None else spearman, first_detection_step)
        self.cases.setdefault(metric, []).append(entry)

    def lines(self) -> list[str]:
        out = []
        width = max((len(m) for m in self.cases), default=0)
        for metric in sorted(self.cases):
            cases = self.cases[metric]
            verdicts = [c for c in cases if c[0] in VERDICTS]
            falling = sum(c[0] is Outcome.PASSED for c in verdicts)
            line = f"{metric.ljust(width)}  falling (ρ < 0) on {falling}"
            line += f"/{len(verdicts)} seed images"
            rhos = [rho for _, rho, _ in verdicts if not math.isnan(rho)]
            if rhos:
                line += f"; ρ median {statistics.median(rhos):+.2f} ({min(rhos):+.2f} … {max(rhos):+.2f})"
            firsts = [f for _, _, f in verdicts if f is not None]
            if verdicts:
                line += "; first detection step "
                line += f"median {statistics.median(firsts):g}" if firsts else "none"
                if firsts and len(firsts) < len(verdicts):
                    line += f", none on {len(verdicts) - len(firsts)}"
            others = OutcomeCounts.of(outcome for outcome, _, _ in cases if outcome not in VERDICTS)
            if others.skipped or others.error:
                line += f" ({others.skipped} skipped, {others.error} errors)"
            out.append(line)
        return out
