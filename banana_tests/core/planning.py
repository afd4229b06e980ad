"""The suite's case planning: which trajectories a run reads (`--dataset` or the trial sets), the
selected records, read once at collection, and the cases planned on them."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from banana_tests.cases import CaseKey
from banana_tests.core.settings import Settings
from banana_tests.core.usage_error import UsageError
from banana_tests.scoring.metric_calls import to_stderr
from banana_tests.trajectories.case_plans import CasePlan, plan_cases, with_problems
from banana_tests.trajectories.records import DataError, DataWarning, Problem, Record
from banana_tests.trajectories.selection import not_for_iqa_note
from banana_tests.trajectories.sources import SourceOptions, load
from metrics_under_test.extras import TAEF2, missing


@dataclass
class CasePlanning:
    """The selected records, read once at collection, and the cases planned on them."""

    settings: Settings
    metrics: tuple[str, ...]
    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # the bad lines that concern the selection
    plans: dict[CaseKey, CasePlan] = field(default_factory=dict)
    held: Mapping[tuple[str, int], tuple[int, ...]] = field(default_factory=dict)  # each (seed, run)'s steps
    # what the selected cases of a (metric, seed image) score: one scheduling group's records
    needs: dict[tuple[str, str], list[Record]] = field(default_factory=dict)
    # the steps the selected cases compare with each reference record (the oracle's)
    companions: dict[Record, list[Record]] = field(default_factory=dict)
    say: Callable[[str], None] = to_stderr  # a line on the terminal

    @functools.cached_property
    def source(self) -> SourceOptions:
        """The run's trajectory source, resolved once a process: under --artifact, the trial sets,
        built once into the image cache (banana_tests.editors.trial_sets); a set that cannot be
        rebuilt as shipped is a usage error."""
        settings = self.settings
        if not settings.artifacts:
            return settings.source
        from banana_tests.editors.trial_sets import TrialSetError, ensure
        from banana_tests.trajectories.records import Artifact

        absent = missing(f"--artifact={Artifact.VAE_ROUNDTRIP}", TAEF2)
        if Artifact.VAE_ROUNDTRIP in settings.artifacts and absent is not None:
            raise UsageError(absent)

        try:
            folder = ensure(settings.artifacts, settings.source.cache_dir)
        except (OSError, TrialSetError, ValueError) as exc:
            raise UsageError(f"--artifact={','.join(settings.artifacts)}: {exc}") from exc
        return replace(settings.source, source=str(folder))

    def collect(self) -> None:
        """Read the data set and plan every case, once; a set that cannot be read, or options it
        cannot satisfy, are a usage error."""
        if self.plans:
            return
        source, selection = self.source, self.settings.selection
        try:
            loaded = load(source, selection)
        except DataError as exc:
            raise UsageError(f"--dataset={source.source}: {exc}") from exc
        if not loaded.records and not loaded.problems:
            raise UsageError(
                f"--dataset={source.source}: "
                + selection.describe_empty(loaded.variants, loaded.seed_images, loaded.not_for_iqa)
            )
        if loaded.not_for_iqa and os.environ.get("PYTEST_XDIST_WORKER", "gw0") == "gw0":
            self.say(not_for_iqa_note(loaded.not_for_iqa))  # once a run: by gw0, the controller is quiet
        held = sorted({step for steps in loaded.held.values() for step in steps})
        self._check_steps(loaded.records, held)
        self.records, self.problems, self.held = loaded.records, loaded.problems, loaded.held
        self.plans = {p.key: p for p in self._planned(self.settings.per_run)}

    def _planned(self, per_run: bool) -> list[CasePlan]:
        selection, metrics = self.settings.selection, list(self.metrics)
        plans = plan_cases(
            self.records, metrics, selection.steps, selection.reference_step, per_run, held=self.held
        )
        return with_problems(plans, self.problems, selection, metrics)

    def run_means(self) -> list[CasePlan]:
        """The run-mean Δ plans, which a family over the steps (the trend) follows: the cases
        themselves unless per run."""
        if not self.settings.per_run:
            return list(self.plans.values())
        with warnings.catch_warnings():  # the cases' planning already warned
            warnings.simplefilter("ignore", DataWarning)
            return self._planned(False)

    def select(self, keys: Iterable[CaseKey]) -> None:
        """What the cases that will run need, once collection has chosen them: the first case of
        a (metric, seed image) scores the images of them all, and a run's first oracle figure
        computes the run's other steps too. Only theirs: `-k` or `--lf` on one case decodes that
        case's images."""
        self.needs = {}
        steps: dict[Record, dict[Record, None]] = {}
        for key in keys:
            plan = self.plans.get(key)
            if plan is None:
                continue
            self.needs.setdefault((key.metric, key.seed_image), []).extend(plan.records)
            for reference, step in plan.pairs:
                steps.setdefault(reference, {})[step] = None
        self.companions = {reference: list(found) for reference, found in steps.items()}

    def _check_steps(self, records: list[Record], held: list[int]) -> None:
        """Steps that no selected record has can never give a verdict: when that is the
        reference step or every step asked for, it is the options that are wrong. `held` is
        every step of the selected seed images and runs, before the steps were selected."""
        present = {r.step for r in records}
        steps, reference = self.settings.selection.steps, self.settings.selection.reference_step
        wanted_absent = steps is not None and not set(steps) & present
        if records and (reference not in present or wanted_absent):
            absent = [s for s in [*(steps or ()), reference] if s not in present]
            raise UsageError(
                f"--dataset={self.settings.source.source}: no selected record is at step(s) "
                f"{', '.join(map(str, absent))} (the data set holds steps {', '.join(map(str, held))}); "
                "see --steps and --reference-step"
            )
