"""The search family's section: the worst-escape searches read back from a run or JUnit, per
metric the escape found, or "none found in N examples" with the most degraded image the metric did
detect.

`report` puts one row a metric in summary.md; report.html adds the two images side by side,
embedded when both pass banana_tests.reports.embedded_images' checks, else named with the reason.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from banana_tests.cases import CaseKind, Field
from banana_tests.families.family import Case, Page, Report
from banana_tests.families.search import VISIBLE_PSNR, SearchKey
from banana_tests.reports.embedded_images import Shown, shown
from banana_tests.table_text import table
from banana_tests.verdicts.matrix import Outcome
from banana_tests.verdicts.record import CaseRecord

HEADER = ["metric", "outcome", "found", "examples", "seconds", "PSNR (dB)", "SSIM"]
HEADER += ["clean", "degraded", "degradation"]  # normalised scores, then what was drawn


@dataclass(frozen=True)
class SearchOutcome:
    """One metric's search as a run left it, with the figures of the image it shows (none when it
    skipped or errored before scoring anything), and its PNG pair once checked (`checked`)."""

    key: SearchKey
    outcome: Outcome
    record: CaseRecord
    shown: tuple[Shown, Shown] | None = None

    @classmethod
    def of(cls, record: CaseRecord, outcome: Outcome) -> SearchOutcome:
        """From a search record (ValueError for another kind)."""
        if not isinstance(record.key, SearchKey) or record.kind is not CaseKind.SEARCH:
            raise ValueError(f"a {record.kind.value} case is no search outcome")
        return cls(record.key, outcome, record)

    @property
    def escaped(self) -> bool:
        return self.record.figures.get(Field.ESCAPED) == "true"

    @property
    def found(self) -> str:
        """`escape`, or `none found in N examples` (its image: the most degraded one detected)."""
        examples = self.record.figures.get(Field.EXAMPLES, "?")
        return "escape" if self.escaped else f"none found in {examples} examples"

    def row(self) -> list[str]:
        figures, number = self.record.figures, self.record.number
        psnr, ssim = number(Field.PSNR), number(Field.SSIM)
        clean, degraded = number(Field.NORM_REFERENCE), number(Field.NORM_STEP)
        return [
            self.key.metric,
            self.outcome.value,
            self.found,
            figures.get(Field.EXAMPLES, ""),
            figures.get(Field.SEARCH_SECONDS, ""),
            "" if psnr is None else f"{psnr:.2f}",
            "" if ssim is None else f"{ssim:.3f}",
            "" if clean is None else f"{clean:.2f}",
            "" if degraded is None else f"{degraded:.2f}",
            figures.get(Field.DEGRADATION, ""),
        ]

    @property
    def pair(self) -> tuple[str, str] | None:
        """The clean and degraded PNGs' paths as the JUnit properties name them."""
        clean, degraded = (self.record.figures.get(f) for f in (Field.CLEAN_PNG, Field.DEGRADED_PNG))
        return None if not clean or not degraded else (clean, degraded)

    def checked(self, folders: Sequence[Path]) -> SearchOutcome:
        """With its pair as the report may show it, embedding only from `folders` or a score cache."""
        pair = self.pair
        if pair is None:
            return self
        return dataclasses.replace(self, shown=(shown(pair[0], folders), shown(pair[1], folders)))


def search_markdown(outcomes: Sequence[SearchOutcome]) -> str:
    """The table with its heading, for summary.md; empty when the run had no search."""
    if not outcomes:
        return ""
    lines = [
        f"## Worst escape (a degraded image scored at least as well as clean, PSNR < {VISIBLE_PSNR:g} dB)",
        "",
        "Without an escape, the figures are those of the most degraded image the metric detected.",
        "",
        *table(HEADER, [o.row() for o in outcomes]),
    ]
    return "\n".join(lines)


def search_lines(outcomes: Sequence[SearchOutcome]) -> list[str]:
    """The terminal's lines, one a metric: `piqe: escape at PSNR 16.35 dB, SSIM 0.322, normalised
    61.21 ≥ clean 60.02 (145 examples, 41.2 s)`, or none found with the most degraded detected."""
    out = []
    for o in sorted(outcomes, key=lambda o: o.key):
        _, outcome, found, examples, seconds, psnr, ssim, clean, degraded, _ = o.row()
        if not psnr:
            out.append(f"{o.key.metric}: {outcome}, nothing scored")
            continue
        what = "escape" if o.escaped else f"{found}; the most degraded detected"
        sign = "≥" if o.escaped else "<"
        out.append(
            f"{o.key.metric}: {what} at PSNR {psnr} dB, SSIM {ssim}, normalised {degraded} {sign} clean "
            f"{clean} ({examples} examples, {seconds} s)"
        )
    return out


def search_pairs_html(outcomes: Sequence[SearchOutcome]) -> str:
    """Each metric's clean and degraded images side by side, embedded when both passed the checks
    (`SearchOutcome.checked`); otherwise each refused file is named with the reason, and no image
    is shown."""
    parts = []
    for o in outcomes:
        if o.shown is None:
            continue
        caption = f"{o.key.metric}: {o.found}; clean {o.shown[0].name}, degraded {o.shown[1].name}"
        pngs = [s.png for s in o.shown if s.png is not None]
        if len(pngs) == len(o.shown):
            images = "".join(
                f'<img alt="{escape(Path(s.named).stem)}" src="data:image/png;base64,'
                f'{base64.b64encode(png).decode("ascii")}">'
                for s, png in zip(o.shown, pngs, strict=True)
            )
            parts.append(f"<figure>{images}<figcaption>{escape(caption)}</figcaption></figure>")
        else:
            refused = "; ".join(f"{s.named}: {s.why}" for s in o.shown if s.png is None)
            parts.append(f"<p>{escape(caption)}: not shown ({escape(refused)})</p>")
    return "\n".join(parts)


def refused_lines(outcomes: Sequence[SearchOutcome]) -> list[str]:
    """One warning line per file the report would not embed, naming the file and why."""
    return [
        f"banana-tests report: not embedding {s.named} ({o.key.metric}'s search): {s.why}"
        for o in outcomes
        for s in o.shown or ()
        if s.png is None
    ]


def search_page(outcomes: Sequence[SearchOutcome]) -> tuple[str, ...]:
    """report.html's Worst escape section: the table and each metric's pair of images."""
    from banana_tests.reports.page.markup import table as html_table

    return (
        "<h2>Worst escape</h2>",
        f"<p>Per metric, the most degraded image it still scores at least as well as its clean "
        f"source (PSNR &lt; {VISIBLE_PSNR:g} dB), clean and degraded side by side; without an "
        "escape, the most degraded image it detected.</p>",
        html_table(HEADER, (o.row() for o in outcomes)),
        search_pairs_html(outcomes),
    )


def outcome_of(case: Case) -> SearchOutcome:
    record = CaseRecord.read(case.props)
    assert record is not None
    return SearchOutcome.of(record, Outcome(case.outcome))


@dataclass(frozen=True)
class SearchSection:
    """The search family's section (banana_tests.families.family.Section)."""

    title: str = "banana-tests worst escape"

    def terminal(self, cases: Sequence[Case]) -> list[str]:
        return search_lines([outcome_of(c) for c in cases])

    def report(self, cases: Sequence[Case], inputs: Sequence[Path]) -> Report:
        """The table in summary.md and on the page, with the pairs of images embedded from
        `inputs` (or a score cache); a warning for each image refused."""
        newest = {c.key: c for c in cases}  # oldest first: a search run twice shows its newest
        outcomes = [outcome_of(newest[k]).checked(inputs) for k in sorted(newest, key=lambda k: k.metric)]
        if not outcomes:
            return Report()
        page = Page(html=search_page(outcomes))
        return Report(search_markdown(outcomes), tuple(refused_lines(outcomes)), lambda out: page)


SECTION = SearchSection()
