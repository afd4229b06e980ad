"""The suite's session state, in one place: what was asked, what the data holds, what was scored."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from banana_tests.cases import CaseKey
from banana_tests.gaps import Gap, gap
from banana_tests.matrix import Matrix
from banana_tests.plan import CasePlan, parse_steps, plan_cases
from banana_tests.trajectories import DataError, read_imagefolder
from metrics_under_test.registry import MetricSpec, UnknownMetric, resolve
from metrics_under_test.weights import stage

if TYPE_CHECKING:
    from banana_tests.scoring import ScoreBook

DEFAULT_DATASET = Path(__file__).resolve().parent.parent / "fixtures" / "emulated"


@dataclass
class SuiteState:
    """Options as resolved once per process, the case plans, and this process's scores."""

    metrics: dict[str, MetricSpec]
    dataset: Path
    steps: list[int] | None
    reference_step: int
    variant: str
    per_run: bool
    device: str
    plans: dict[CaseKey, CasePlan] = field(default_factory=dict)
    matrix: Matrix = field(default_factory=Matrix)
    _book: ScoreBook | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> SuiteState:
        opt = config.getoption
        try:
            metrics = resolve(opt("metric"))
            steps = parse_steps(opt("steps"))
        except (UnknownMetric, ValueError) as exc:
            raise pytest.UsageError(str(exc)) from exc
        mirror = opt("weights_dir")
        if mirror:
            if not Path(mirror).is_dir():
                raise pytest.UsageError(f"--weights-dir {mirror}: no such directory")
            stage(Path(mirror), ((w.file, w.path) for s in metrics for w in s.weights))
        dataset = Path(opt("dataset")) if opt("dataset") else DEFAULT_DATASET
        return cls(
            metrics={s.name: s for s in metrics},
            dataset=dataset,
            steps=steps,
            reference_step=opt("reference_step"),
            variant=opt("variant"),
            per_run=opt("aggregate") == "per-run",
            device=opt("device"),
        )

    def collect(self) -> list[CasePlan]:
        """Read the data set and plan every case; a set that cannot be read stops collection."""
        if not self.plans:
            try:
                trajectories = read_imagefolder(self.dataset)
            except DataError as exc:
                raise pytest.UsageError(f"--dataset: {exc}") from exc
            records = trajectories.select(self.variant)
            if not records:
                raise pytest.UsageError(
                    f"--dataset {self.dataset}: no records of variant {self.variant!r}; "
                    f"variants present: {', '.join(trajectories.variants)}"
                )
            plans = plan_cases(records, list(self.metrics), self.steps, self.reference_step, self.per_run)
            self.plans = {p.key: p for p in plans}
        return list(self.plans.values())

    @property
    def book(self) -> ScoreBook:
        if self._book is None:
            from banana_tests.scoring import ScoreBook

            self._book = ScoreBook(resolve_device(self.device))
        return self._book

    def gap(self, key: CaseKey) -> Gap:
        """Δ for one case; scores every image its metric needs here on first use."""
        plan = self.plans[key]
        if plan.error:
            raise DataError(plan.error)
        spec = self.metrics[key.metric]
        upcoming = [r for p in self.plans.values() if p.key.metric == key.metric for r in p.records]
        refs = self.book.scores(spec, [a for a, _ in plan.pairs], upcoming)
        steps = self.book.scores(spec, [b for _, b in plan.pairs])
        return gap(spec.scale, refs, steps)


def resolve_device(device: str) -> str:
    """`auto` → cuda when available; asking for cuda where there is none is an error."""
    import torch

    has_cuda = torch.cuda.is_available()
    if device == "auto":
        return "cuda" if has_cuda else "cpu"
    if device == "cuda" and not has_cuda:
        raise RuntimeError("--device cuda: CUDA is not available on this machine")
    return device
