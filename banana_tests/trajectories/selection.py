"""Which records a run uses: variant, seed images, metadata filters, a cap on runs, the steps; and
`Loaded`, what reading any source yields once every reader has applied them the same way.

Selection happens on metadata alone, before any image is fetched or decoded, so a 28,000-image
set tested at three steps costs three steps' worth of images. Bad records are selected the same
way, on whatever part of their identity they still show, and the problems that could concern the
selected records are kept with them.

Records marked `"for_iqa": false` (the paper's reconstruction plans, which change the image on
purpose) are never IQA test cases unless a `--banana-where` on `for_iqa` asks for them by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from banana_tests.trajectories.records import Problem, Record

FOR_IQA = "for_iqa"


def parse_where(items: Sequence[str] | None) -> dict[str, str]:
    """`["temperature=0.4", "resolution=4K"]` → {"temperature": "0.4", "resolution": "4K"}."""
    out = {}
    for item in items or ():
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise ValueError(f"--where takes key=value, got {item!r}")
        out[key] = value
    return out


def marked_not_for_iqa(extra: Mapping[str, Any]) -> bool:
    """Whether a record says it is no IQA case: JSON `false`, or `false` in any case where typed
    columns (CSV) give text."""
    value = extra.get(FOR_IQA)
    return value is False or (isinstance(value, str) and value.strip().lower() == "false")


def not_for_iqa_note(count: int) -> str:
    """The terminal's one line on the records the default selection left out."""
    return (
        f"banana-tests: left out {count} record(s) marked for_iqa=false (reconstruction plans change"
        f" the image on purpose; as in the paper they are no IQA test cases); --banana-where={FOR_IQA}=false"
        " tests them"
    )


def _same(actual: Any, wanted: str) -> bool:
    if str(actual) == wanted:
        return True
    if isinstance(actual, bool) and wanted.strip().lower() == str(actual).lower():
        return True  # JSON true/false against the text of --where
    try:
        return float(actual) == float(wanted)
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Selection:
    """The records wanted. `steps` None means every step; the reference step is always kept."""

    variant: str = "replicate"
    seed_images: tuple[str, ...] = ()
    where: Mapping[str, str] = field(default_factory=dict)
    runs: int | None = None
    steps: tuple[int, ...] | None = None
    reference_step: int = 1

    def matches(self, seed_image: str, variant: str, extra: Mapping[str, Any]) -> bool:
        """Whether a record with these keys is wanted, whatever its step (and before the run cap)."""
        if variant != self.variant or (self.seed_images and seed_image not in self.seed_images):
            return False
        return self._fits(extra)

    def leaves_out_as_not_for_iqa(self, seed_image: str, variant: str, extra: Mapping[str, Any]) -> bool:
        """Whether a record is left out only because it is marked not for IQA (for the note)."""
        return (
            FOR_IQA not in self.where
            and marked_not_for_iqa(extra)
            and self.matches(seed_image, variant, {**extra, FOR_IQA: True})
        )

    def wants_step(self, step: int) -> bool:
        return self.steps is None or step in self.steps or step == self.reference_step

    def concerns(self, problem: Problem) -> bool:
        """Whether a bad record could be one this selection wants: each part of it that is known
        must match, and the parts that are not known could."""
        p = problem
        if p.variant not in (None, self.variant) or (p.step is not None and not self.wants_step(p.step)):
            return False
        if p.seed_image is not None and self.seed_images and p.seed_image not in self.seed_images:
            return False
        return p.extra is None or self._fits(p.extra)

    def _fits(self, extra: Mapping[str, Any]) -> bool:
        if FOR_IQA not in self.where and marked_not_for_iqa(extra):
            return False
        return all(key in extra and _same(extra[key], value) for key, value in self.where.items())

    def first_runs(self, runs: Mapping[str, Iterable[int]]) -> dict[str, set[int]] | None:
        """Each seed image's first `runs` runs (by run number) among those given; None: no cap."""
        if self.runs is None:
            return None
        return {seed: set(sorted(set(numbers))[: self.runs]) for seed, numbers in runs.items()}

    def describe_empty(
        self, variants: Sequence[str], seed_images: Sequence[str], not_for_iqa: int = 0
    ) -> str:
        """Why nothing was selected, with what the set does hold."""
        asked = [f"variant {self.variant!r}"]
        if self.seed_images:
            asked.append(f"seed image(s) {', '.join(self.seed_images)}")
        asked += [f"{k}={v}" for k, v in self.where.items()]
        return (
            f"no records of {', '.join(asked)}; variants present: {', '.join(variants) or '(none)'}; "
            f"seed images present: {', '.join(seed_images) or '(none)'}"
            + (f"; {not_for_iqa_note(not_for_iqa).removeprefix('banana-tests: ')}" if not_for_iqa else "")
        )


@dataclass(frozen=True)
class Loaded:
    """The selected records, the problems that could concern them, what the set holds overall,
    and the steps each selected (seed image, run) holds before the steps are selected."""

    records: list[Record]
    problems: list[Problem]
    variants: list[str]
    seed_images: list[str]
    held: Mapping[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)
    not_for_iqa: int = 0  # records left out only because they are marked "for_iqa": false


def cap_and_select(
    records: Sequence[Record],
    keys: Sequence[tuple[str, int, int]],
    problems: Sequence[Problem],
    selection: Selection,
    variants: list[str],
    seed_images: list[str],
    not_for_iqa: int,
) -> Loaded:
    """Cap the runs and select the steps of `records` (all steps or the wanted ones, with the
    keys of every step matching the rest of the selection), keeping the problems that could
    concern them. The run cap counts the runs bad records name too: a run whose every record
    is bad is still one of the first runs, and its cases say why."""
    concerned = [p for p in problems if selection.concerns(p)]
    runs: dict[str, set[int]] = {}
    for seed, run, _ in keys:
        runs.setdefault(seed, set()).add(run)
    for p in concerned:
        if p.seed_image is not None and p.run is not None:
            runs.setdefault(p.seed_image, set()).add(p.run)
    first = selection.first_runs(runs)

    def kept(seed: str | None, run: int | None) -> bool:
        return first is None or seed is None or run is None or run in first[seed]

    held: dict[tuple[str, int], set[int]] = {}
    for seed, run, step in keys:
        if kept(seed, run):
            held.setdefault((seed, run), set()).add(step)
    return Loaded(
        [r for r in records if kept(r.seed_image, r.run) and selection.wants_step(r.step)],
        [p for p in concerned if kept(p.seed_image, p.run)],
        variants,
        seed_images,
        {key: tuple(sorted(steps)) for key, steps in held.items()},
        not_for_iqa,
    )
