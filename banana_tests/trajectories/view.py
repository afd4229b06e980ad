"""The selected trajectory set as a test sees it: records by (seed image, run, step), images on demand.

What the public `banana_trajectories` fixture yields: the records that `--dataset`, `--variant`,
`--seed-image`, `--where`, `--runs` and `--steps` select (the reference step always included),
read from metadata only. A record's pixels are decoded when a test asks for them, through the
worker's image store, so a record scored and looked at is decoded once. A bad or missing record
is a DataError naming it when a test asks for it, and only then.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from banana_tests.trajectories.records import DataError, Problem, Record, by_key

if TYPE_CHECKING:
    from banana_tests.trajectories.images import ImageStore
    from metrics_under_test.protocol import Image

Key = tuple[str, int, int]  # (seed image, run, step)


class Trajectories:
    """The selected records. Iterating gives every one (duplicates too) sorted by (seed image,
    run, step)."""

    def __init__(
        self,
        records: Sequence[Record],
        problems: Sequence[Problem],
        images: ImageStore,
        source: str,
        variant: str,
        reference_step: int,
    ) -> None:
        self.source = source
        self.variant = variant
        self.reference_step = reference_step
        self.problems = tuple(problems)
        self._images = images
        self._records = sorted(records, key=lambda r: (r.seed_image, r.run, r.step))
        self._index: dict[Key, Record] = {}
        self._bad: dict[Key, str] = {}
        for key, same in by_key(records):
            self._index[key] = same[0]
            if len(same) > 1:
                where = "; ".join(f"{r.source} ({r.path.name})" for r in same)
                self._bad[key] = f"duplicate records for {key[0]} run {key[1]} step {key[2]}: {where}"
        for p in self.problems:
            if p.key is not None:
                self._bad[p.key] = "; ".join(filter(None, (self._bad.get(p.key), str(p))))

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Record]:
        return iter(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._index and key not in self._bad

    @property
    def seed_images(self) -> list[str]:
        return sorted({seed for seed, _, _ in self._index})

    def runs(self, seed_image: str) -> list[int]:
        """The runs of `seed_image` the selection holds."""
        return sorted({run for seed, run, _ in self._index if seed == seed_image})

    def steps(self, seed_image: str | None = None) -> list[int]:
        """The steps held (of one seed image, or of any), the reference step included."""
        return sorted({step for seed, _, step in self._index if seed_image in (None, seed)})

    def record(self, seed_image: str, run: int, step: int) -> Record:
        """The record at (seed image, run, step); a DataError names it when it is missing,
        duplicated or bad."""
        key = (seed_image, run, step)
        if key in self._bad:
            raise DataError(self._bad[key])
        found = self._index.get(key)
        if found is None:
            if seed_image not in self.seed_images:
                raise DataError(
                    f"{self.source}: no seed image {seed_image!r} selected; "
                    f"the selection holds {', '.join(self.seed_images) or 'none'}"
                )
            held = sorted(s for sd, r, s in self._index if sd == seed_image and r == run)
            raise DataError(
                f"{seed_image} run {run} has no step {step} (the selection holds steps {held} of that run)"
            )
        return found

    def __getitem__(self, key: Key) -> Record:
        """`trajectories["brick", 0, 5]` is `trajectories.record("brick", 0, 5)`."""
        return self.record(*key)

    def pairs(self, seed_image: str, step: int, run: int | None = None) -> list[tuple[Record, Record]]:
        """(reference, step) records of each run of `seed_image` (or of `run` alone), as a
        shipped case pairs them: give them to `Scorer.delta`."""
        runs = self.runs(seed_image) if run is None else [run]
        if not runs:
            self.record(seed_image, 0, step)  # raises, naming what the selection holds
        ref = self.reference_step
        return [(self.record(seed_image, r, ref), self.record(seed_image, r, step)) for r in runs]

    def image(self, record: Record) -> Image:
        """The record's pixels, (H, W, 3) uint8 RGB, decoded on first use and checked as the suite
        checks them (sha256, pixel limit, 8-bit RGB)."""
        return self._images.get(record)
