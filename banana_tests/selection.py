"""Which records a run uses: variant, seed images, metadata filters, a cap on runs, the steps.

Selection happens on metadata alone, before any image is fetched or decoded, so a 28,000-image
set tested at three steps costs three steps' worth of images.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from banana_tests.trajectories import Record


def parse_where(items: Sequence[str] | None) -> dict[str, str]:
    """`["temperature=0.4", "resolution=4K"]` → {"temperature": "0.4", "resolution": "4K"}."""
    out = {}
    for item in items or ():
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise ValueError(f"--where takes key=value, got {item!r}")
        out[key] = value
    return out


def _same(actual: Any, wanted: str) -> bool:
    if str(actual) == wanted:
        return True
    try:
        return float(actual) == float(wanted)
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class Selection:
    """The records wanted. `steps` None means every step; the reference step is always kept."""

    variant: str = "replicate"
    seed_images: tuple[str, ...] = ()
    where: Mapping[str, str] = field(default_factory=dict)
    runs: int | None = None
    steps: tuple[int, ...] | None = None
    reference_step: int = 1

    def keeps(self, seed_image: str, variant: str, step: int, extra: Mapping[str, Any]) -> bool:
        """Whether a record with these keys is wanted (the run cap is applied afterwards)."""
        if variant != self.variant or (self.seed_images and seed_image not in self.seed_images):
            return False
        if self.steps is not None and step not in self.steps and step != self.reference_step:
            return False
        return all(key in extra and _same(extra[key], value) for key, value in self.where.items())

    def apply(self, records: Iterable[Record]) -> list[Record]:
        kept = [r for r in records if self.keeps(r.seed_image, r.variant, r.step, r.extra)]
        return self.cap_runs(kept)

    def cap_runs(self, records: list[Record]) -> list[Record]:
        """Keep each seed image's first `runs` runs (by run number)."""
        if self.runs is None:
            return records
        runs: dict[str, set[int]] = defaultdict(set)
        for r in records:
            runs[r.seed_image].add(r.run)
        first = {seed: set(sorted(numbers)[: self.runs]) for seed, numbers in runs.items()}
        return [r for r in records if r.run in first[r.seed_image]]

    def describe_empty(self, variants: Sequence[str], seed_images: Sequence[str]) -> str:
        """Why nothing was selected, with what the set does hold."""
        asked = [f"variant {self.variant!r}"]
        if self.seed_images:
            asked.append(f"seed image(s) {', '.join(self.seed_images)}")
        asked += [f"{k}={v}" for k, v in self.where.items()]
        return (
            f"no records of {', '.join(asked)}; variants present: {', '.join(variants) or '(none)'}; "
            f"seed images present: {', '.join(seed_images) or '(none)'}"
        )
