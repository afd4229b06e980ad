"""The degradation oracle's PSNR/SSIM figures for (reference, step) pairs: no metric, no model,
each reference's statistics built once while they fit, kept in the persistent score cache."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from banana_tests.scoring.cache import ScoreCache
from banana_tests.scoring.oracle import ORACLE_KEY, Change, Reference
from banana_tests.trajectories.images import ImageStore
from banana_tests.trajectories.records import DataError, Record

REFERENCE_BYTES = 64 * 2**20  # the oracle's latest references (a 64 px one is 96 KiB, a 2K one 100 MB)
ORACLE_CHUNK_BYTES = 4 * 2**20  # steps' luma per oracle pass; its float32 temporaries are a few times that

Pair = tuple[Record, Record]  # (reference, step)


class OracleFigures:
    """One worker's oracle figures, decoded through the worker's image store (the ScoreBook's),
    so the metrics and the oracle share decoded images."""

    def __init__(self, images: ImageStore, cache: ScoreCache | None = None) -> None:
        self.images = images
        self.cache = cache
        self._changes: dict[str, Change] = {}  # by 'reference sha256>step sha256'
        self._pair_changes: dict[Pair, Change] = {}  # the same, by the records checked for them
        self._references: dict[str, Reference] = {}  # the latest first-used last, by sha256
        self._reference_bytes = 0

    def changes(
        self, pairs: Sequence[Pair], companions: Mapping[Record, Sequence[Record]] | None = None
    ) -> list[Change]:
        """The degradation oracle's figures for (reference, step) record pairs. `companions` maps
        a reference record to every step the process will compare with it: a pair's figures
        come with theirs, in one pass over each reference's steps (a companion that cannot be
        read is left to its own case to report). Kept in the persistent cache under both files'
        sha256, so a fully cached run decodes no image for them either; the images are decoded
        through the store, with the suite's checks."""
        known = [c for pair in pairs if (c := self._pair_changes.get(pair)) is not None]
        if len(known) == len(pairs):  # the run's first case brought them: no digest or key to build
            return known
        digests = [(self.images.check(ref), self.images.check(step)) for ref, step in pairs]
        keys = [f"{ref}>{step}" for ref, step in digests]
        own = {k: pair for k, pair in zip(keys, pairs, strict=True) if k not in self._changes}
        todo = {**self._companions(own, companions or {}), **own}
        if todo and self.cache is not None:
            psnr, ssim = (self.cache.get(f"{ORACLE_KEY}/{name}", todo) for name in ("psnr", "ssim"))
            self._changes.update({k: Change(psnr[k], ssim[k]) for k in todo if k in psnr and k in ssim})
        by_reference: dict[Record, list[tuple[str, Record]]] = {}
        for key, (ref, step) in todo.items():
            if key not in self._changes:
                by_reference.setdefault(ref, []).append((key, step))
        for ref, steps in by_reference.items():
            fresh = self._measure(ref, steps, own)
            self._changes.update(fresh)
            if self.cache is not None and fresh:
                for name in ("psnr", "ssim"):
                    values = {k: float(getattr(c, name)) for k, c in fresh.items()}
                    self.cache.put(f"{ORACLE_KEY}/{name}", values, {"oracle": ORACLE_KEY})
        found = [self._changes[k] for k in keys]
        self._pair_changes.update(zip(pairs, found, strict=True))  # also pairs known by their bytes
        self._pair_changes.update((pair, self._changes[k]) for k, pair in todo.items() if k in self._changes)
        return found

    def _companions(
        self, own: Mapping[str, Pair], companions: Mapping[Record, Sequence[Record]]
    ) -> dict[str, Pair]:
        """The other steps of the references in `own` whose figures are not known yet, by key."""
        found = {}
        for ref in dict.fromkeys(ref for ref, _ in own.values()):
            ref_digest = self.images.check(ref)
            for step in companions.get(ref, ()):
                try:
                    key = f"{ref_digest}>{self.images.check(step)}"
                except DataError:
                    continue
                if key not in self._changes:
                    found[key] = (ref, step)
        return found

    def _measure(
        self, ref: Record, steps: Sequence[tuple[str, Record]], own: Container[str]
    ) -> dict[str, Change]:
        """The figures of one reference's steps, ORACLE_CHUNK_BYTES of luma at a time. A step of
        `own` that cannot be decoded raises its DataError; any other is left out."""
        reference = self._reference(self.images.check(ref), ref)
        per_chunk = max(1, ORACLE_CHUNK_BYTES // reference.luma.nbytes)
        fresh: dict[str, Change] = {}
        for start in range(0, len(steps), per_chunk):
            keys, images = [], []
            for key, step in steps[start : start + per_chunk]:
                try:
                    images.append(self.images.get(step))
                except DataError:
                    if key in own:
                        raise
                    continue
                keys.append(key)
            fresh.update(zip(keys, reference.changes(images), strict=True))
        return fresh

    def _reference(self, digest: str, record: Record) -> Reference:
        """The oracle's statistics of a reference image, kept while they fit REFERENCE_BYTES: the
        cases of one run follow each other, so most steps find theirs."""
        found = self._references.pop(digest, None)
        if found is None:
            found = Reference.of(self.images.get(record))
            self._reference_bytes += found.nbytes
        self._references[digest] = found
        while len(self._references) > 1 and self._reference_bytes > REFERENCE_BYTES:
            oldest = next(iter(self._references))  # the least recently used
            self._reference_bytes -= self._references.pop(oldest).nbytes
        return found
