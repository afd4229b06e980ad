"""From records to cases: which images each (metric, seed image, step[, run]) verdict needs.

Problems in the data (a missing reference step, duplicate records) become an error on the
cases they touch, named by record, while every other case still runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from banana_tests.cases import CaseKey
from banana_tests.trajectories import Record, by_key


@dataclass(frozen=True)
class CasePlan:
    """A case and the (reference, step) image pair of each run it averages over."""

    key: CaseKey
    reference_step: int
    pairs: tuple[tuple[Record, Record], ...] = ()
    error: str | None = None

    @property
    def records(self) -> list[Record]:
        return [r for pair in self.pairs for r in pair]


def parse_steps(text: str) -> list[int] | None:
    """`5,10,20` → [5, 10, 20]; `all` → None (every step present)."""
    if text.strip().lower() == "all":
        return None
    try:
        steps = sorted({int(s) for s in text.split(",") if s.strip()})
    except ValueError as exc:
        raise ValueError(f"--steps takes a comma list of integers or 'all', got {text!r}") from exc
    if not steps or min(steps) < 0:
        raise ValueError(f"--steps takes non-negative integers, got {text!r}")
    return steps


def plan_cases(
    records: Sequence[Record],
    metrics: Sequence[str],
    steps: Sequence[int] | None,
    reference_step: int,
    per_run: bool = False,
) -> list[CasePlan]:
    """Every case for `metrics` × seed images × `steps`, in a stable order."""
    index: dict[tuple[str, int, int], Record] = {}
    duplicates: dict[tuple[str, int], str] = {}
    for (seed, run, step), same in by_key(records):
        index[(seed, run, step)] = same[0]
        if len(same) > 1:
            where = "; ".join(f"{r.source} ({r.path.name})" for r in same)
            duplicates[(seed, run)] = f"duplicate records for {seed} run {run} step {step}: {where}"
    seeds = sorted({r.seed_image for r in records})
    shared: list[CasePlan] = []
    for seed in seeds:
        runs = sorted({run for (s, run, _) in index if s == seed})
        present = sorted({step for (s, _, step) in index if s == seed})
        wanted = [s for s in present if s != reference_step] if steps is None else list(steps)
        for step in wanted:
            for group in [[run] for run in runs] if per_run else [runs]:
                shared.append(_plan(index, duplicates, seed, group, step, reference_step, per_run))
    # Metric-major order: a serial run then builds each metric's model once.
    return [replace(p, key=replace(p.key, metric=metric)) for metric in metrics for p in shared]


def _plan(
    index: dict[tuple[str, int, int], Record],
    duplicates: dict[tuple[str, int], str],
    seed: str,
    runs: list[int],
    step: int,
    reference_step: int,
    per_run: bool,
) -> CasePlan:
    placeholder = CaseKey("", seed, step, runs[0] if per_run else None)
    errors = [duplicates[(seed, run)] for run in runs if (seed, run) in duplicates]
    missing = [
        f"{seed} run {run} has no step {s}"
        for run in runs
        for s in (reference_step, step)
        if (seed, run, s) not in index
    ]
    if missing:
        have = sorted({st for (sd, _, st) in index if sd == seed})
        errors.append("; ".join(missing) + f" (steps present: {have})")
    if errors:
        return CasePlan(placeholder, reference_step, error="; ".join(errors))
    pairs = tuple((index[(seed, run, reference_step)], index[(seed, run, step)]) for run in runs)
    return CasePlan(placeholder, reference_step, pairs)
