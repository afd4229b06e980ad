"""Problems found in the records as errors on the cases they could touch, and on no other:
a bad record never aborts the run, and never silently drops a case."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace

from banana_tests.cases import CaseKey, sort_key
from banana_tests.trajectories.plan import CasePlan
from banana_tests.trajectories.records import DataWarning, Problem
from banana_tests.trajectories.selection import Selection


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
