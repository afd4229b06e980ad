"""A case's verdict: its gap, the failure message people read and the JUnit properties CI reads."""

from __future__ import annotations

from dataclasses import dataclass

from banana_tests.cases import CaseKey
from banana_tests.gaps import Gap


@dataclass(frozen=True)
class Verdict:
    key: CaseKey
    reference_step: int
    gap: Gap

    @property
    def detected(self) -> bool:
        return self.gap.detected

    def message(self) -> str:
        k, g = self.key, self.gap
        run = f"run {k.run}" if k.run is not None else f"the mean of {g.runs} run(s)"
        return (
            f"{k.metric} did not detect the degradation of {k.seed_image} at step {k.step}: "
            f"Δ{k.step} = {g.delta:+.3f} ≥ 0 ({run})\n"
            f"  step {self.reference_step:>3}: raw {g.score_reference:.4f}"
            f" → normalised {g.norm_reference:.2f}\n"
            f"  step {k.step:>3}: raw {g.score_step:.4f} → normalised {g.norm_step:.2f}"
        )

    def properties(self) -> dict[str, str]:
        """The gap as JUnit properties; `repr` keeps every digit so the XML rebuilds the matrix."""
        g = self.gap
        return {
            "delta": repr(g.delta),
            "score_reference": repr(g.score_reference),
            "score_step": repr(g.score_step),
            "norm_reference": repr(g.norm_reference),
            "norm_step": repr(g.norm_step),
            "runs": str(g.runs),
        }
