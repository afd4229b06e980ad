"""What reading a source yields, whatever the source: the selected records, the problems that
could concern them, and the run cap and step selection every reader applies the same way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from banana_tests.trajectories.records import Problem, Record
from banana_tests.trajectories.selection import Selection


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
