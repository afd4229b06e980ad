"""From records to cases: which images each (metric, seed image, step[, run]) verdict needs.

Problems in the data (a missing reference step, duplicate records) become an error on the
cases they touch, named by record, while every other case still runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from banana_tests.cases import CaseKey
from banana_tests.counts import whole_number
from banana_tests.trajectories.records import Record, by_key

Held = Mapping[tuple[str, int], Sequence[int]]  # (seed image, run) -> the steps the data set holds


@dataclass(frozen=True)
class CasePlan:
    """A case and the (reference, step) image pair of each run it averages over; `missing` is
    each (run, step) it needs that the data lacks."""

    key: CaseKey
    reference_step: int
    pairs: tuple[tuple[Record, Record], ...] = ()
    error: str | None = None
    missing: tuple[tuple[int, int], ...] = ()

    @property
    def records(self) -> list[Record]:
        return [r for pair in self.pairs for r in pair]


def parse_steps(text: str) -> list[int] | None:
    """`5,10,20` → [5, 10, 20]; `all` → None (every step present)."""
    if text.strip().lower() == "all":
        return None
    try:
        steps = sorted({whole_number("--steps", s.strip(), 0) for s in text.split(",") if s.strip()})
    except ValueError as exc:
        raise ValueError(
            f"--steps takes a comma list of whole numbers (digits 0-9) or 'all', got {text!r}"
        ) from exc
    if not steps:
        raise ValueError(f"--steps takes a comma list of whole numbers (digits 0-9) or 'all', got {text!r}")
    return steps


def plan_cases(
    records: Sequence[Record],
    metrics: Sequence[str],
    steps: Sequence[int] | None,
    reference_step: int,
    per_run: bool = False,
    held: Held | None = None,
) -> list[CasePlan]:
    """Every case for `metrics` × seed images × `steps`, in a stable order. `held` is what the
    data set holds before the steps were selected (`loaded.Loaded.held`), so a missing step is
    told against it; by default, what `records` hold."""
    index: dict[tuple[str, int, int], Record] = {}
    duplicates: dict[tuple[str, int, int], str] = {}
    for (seed, run, step), same in by_key(records):
        index[(seed, run, step)] = same[0]
        if len(same) > 1:
            where = "; ".join(f"{r.source} ({r.path.name})" for r in same)
            duplicates[(seed, run, step)] = f"duplicate records for {seed} run {run} step {step}: {where}"
    held = _held(records) if held is None else held
    runs_of: dict[str, list[int]] = {}
    for seed, run in sorted(held):
        runs_of.setdefault(seed, []).append(run)
    shared: list[CasePlan] = []
    for seed, runs in runs_of.items():
        present = sorted({step for run in runs for step in held[(seed, run)]})
        wanted = [s for s in present if s != reference_step] if steps is None else list(steps)
        for step in wanted:
            for group in [[run] for run in runs] if per_run else [runs]:
                shared.append(_plan(index, duplicates, held, seed, group, step, reference_step, per_run))
    # Metric-major order: a serial run then builds each metric's model once.
    return [replace(p, key=replace(p.key, metric=metric)) for metric in metrics for p in shared]


def _held(records: Sequence[Record]) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], set[int]] = {}
    for r in records:
        out.setdefault((r.seed_image, r.run), set()).add(r.step)
    return {key: sorted(steps) for key, steps in out.items()}


def _plan(
    index: Mapping[tuple[str, int, int], Record],
    duplicates: Mapping[tuple[str, int, int], str],
    held: Held,
    seed: str,
    runs: list[int],
    step: int,
    reference_step: int,
    per_run: bool,
) -> CasePlan:
    """The case's pairs, or the error naming each record it lacks (with the steps that run does
    hold) and each duplicate it would use."""
    key = CaseKey("", seed, step, runs[0] if per_run else None)
    needed = [(run, s) for run in runs for s in dict.fromkeys((reference_step, step))]
    errors = list(dict.fromkeys(duplicates[(seed, *n)] for n in needed if (seed, *n) in duplicates))
    missing = tuple(n for n in needed if (seed, *n) not in index)
    for run in dict.fromkeys(run for run, _ in missing):
        lacks = " and no step ".join(str(s) for r, s in missing if r == run)
        have = sorted(held.get((seed, run), ()))
        errors.append(f"{seed} run {run} has no step {lacks} (the data set holds steps {have} of that run)")
    if errors:
        return CasePlan(key, reference_step, error="; ".join(errors), missing=missing)
    pairs = tuple((index[(seed, run, reference_step)], index[(seed, run, step)]) for run in runs)
    return CasePlan(key, reference_step, pairs)
