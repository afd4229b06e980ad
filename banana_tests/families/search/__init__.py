"""The worst-escape family (`--search=N`): how degraded can an image get and still score as well as
its clean source? Its key, descriptor, option and verdict here; the table in `search_table`, the
search in `test_search`.

An escape is a degraded image that the metric scores at least as well as its clean source
(normalised, so higher is better for every metric) while the degradation is plainly visible:
its PSNR against the clean image (BT.601 luma, as the degradation oracle computes it) is below
VISIBLE_PSNR. The search fails a metric on an escape and reports the worst one it saw (the lowest
PSNR); with none, the most degraded image the metric did detect. Kept apart from the test module,
which imports hypothesis and numpy: the record and the report read these figures without them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.cases import METRIC_FIXTURE, CaseKind, FamilyKey, Field
from banana_tests.counts import whole_number
from banana_tests.families.family import AddOption, OptionValue, Place, RunSettings
from banana_tests.trajectories.case_plans import CasePlan

MAX_SEARCH = 100_000  # examples per metric of the worst-escape search: days of scoring already
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


@dataclass(frozen=True)
class SearchSettings:
    """`--search=N`: the examples per metric of the worst-escape search; None: no search."""

    examples: int | None = None

    def facts(self) -> tuple[tuple[str, str], ...]:
        return ()

    @classmethod
    def of(cls, settings: RunSettings) -> SearchSettings:
        found = settings.families.get(CaseKind.SEARCH.value)
        return found if isinstance(found, cls) else cls()


class SearchFamily:
    """The search family's descriptor (banana_tests.families.family.Family)."""

    kind = CaseKind.SEARCH
    name = kind.value
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
    params: frozenset[str] = frozenset()
    shard_facts: Mapping[str, str] = {}
    run_facts: Mapping[str, str] = {}
    ini: Mapping[str, str] = {}
    plugin = None

    def add_options(self, addoption: AddOption) -> None:
        addoption(
            "--search",
            default=None,
            metavar="N",
            help="also search, per metric, N drawn degradations of the clean seed images for the worst "
            f"escape: a plainly degraded image scored as well as its clean source (1 <= N <= {MAX_SEARCH}; "
            "default: off)",
        )

    def read_settings(self, value: OptionValue, place: Place) -> SearchSettings:
        given = value("search")
        if given is None:
            return SearchSettings()
        return SearchSettings(
            whole_number("--search", given, 1, MAX_SEARCH, "a number of examples per metric")
        )

    def cases(self, run_means: Sequence[CasePlan]) -> list[FamilyKey]:
        return []

    def key(self, fields: Mapping[str, object]) -> FamilyKey:
        return SearchKey(str(fields[Field.METRIC]))

    def item_key(self, params: Mapping[str, object], fixtures: Sequence[str]) -> FamilyKey | None:
        metric = params.get(METRIC_FIXTURE)
        return SearchKey(metric) if isinstance(metric, str) and FIXTURE in fixtures else None

    def check(self, props: Mapping[str, str]) -> None:
        """Its numbers are checked as the record is read."""

    def schema1_fields(self, name: str, props: Mapping[str, str]) -> Mapping[str, str] | None:
        """Its cases came after record schema 1."""
        return None


FAMILY = SearchFamily()


VISIBLE_PSNR = 30.0
"""dB. Below it a degradation is plainly visible: an RMS error over 8 grey levels, about what
JPEG at quality 10 or Gaussian noise of σ 8 does to these seed images; the embedded set's step 20
sits at 22-27 dB from step 1."""
UNCHANGED_CAP = 100.0
"""dB: an unchanged image's PSNR (infinite) as the objective counts it."""


@dataclass(frozen=True)
class Seen:
    """One drawn example as the metric scored it: what was drawn (a crop and a degradation, whose
    repr and str say what they are), and its figures."""

    crop: object
    degradation: object
    psnr: float
    ssim: float
    norm_clean: float
    norm_degraded: float

    @property
    def escaped(self) -> bool:
        """Scored at least as well as the clean image while plainly degraded (nan never escapes)."""
        return self.norm_degraded >= self.norm_clean and self.psnr < VISIBLE_PSNR

    @property
    def objective(self) -> float:
        """What hypothesis's `target` maximises: how degraded the image is (−PSNR), less four
        points a normalised point the metric rated it below the clean image. An escape scores
        by its PSNR alone; a detected image is pulled towards the metric's blind side."""
        if not (math.isfinite(self.norm_clean) and math.isfinite(self.norm_degraded)):
            return -1e9  # a nan or infinite score is no direction
        shortfall = max(0.0, self.norm_clean - self.norm_degraded)
        return -min(self.psnr, UNCHANGED_CAP) - 4.0 * shortfall

    def describe(self) -> str:
        return (
            f"PSNR {self.psnr:.2f} dB, SSIM {self.ssim:.3f}, normalised {self.norm_degraded:.2f} "
            f"(clean {self.norm_clean:.2f}) on {self.crop!r} after {self.degradation}"
        )


@dataclass
class SearchLog:
    """What one search saw: the examples scored, the worst escape (lowest PSNR), the one hypothesis
    shrank to (the mildest visible escape it found), the most degraded image the metric detected,
    and where the PNG pair of the one shown was written."""

    examples: int = 0
    escape: Seen | None = None
    shrunk: Seen | None = None  # the escape hypothesis shrank to; None when none ended the search
    most_degraded_detected: Seen | None = None
    pair: tuple[str, str] | None = None
    seconds: float = 0.0

    def add(self, seen: Seen) -> None:
        self.examples += 1
        if seen.escaped:
            if self.escape is None or seen.psnr < self.escape.psnr:
                self.escape = seen
        elif seen.norm_degraded < seen.norm_clean:
            best = self.most_degraded_detected
            if best is None or seen.psnr < best.psnr:
                self.most_degraded_detected = seen

    @property
    def shown(self) -> Seen | None:
        """The image the report shows: the escape, else the most degraded one detected."""
        return self.escape or self.most_degraded_detected

    def line(self, metric: str) -> str:
        """The failing case's one line (an escape must have been found), with its PNG pair unless
        the search folder refused it."""
        escape, shrunk = self.escape, self.shrunk
        assert escape is not None
        pair = (
            "PNG pair not written" if self.pair is None else f"pair (clean, escaped): {' '.join(self.pair)}"
        )
        mildest = "" if shrunk is None else f"; shrunk to {shrunk.psnr:.2f} dB after {shrunk.degradation}"
        return (
            f"{metric} scores a plainly degraded image as well as its clean source: {escape.describe()}; "
            f"{pair}{mildest} ({self.examples} examples)"
        )

    def properties(self) -> dict[Field, str]:
        """The figures a search case records (banana_tests.verdicts.record)."""
        out = {Field.EXAMPLES: str(self.examples), Field.ESCAPED: str(self.escape is not None).lower()}
        out[Field.SEARCH_SECONDS] = f"{self.seconds:.2f}"
        shown = self.shown
        if shown is not None:
            out |= {
                Field.NORM_REFERENCE: repr(shown.norm_clean),
                Field.NORM_STEP: repr(shown.norm_degraded),
                Field.PSNR: repr(shown.psnr),
                Field.SSIM: repr(shown.ssim),
                Field.DEGRADATION: f"{shown.crop!r} after {shown.degradation}",
            }
        if self.pair is not None:
            out |= {Field.CLEAN_PNG: self.pair[0], Field.DEGRADED_PNG: self.pair[1]}
        return out
