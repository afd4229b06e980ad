"""The trend family's section: its terminal lines, and figures of the normalised score against
step per seed image, read back from trend cases.

Each `--trend` case records its series as the JUnit property `trend_series`: a JSON list of
`[step, run mean, min over runs, max over runs]`, normalised. The figure draws the run mean per
metric with a band for the spread over runs, so a falling score stands out from run-to-run noise.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.cases import Field
from banana_tests.families.family import Case, Page, Report
from banana_tests.families.trend import TrendTally, series_of
from banana_tests.reports.page.figure_style import pyplot, save
from banana_tests.verdicts.matrix import Outcome
from banana_tests.verdicts.record import CaseRecord

UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")  # what a seed image name may not bring into a file name
MAX_NAME = 80  # characters of a seed image name kept in a file name (file systems allow 255 bytes)


@dataclass(frozen=True)
class TrendSeries:
    """One (metric, seed image) trend: (step, mean, low, high) rows, sorted by step."""

    metric: str
    seed_image: str
    reference_step: int
    rows: tuple[tuple[int, float, float, float], ...]

    @property
    def reference(self) -> float:
        """The run-mean normalised score at the reference step."""
        return next(mean for step, mean, _, _ in self.rows if step == self.reference_step)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TrendSeries:
        """From a trend case's properties; ValueError (naming the property) when malformed."""
        reference_step, rows = series_of(props)
        return cls(props["metric"], props["seed_image"], reference_step, rows)


def trend_figure(seed_image: str, series: Sequence[TrendSeries], stem: Path) -> list[Path]:
    """Normalised score against step on one seed image: a line per metric (run mean), a band for
    the min–max over runs, and a dashed line at each metric's reference score."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    colours = plt.get_cmap("tab10")
    for i, s in enumerate(sorted(series, key=lambda s: s.metric)):
        colour = colours(i % 10)
        steps = [r[0] for r in s.rows]
        ax.fill_between(steps, [r[2] for r in s.rows], [r[3] for r in s.rows], color=colour, alpha=0.2, lw=0)
        ax.plot(steps, [r[1] for r in s.rows], marker="o", color=colour, label=s.metric)
        ax.axhline(s.reference, color=colour, ls="--", lw=0.8)
    all_steps = sorted({r[0] for s in series for r in s.rows})
    ax.set_xticks(all_steps)
    ax.set_xlabel("editing step")
    ax.set_ylabel("normalised score (higher = better)")
    ax.set_title(f"{seed_image}: run mean, band = min–max over runs, dashed = reference", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save(fig, stem)


@dataclass(frozen=True)
class TrendFigure:
    """One seed image's trend figure: its real name (for captions) and its PNG and SVG files."""

    seed_image: str
    files: tuple[Path, ...]

    @property
    def png(self) -> Path:
        return next(p for p in self.files if p.suffix == ".png")


def figure_stem(seed_image: str) -> str:
    """`trend_<seed image>`, safe, bounded and one per seed image: a name with characters a file
    name may not carry, a leading dot or more than MAX_NAME characters keeps a safe prefix and
    adds a hash of the whole name (`a/b` and `a_b` wrote one trend_a_b.png; 300 characters
    failed with "File name too long")."""
    safe = UNSAFE.sub("_", seed_image)
    if safe == seed_image and len(safe) <= MAX_NAME and not safe.startswith("."):
        return f"trend_{safe}"
    return f"trend_{safe[:MAX_NAME]}-{hashlib.sha256(seed_image.encode()).hexdigest()[:12]}"


def render_trends(trends: Sequence[TrendSeries], out: Path) -> list[TrendFigure]:
    """A trend figure (`figure_stem`.png/.svg) for every seed image with trend data."""
    by_seed: dict[str, list[TrendSeries]] = {}
    for t in trends:
        by_seed.setdefault(t.seed_image, []).append(t)
    return [
        TrendFigure(seed, tuple(trend_figure(seed, by_seed[seed], out / figure_stem(seed))))
        for seed in sorted(by_seed)
    ]


def trend_page(figures: Sequence[TrendFigure]) -> tuple[str, ...]:
    """report.html's Trends section, below the matrix's figures; none without trend figures."""
    from banana_tests.reports.page.markup import figure

    if not figures:
        return ()
    return (
        "<h2>Trends</h2>",
        "<p>Normalised score against step per seed image: the run mean per metric, a band for "
        "the spread over runs, and the reference score dashed.</p>",
        *(figure(f.png, f.seed_image) for f in figures),
    )


def trend_series(cases: Sequence[Case]) -> list[TrendSeries]:
    """The measured trends' series, the newest per (metric, seed image) of `cases` (oldest
    first), sorted."""
    measured = [TrendSeries.from_properties(c.props) for c in cases if Field.TREND_SERIES in c.props]
    newest = {(t.metric, t.seed_image): t for t in measured}
    return [newest[k] for k in sorted(newest)]


@dataclass(frozen=True)
class TrendSection:
    """The trend family's section (banana_tests.families.family.Section)."""

    title: str = "banana-tests trends"

    def terminal(self, cases: Sequence[Case]) -> list[str]:
        """One line a metric (`TrendTally`)."""
        tally = TrendTally()
        for case in cases:
            record = CaseRecord.read(case.props)
            assert record is not None
            first = record.step_number(Field.FIRST_DETECTION_STEP)
            tally.add(case.key.metric, Outcome(case.outcome), record.number(Field.SPEARMAN), first)
        return tally.lines()

    def report(self, cases: Sequence[Case], inputs: Sequence[Path]) -> Report:
        """A figure per seed image of the measured trends, newest per (metric, seed image)."""
        ordered = trend_series(cases)

        def write(out: Path) -> Page:
            figures = render_trends(ordered, out)
            return Page(tuple(p for f in figures for p in f.files), trend_page(figures), after_figures=True)

        return Report(write=write)


SECTION = TrendSection()
