"""The degradation oracle: how far a step moved from its run's reference image, by pixels alone.

A no-reference metric is blamed for Δ ≥ 0 only if the step really changed. PSNR and SSIM against
the reference step of the same run need no weights, so the suite computes them itself (SSIM as
Wang et al. 2004: Gaussian window σ = 1.5 truncated at 11 px, K1 = 0.01, K2 = 0.03, on BT.601
luma; its statistics in float32, which halves the filtering and moves the index by under 1e-6).
A step whose RMS difference from the reference is under one grey level (PSNR at or above
UNCHANGED_PSNR) did not measurably change, and its case is not a valid trial. A worker's figures for
(reference, step) pairs (`OracleFigures`) build each reference's statistics once while they fit,
and are kept in the persistent score cache.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from banana_tests.cases import CaseKey, Field
from banana_tests.scoring.score_cache import ORACLE_KEY, ScoreCache
from banana_tests.trajectories.images import ImageStore
from banana_tests.trajectories.records import DataError, Record

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


PEAK = 255.0
UNCHANGED_PSNR = 20 * math.log10(PEAK / 1.0)  # 48.13 dB: RMS error of one grey level
C1, C2 = (0.01 * PEAK) ** 2, (0.03 * PEAK) ** 2  # SSIM's stabilising constants (K1 = 0.01, K2 = 0.03)


@dataclass(frozen=True)
class Change:
    """A step against its reference: PSNR in dB (inf when identical) and SSIM in [-1, 1]."""

    psnr: float
    ssim: float

    @property
    def valid_trial(self) -> bool:
        return self.psnr < UNCHANGED_PSNR


NOT_A_VALID_TRIAL = "not a valid trial"
"""How an unchanged step's skip reason starts, for people reading it."""


@dataclass(frozen=True)
class Trial:
    """One case's steps against their reference, one `Change` per run. The case is a trial of
    the metric when at least one run's step measurably changed."""

    changes: tuple[Change, ...]

    @property
    def valid(self) -> bool:
        return any(c.valid_trial for c in self.changes)

    def properties(self) -> dict[Field, str]:
        return {
            Field.PSNR: " ".join(f"{c.psnr:.5g}" for c in self.changes),
            Field.SSIM: " ".join(f"{c.ssim:.5g}" for c in self.changes),
        }

    def reason(self, key: CaseKey, reference_step: int) -> str:
        psnrs = ", ".join(f"{c.psnr:.1f}" for c in self.changes)
        return (
            f"{NOT_A_VALID_TRIAL}: {key.seed_image} at step {key.step} did not measurably change from "
            f"step {reference_step} (PSNR {psnrs} dB ≥ {UNCHANGED_PSNR:.2f}, under one grey level RMS), "
            f"so {key.metric} is not on trial there"
        )


def valid_trial(psnr_figure: str) -> bool:
    """From a record's PSNR figure (space-separated, one per run); true when it has none."""
    values = [float(v) for v in psnr_figure.split()]
    return not values or any(v < UNCHANGED_PSNR for v in values)


class Reference:
    """A reference step's luma and its local statistics, computed once for every step compared
    with it (a run's steps share one reference)."""

    def __init__(self, luma: NDArray[np.float64]) -> None:
        import numpy as np

        self.luma = luma  # float64, for PSNR
        self.single = luma.astype(np.float32)  # SSIM's precision
        self.mean, square_mean = _blur(np.stack([self.single, self.single * self.single]))
        self.mean_square_c1 = self.mean * self.mean + C1  # μa² + c1
        self.variance_c2 = square_mean - self.mean * self.mean + C2  # σa² + c2
        self.nbytes = luma.nbytes + 4 * self.single.nbytes

    @classmethod
    def of(cls, rgb: NDArray[np.uint8]) -> Reference:
        """From an (H, W, 3) uint8 image."""
        return cls(_luma(rgb))

    def changes(self, steps: Sequence[NDArray[np.uint8]]) -> list[Change]:
        """Each (H, W, 3) uint8 step against the reference, in one pass of the filters over all of
        them. A step of another size is resized to the reference's (editors crop)."""
        import numpy as np

        height, width = self.luma.shape
        lumas = np.stack([_luma(_resized(step, width, height)) for step in steps])
        ssims = self._ssims(lumas)
        return [Change(psnr(self.luma, luma), ssim) for luma, ssim in zip(lumas, ssims, strict=True)]

    def change(self, step: NDArray[np.uint8]) -> Change:
        return self.changes([step])[0]

    def ssim(self, other: NDArray[np.float64]) -> float:
        return self._ssims(other[None])[0]

    def _ssims(self, others: NDArray[np.float64]) -> list[float]:
        """SSIM of each (H, W) luma plane of `others` against the reference's, in float32; each
        plane's mean taken on its own (in float64), so a step's figure does not depend on what it
        was batched with."""
        import numpy as np

        n = len(others)
        single = others.astype(np.float32)
        blurred = _blur(np.concatenate([single, single * single, self.single * single]))
        mu_a, mu_b, sq_b, ab = self.mean, blurred[:n], blurred[n : 2 * n], blurred[2 * n :]
        var_b = sq_b - mu_b**2
        cov = ab - mu_a * mu_b
        index = ((2 * mu_a * mu_b + C1) * (2 * cov + C2)) / (
            (self.mean_square_c1 + mu_b**2) * (self.variance_c2 + var_b)
        )
        return [float(np.mean(plane, dtype=np.float64)) for plane in index]


def change(reference: NDArray[np.uint8], step: NDArray[np.uint8]) -> Change:
    """Both (H, W, 3) uint8; a step of another size is resized to the reference's (editors crop)."""
    return Reference.of(reference).change(step)


def psnr(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    import numpy as np

    mse = float(np.mean((a - b) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(PEAK**2 / mse)


def ssim(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    """SSIM of two luma planes of one size."""
    return Reference(a).ssim(b)


SIGMA, RADIUS = 1.5, 5  # gaussian_filter(sigma=1.5, truncate=3.5): int(3.5 * 1.5 + 0.5), an 11x11 window
BAND_ROWS = 32  # output rows of one matrix product
BAND_COLUMNS = 128  # columns of one product: numpy's OpenBLAS runs products above ~262k
# multiply-adds on every core, whose threads then spin; these stay on the caller's thread


@cache
def _band() -> NDArray[np.float32]:
    """The Gaussian as a (BAND_ROWS, BAND_ROWS + 2·RADIUS) matrix: row i holds the kernel from column i."""
    import numpy as np

    x = np.arange(-RADIUS, RADIUS + 1)
    kernel = np.exp(-0.5 / (SIGMA * SIGMA) * x**2)
    kernel /= kernel.sum()
    band = np.zeros((BAND_ROWS, BAND_ROWS + 2 * RADIUS), dtype=np.float32)
    for row in range(BAND_ROWS):
        band[row, row : row + 2 * RADIUS + 1] = kernel
    return band


def _blur(planes: NDArray[np.float32]) -> NDArray[np.float32]:
    """scipy's `gaussian_filter(plane, sigma=1.5, truncate=3.5)` of each plane, to float32's
    rounding: its two passes, each over all planes at once (every statistic of a run's steps),
    as matrix products. Half the time of scipy's `correlate1d` from 64 px to 2K, and no scipy
    import (0.35 s). The BLAS's order of summation may move the last bits between machines:
    SSIM's fifth digit at most, and SSIM decides nothing (PSNR decides a valid trial)."""
    import numpy as np

    rows = _blur_columns(planes)
    return np.ascontiguousarray(_blur_columns(rows.transpose(0, 2, 1)).transpose(0, 2, 1))


def _blur_columns(planes: NDArray[np.float32]) -> NDArray[np.float32]:
    """Each (H, W) plane blurred down its columns, BAND_ROWS output rows per product over a
    window of BAND_ROWS + 2·RADIUS input rows; borders reflected as scipy's mode 'reflect'."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    count, height, width = planes.shape
    blocks = -(-height // BAND_ROWS)
    tail = RADIUS + blocks * BAND_ROWS - height  # rows past RADIUS only feed rows that are cut off
    padded = np.pad(planes, ((0, 0), (RADIUS, tail), (0, 0)), mode="symmetric")
    windows = sliding_window_view(padded, BAND_ROWS + 2 * RADIUS, axis=1)[:, ::BAND_ROWS].swapaxes(-1, -2)
    out = np.empty((count, blocks, BAND_ROWS, width), dtype=np.float32)
    for start in range(0, width, BAND_COLUMNS):
        end = start + BAND_COLUMNS
        np.matmul(_band(), windows[..., start:end], out=out[..., start:end])
    return out.reshape(count, blocks * BAND_ROWS, width)[:, :height]


def _luma(rgb: NDArray[np.uint8]) -> NDArray[np.float64]:
    import numpy as np

    weights = np.array([0.299, 0.587, 0.114])
    return rgb.astype(np.float64) @ weights


def _resized(rgb: NDArray[np.uint8], width: int, height: int) -> NDArray[np.uint8]:
    if rgb.shape[:2] == (height, width):
        return rgb
    import numpy as np
    from PIL import Image

    return np.asarray(Image.fromarray(rgb).resize((width, height), Image.Resampling.BICUBIC))


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
