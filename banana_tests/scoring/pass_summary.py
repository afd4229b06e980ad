"""What a scoring pass outside pytest reports: each (metric, seed image) group as it is done, and
each metric's counts (cached, scored, unscored, or why it could not load)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

Group = tuple[str, str]  # (metric, seed image): the suite's scheduling group, a pass's unit of work


@dataclass(frozen=True)
class Progress:
    """One (metric, seed image) group done: `done` of `total` groups."""

    done: int
    total: int
    metric: str
    seed_image: str
    images: int
    seconds: float  # since scoring started


@dataclass(frozen=True)
class MetricSummary:
    """What one metric's selected images got. `failure` is why the metric could not load (none
    of its images scored); `skipped` when only `offline` or `all` chose it and its parameter
    files are missing, as the suite skips it."""

    metric: str
    images: int
    cached: int = 0
    scored: int = 0
    unscored: str | None = None  # one message naming every record without a score
    failure: str | None = None
    skipped: bool = False

    @property
    def complete(self) -> bool:
        return self.skipped or (self.failure is None and self.unscored is None)

    def line(self) -> str:
        if self.failure is not None or self.skipped:
            return f"{self.metric}: {'skipped' if self.skipped else 'failed'}: {self.failure}"
        text = f"{self.metric}: {self.images} images, {self.cached} from the cache, {self.scored} scored"
        return text if self.unscored is None else f"{text}; {self.unscored}"


@dataclass(frozen=True)
class ScoreSummary:
    """A scoring pass: each metric's counts, the cache file filled and the wall time."""

    metrics: tuple[MetricSummary, ...]
    cache: Path
    seconds: float
    problems: tuple[str, ...] = ()  # the selection's records that cannot be used, each named

    @property
    def complete(self) -> bool:
        """Every selected image has a score of every metric that could load (or was skipped), and
        every selected record could be used."""
        return not self.problems and all(m.complete for m in self.metrics)

    def lines(self) -> list[str]:
        return [m.line() for m in self.metrics]
