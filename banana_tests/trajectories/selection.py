"""Which records a run uses: variant, seed images, metadata filters, a cap on runs, the steps; and
`Loaded`, what reading any source yields once every reader has applied them the same way.

Selection happens on metadata alone, before any image is fetched or decoded, so a 28,000-image
set tested at three steps costs three steps' worth of images. Bad records are selected the same
way, on whatever part of their identity they still show, and the problems that could concern the
selected records are kept with them.

Records marked `"for_iqa": false` (the paper's reconstruction plans, which change the image on
purpose) are never IQA test cases unless a `--banana-where` on `for_iqa` asks for them by name.

What a test sees of the selection is `Trajectories`, the public `banana_trajectories` fixture:
the selected records by (seed image, run, step), the reference step always included, read from
metadata only. A record's pixels are decoded when a test asks for them, through the worker's image
store, so a record scored and looked at is decoded once. A bad or missing record is a DataError
naming it when a test asks for it, and only then.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from banana_tests.trajectories.records import DataError, Problem, Record, by_key

if TYPE_CHECKING:
    from banana_tests.trajectories.images import ImageStore
    from metrics_under_test.protocol import Image


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


Key = tuple[str, int, int]  # (seed image, run, step)


class Trajectories:
    """The selected records. Iterating gives every one (duplicates too) sorted by (seed image,
    run, step)."""

    def __init__(
        self,
        records: Sequence[Record],
        problems: Sequence[Problem],
        images: ImageStore,
        source: str,
        variant: str,
        reference_step: int,
    ) -> None:
        self.source = source
        self.variant = variant
        self.reference_step = reference_step
        self.problems = tuple(problems)
        self._images = images
        self._records = sorted(records, key=lambda r: (r.seed_image, r.run, r.step))
        self._index: dict[Key, Record] = {}
        self._bad: dict[Key, str] = {}
        for key, same in by_key(records):
            self._index[key] = same[0]
            if len(same) > 1:
                where = "; ".join(f"{r.source} ({r.path.name})" for r in same)
                self._bad[key] = f"duplicate records for {key[0]} run {key[1]} step {key[2]}: {where}"
        for p in self.problems:
            if p.key is not None:
                self._bad[p.key] = "; ".join(filter(None, (self._bad.get(p.key), str(p))))

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._index and key not in self._bad

    @property
    def seed_images(self) -> list[str]:
        return sorted({seed for seed, _, _ in self._index})

    def runs(self, seed_image: str) -> list[int]:
        """The runs of `seed_image` the selection holds."""
        return sorted({run for seed, run, _ in self._index if seed == seed_image})

    def steps(self, seed_image: str | None = None) -> list[int]:
        """The steps held (of one seed image, or of any), the reference step included."""
        return sorted({step for seed, _, step in self._index if seed_image in (None, seed)})

    def record(self, seed_image: str, run: int, step: int) -> Record:
        """The record at (seed image, run, step); a DataError names it when it is missing,
        duplicated or bad."""
        key = (seed_image, run, step)
        if key in self._bad:
            raise DataError(self._bad[key])
        found = self._index.get(key)
        if found is None:
            if seed_image not in self.seed_images:
                raise DataError(
                    f"{self.source}: no seed image {seed_image!r} selected; "
                    f"the selection holds {', '.join(self.seed_images) or 'none'}"
                )
            held = sorted(s for sd, r, s in self._index if sd == seed_image and r == run)
            raise DataError(
                f"{seed_image} run {run} has no step {step} (the selection holds steps {held} of that run)"
            )
        return found

    def __getitem__(self, key: Key) -> Record:
        """`trajectories["brick", 0, 5]` is `trajectories.record("brick", 0, 5)`."""
        return self.record(*key)

    def pairs(self, seed_image: str, step: int, run: int | None = None) -> list[tuple[Record, Record]]:
        """(reference, step) records of each run of `seed_image` (or of `run` alone), as a
        shipped case pairs them: give them to `Scorer.delta`."""
        runs = self.runs(seed_image) if run is None else [run]
        if not runs:
            self.record(seed_image, 0, step)  # raises, naming what the selection holds
        ref = self.reference_step
        return [(self.record(seed_image, r, ref), self.record(seed_image, r, step)) for r in runs]

    def image(self, record: Record) -> Image:
        """The record's pixels, (H, W, 3) uint8 RGB, decoded on first use and checked as the suite
        checks them (sha256, pixel limit, 8-bit RGB)."""
        return self._images.get(record)
