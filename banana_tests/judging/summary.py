"""First-acknowledgement steps per run and their mean ± std per seed image (the paper's measure:
from Holi at 20 ± 4 to Rice at 37 ± 8)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from banana_tests.judging.prompt import Verdict
from banana_tests.judging.run import Judgment
from banana_tests.markdown import table


@dataclass(frozen=True)
class RunResult:
    seed_image: str
    run: int
    first: int | None  # the first step that acknowledges the noise; None: none of those judged
    judged_up_to: int  # the last step judged in this run
    unclear: tuple[int, ...] = ()  # steps whose answer was neither yes nor no

    @property
    def first_text(self) -> str:
        return str(self.first) if self.first is not None else "none"

    @property
    def unclear_text(self) -> str:
        return ", ".join(map(str, self.unclear)) or "-"


@dataclass(frozen=True)
class SeedResult:
    seed_image: str
    firsts: tuple[int, ...]  # first-acknowledgement steps of the runs that have one
    runs: int

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.firsts) if self.firsts else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation over runs (n − 1); 0 for a single run."""
        return statistics.stdev(self.firsts) if len(self.firsts) > 1 else (0.0 if self.firsts else None)

    def text(self) -> str:
        if self.mean is None or self.std is None:
            return "never acknowledged"
        return f"{self.mean:.1f} ± {self.std:.1f}"


def per_run(judgments: Iterable[Judgment]) -> list[RunResult]:
    runs: dict[tuple[str, int], list[Judgment]] = {}
    for j in judgments:
        runs.setdefault((j.seed_image, j.run), []).append(j)
    out = []
    for (seed, run), steps in sorted(runs.items()):
        steps.sort(key=lambda j: j.step)
        acks = [j.step for j in steps if j.verdict is Verdict.ACKNOWLEDGES]
        unclear = tuple(j.step for j in steps if j.verdict is Verdict.UNCLEAR)
        out.append(RunResult(seed, run, min(acks) if acks else None, steps[-1].step, unclear))
    return out


def per_seed(runs: Iterable[RunResult]) -> list[SeedResult]:
    by_seed: dict[str, list[RunResult]] = {}
    for r in runs:
        by_seed.setdefault(r.seed_image, []).append(r)
    return [
        SeedResult(seed, tuple(r.first for r in rs if r.first is not None), len(rs))
        for seed, rs in sorted(by_seed.items())
    ]


def markdown(judgments: list[Judgment]) -> str:
    """The report section: mean ± std per seed image, then each run's first step."""
    runs = per_run(judgments)
    judges = sorted({f"{j.judge} ({j.model})" for j in judgments})
    lines = [
        "## Generator self-evaluation: first step whose reasoning summary acknowledges the noise",
        "",
        f"Judge: {', '.join(judges)}. Mean ± sample std over the runs that acknowledge it.",
        "",
        *table(
            ["seed image", "first acknowledgement", "runs acknowledging"],
            [[s.seed_image, s.text(), f"{len(s.firsts)} of {s.runs}"] for s in per_seed(runs)],
        ),
        "",
        *table(
            ["seed image", "run", "first step", "judged up to", "unclear answers at"],
            [[r.seed_image, r.run, r.first_text, r.judged_up_to, r.unclear_text] for r in runs],
        ),
    ]
    return "\n".join(lines) + "\n"
