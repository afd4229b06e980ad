"""The Δ family, the failure matrix: does each metric score the edited image worse than the
reference step? Its descriptor, settings (`--strict-runs`) and verdict here; the cases in
`test_degradation`, the matrix's own report sections in `matrix_sections`, the run's saturation
warning in `saturation`.

It is the suite's frame, not one family among others: its key (banana_tests.cases.CaseKey) is the
unit the planning, the shards, the score cache and the baseline are built on, and its cells are
the matrix every output shows. So the core names it, and its folder is the one that cannot be
deleted; the registry lists it for its test module, its option and its run facts, as any family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from banana_tests.cases import CASE_FIXTURE, CaseKey, Field
from banana_tests.families.family import AddOption, OptionValue, Place, RunSettings
from banana_tests.verdicts.gaps import Gap, StrictOutcome
from banana_tests.verdicts.matrix import Outcome

NAME = "degradation"


@dataclass(frozen=True)
class DegradationSettings:
    """`--strict-runs`: a cell's verdict from the sign of its whole run range (verdicts.gaps)."""

    strict_runs: bool = False

    def facts(self) -> tuple[tuple[str, str], ...]:
        return (("strict_runs", str(self.strict_runs).lower()),)

    @classmethod
    def of(cls, settings: RunSettings) -> DegradationSettings:
        found = settings.families.get(NAME)
        return found if isinstance(found, cls) else cls()


class DegradationFamily:
    """The Δ family's descriptor (banana_tests.families.family.Family): collected in every run, a
    case per planned key (`banana_case`, parametrized by the plugin from the run's planning)."""

    name = NAME
    module = Path(__file__).resolve().with_name("test_degradation.py")
    option = None
    params = frozenset({CASE_FIXTURE})
    shard_facts: Mapping[str, str] = {}
    run_facts: Mapping[str, str] = {"strict_runs": "--strict-runs"}
    ini: Mapping[str, str] = {}
    plugin = None

    def add_options(self, addoption: AddOption) -> None:
        addoption(
            "--strict-runs",
            action="store_true",
            default=False,
            help="a cell fails only when every run's Δ is ≥ 0 and passes only when every run's is < 0; "
            "a cell whose runs disagree in sign is UNRESOLVED (default: the run mean's sign decides)",
        )

    def read_settings(self, value: OptionValue, place: Place) -> DegradationSettings:
        return DegradationSettings(bool(value("strict-runs")))


FAMILY = DegradationFamily()


@dataclass(frozen=True)
class Verdict:
    """A Δ case's verdict: its gap, the failure message people read and the JUnit properties CI
    reads. `strict` (--banana-strict-runs): the sign of the whole run range decides, not the mean's."""

    key: CaseKey
    reference_step: int
    gap: Gap
    strict: bool = False

    @property
    def outcome(self) -> StrictOutcome:
        if self.strict:
            return self.gap.spread.strict
        return StrictOutcome.DETECTED if self.gap.detected else StrictOutcome.MISSED

    @property
    def detected(self) -> bool:
        """False only for a miss: an unresolved cell is skipped before a test sees it."""
        return self.outcome is not StrictOutcome.MISSED

    @property
    def unresolved(self) -> bool:
        return self.outcome is StrictOutcome.UNRESOLVED

    def runs_text(self) -> str:
        """The runs' Δs and their range, e.g. `runs Δ -1.20, +0.40, -0.30 in [-1.20, +0.40]`."""
        s = self.gap.spread
        values = ", ".join(f"{d:+.2f}" for d in s.deltas)
        low, high = s.interval
        return f"runs Δ {values} in [{low:+.2f}, {high:+.2f}]"

    def unresolved_reason(self) -> str:
        k = self.key
        return (
            f"{Outcome.UNRESOLVED.value}: {k.metric} on {k.seed_image} at step {k.step}: "
            f"the runs disagree in sign ({self.runs_text()}), so the run range straddles 0"
        )

    def message(self) -> str:
        """One line: metric, seed image, step, Δ, both raw and both normalised scores."""
        k, g = self.key, self.gap
        run = f"run {k.run}" if k.run is not None else f"the mean of {g.runs} run(s)"
        if self.strict:
            run += f"; {self.runs_text()}"
        return (
            f"{k.metric} did not detect the degradation of {k.seed_image} at step {k.step}: "
            f"Δ{k.step} = {g.delta:+.3f} ≥ 0 ({run}); "
            f"step {self.reference_step:>3}: raw {g.score_reference:.4f}"
            f" → normalised {g.norm_reference:.2f}, "
            f"step {k.step:>3}: raw {g.score_step:.4f} → normalised {g.norm_step:.2f}"
        )

    def summary(self) -> str:
        if self.strict:
            return f"Δ{self.key.step} ≥ 0 in every run ({self.runs_text()})"
        return f"Δ{self.key.step} = {self.gap.delta:+.3f} ≥ 0"

    def properties(self) -> dict[Field, str]:
        """The gap as record figures; `repr` keeps every digit so the XML rebuilds the matrix."""
        g = self.gap
        return {
            Field.DELTA: repr(g.delta),
            Field.SCORE_REFERENCE: repr(g.score_reference),
            Field.SCORE_STEP: repr(g.score_step),
            Field.NORM_REFERENCE: repr(g.norm_reference),
            Field.NORM_STEP: repr(g.norm_step),
            Field.RUNS: str(g.runs),
            **self.spread_properties(),
        }

    def spread_properties(self) -> dict[Field, str]:
        """Each run's normalised scores, from which its Δ, their spread and range follow (7
        significant digits: the JUnit file stays small; Δ itself keeps every digit)."""
        g = self.gap
        if not g.run_norm_references:
            return {}
        out = {
            Field.RUN_NORM_REFERENCES: " ".join(f"{n:.7g}" for n in g.run_norm_references),
            Field.RUN_NORM_STEPS: " ".join(f"{n:.7g}" for n in g.run_norm_steps),
        }
        if self.strict:
            out[Field.STRICT] = g.spread.strict.value
        return out
