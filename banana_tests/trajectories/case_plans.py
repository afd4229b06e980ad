"""From records to cases: which images each (metric, seed image, step[, run]) verdict needs, and
the problems found in the records as errors on the cases they could touch, and on no other.

Problems in the data (a missing reference step, duplicate records, a record that cannot be used)
become an error on the cases they touch, named by record, while every other case still runs: a
bad record never aborts the run, and never silently drops a case.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from banana_tests.cases import CaseKey, sort_key
from banana_tests.counts import whole_number
from banana_tests.trajectories.records import DataWarning, Problem, Record, by_key
from banana_tests.trajectories.selection import Selection

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


def with_problems(
    plans: list[CasePlan], problems: list[Problem], selection: Selection, metrics: list[str]
) -> list[CasePlan]:
    """Problems (those within the selection, as `load` returns them) as errors on the cases they
    could touch, and on no other case:

    - a problem whose whole identity is known (seed image, variant, run, step; and its other
      fields under --where) errors the cases that use that record: its step's cases and, at the
      reference step, every case of its run (of its seed image, for run means);
    - one that shows only part of its identity errors the cases that lack a record it could be;
    - a known record that no case uses gets error cases of its own: at its step, or at the
      steps tested when it is a reference (a seed image whose every record is bad, a run of its
      own under per-run cases, a step of its own under --steps all); so does any problem of a
      seed image that has no case at all;
    - any other is a DataWarning naming its file and line: no case lacks a record it could be.
    """
    found = _Attached(problems, selection)
    out = [found.on(plan) for plan in plans]
    planned = {p.key.seed_image for p in plans}
    per_run = any(p.key.run is not None for p in plans)
    tested = sorted({p.key.step for p in plans}) if selection.steps is None else list(selection.steps)
    reference = selection.reference_step
    own: dict[CaseKey, list[Problem]] = {}
    for p in found.orphans():
        if p.seed_image is None or (p.seed_image in planned and not found.definite(p)):
            warnings.warn(DataWarning(f"{p} (no case lacks the record it could be)"), stacklevel=2)
            continue
        steps = [p.step] if p.step is not None and (p.step != reference or not tested) else tested
        for step in steps or [reference]:
            for metric in metrics:
                own.setdefault(CaseKey(metric, p.seed_image, step, p.run if per_run else None), []).append(p)
    return out + [CasePlan(key, reference, error=_unusable(own[key])) for key in sorted(own, key=sort_key)]


class _Attached:
    """The problems indexed so each case finds those that touch it; remembers which found one."""

    def __init__(self, problems: Sequence[Problem], selection: Selection) -> None:
        self.problems = problems
        self.where = bool(selection.where)
        self.by_step: dict[tuple[str, int], list[Problem]] = {}  # whole identities
        self.partial: dict[str | None, list[Problem]] = {}  # by seed image, None when unknown
        for p in problems:
            if p.key is not None and self.definite(p):
                self.by_step.setdefault((p.key[0], p.key[2]), []).append(p)
            else:
                self.partial.setdefault(p.seed_image, []).append(p)
        self.used: set[Problem] = set()

    def definite(self, p: Problem) -> bool:
        """The record is known: all of its identity, and its other fields when --where asks."""
        return p.key is not None and (p.extra is not None or not self.where)

    def on(self, plan: CasePlan) -> CasePlan:
        key, reference = plan.key, plan.reference_step
        candidates = self.by_step.get((key.seed_image, key.step), [])
        if reference != key.step:
            candidates = candidates + self.by_step.get((key.seed_image, reference), [])
        touching = [p for p in candidates if key.run in (None, p.run)]
        if plan.missing:
            loose = self.partial.get(key.seed_image, []) + self.partial.get(None, [])
            touching += [p for p in loose if any(_could_be(p, run, step) for run, step in plan.missing)]
        if not touching:
            return plan
        self.used.update(touching)
        return replace(plan, pairs=(), error="; ".join([*filter(None, [plan.error]), _unusable(touching)]))

    def orphans(self) -> list[Problem]:
        return [p for p in self.problems if p not in self.used]


def _unusable(problems: Sequence[Problem]) -> str:
    return "unusable record(s): " + "; ".join(map(str, problems))


def _could_be(p: Problem, run: int, step: int) -> bool:
    return p.run in (None, run) and p.step in (None, step)
