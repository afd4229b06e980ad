"""Invariance: does a metric give an image the same score whatever happens around it?

The complaints IQA users file most (IQA-PyTorch #178, #23, #122, #10) are scores that change with
the batch, the file format, from call to call, or with a shift or resize nobody would notice. A
metric with such a flaw moves the failure matrix for reasons that have nothing to do with
degradation. Each selected metric, a user's `module:callable` included, is checked on small crops
of the embedded seed images, one case per property: ids `[brisque-batch]`, `[brisque-shift]`, …

Crops are 96 px, or the metric's declared `min_side` when larger (at most `largest_side()`, which
the seed images allow). A check the metric cannot run (it raises on the crops, or its `min_side`
is past what the seed images allow) fails as its verdict, in one line naming the metric, the crop
size and the exception: a baseline can expect it like any other, so an unchanged metric can gate
green (docs/metrics.md, "Inputs a metric needs"). A fault of the metric's environment (a missing
file, no network: banana_tests.scoring.returned_scores) is an error instead, in one line too.

Same pixels (batch, repeat, png) must give the same score within a tiny tolerance; a 1-pixel
shift and a resize by a few percent are allowed a per-metric tolerance on the median change,
measured here (docs/matrix.md, "Invariance"). Changes are in normalised points (the [0, 100]
scale of the verdicts), so tolerances compare across metrics. Written on the public fixtures:
`banana_metric.call` for the calls the score cache must not answer (batch, repeat), and
`Scorer.scores` for the rest, so batching and cache are the suite's. Each check's measured change
is kept in the score cache (`Scorer.remembered`) under the metric's identity and the crop set's
(`crop_set`): a rerun builds no model and decodes no crop, and a changed metric is checked again.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from banana_tests.cases import Field
from banana_tests.data import SEEDS
from banana_tests.families.invariance import PARAM, Invariance
from banana_tests.session.scorer import MIN_SIDE_HINT, Scorer, cannot_check, raised
from banana_tests.verdicts.record import figure_properties
from banana_tests.verdicts.verdict import fail_verdict
from metrics_under_test.own_code import file_sha256
from metrics_under_test.spec import MetricSpec, Scale

if TYPE_CHECKING:
    from banana_tests.distortions import Array

SIDE = 96  # NIQE's smallest block; each crop costs ~0.1-0.3 CPU s per metric here
BATCH = 16
ALONE = 4  # members of the batch also scored alone, and twice for `repeat`
GEOMETRIC = 8  # crops shifted and resized
GROWTH = 101 / 96  # the resize: 96 -> 101 px, +5 %
SEED = 20261201


@dataclass(frozen=True)
class Tolerance:
    """Largest allowed change, in normalised points: `exact` for the same pixels (the largest
    change over the crops), `shift` and `resize` for the median change over the crops."""

    exact: float
    shift: float
    resize: float

    def of(self, invariance: Invariance) -> float:
        if invariance is Invariance.SHIFT:
            return self.shift
        if invariance is Invariance.RESIZE:
            return self.resize
        return self.exact


DEFAULT = Tolerance(exact=1e-3, shift=5.0, resize=5.0)
"""Any other metric, a user's own included: 1e-3 points is float roundoff on the [0, 100] scale;
5 points is a typical Δ of the paper, so a shift or resize that moves the median score more than
the degradation would swamp it."""
TOLERANCE = {
    # The median changes measured on these crops (brisque, niqe, piqe, ilniqe; docs/research/speed.md), ×1.5
    # for other machines and rounded up. Regression guards, not endorsements: BRISQUE and PIQE
    # move by about a typical Δ under a shift or resize (docs/matrix.md, "Invariance").
    # BRISQUE is scored one image per call: the same pixels score exactly the same.
    "brisque": Tolerance(exact=1e-6, shift=3.9, resize=5.9),  # measured 2.54, 3.92
    "niqe": Tolerance(exact=1e-6, shift=0.3, resize=0.7),  # measured 0.174, 0.432; float64
    # PIQE's 16 px blocks see a shifted or resized grid.
    "piqe": Tolerance(exact=1e-6, shift=6.7, resize=14.9),  # measured 4.43, 9.89
    # ILNIQE scores one image per call and resizes each crop to 524 px (measured once, serially).
    "ilniqe": Tolerance(exact=1e-6, shift=5.6, resize=3.1),  # measured 3.71, 2.04
}


def tolerance(spec: MetricSpec) -> Tolerance:
    """The measured tolerance of a shipped metric, else the default; a metric's own declared
    `invariance_points` replaces the shift and resize tolerances (the same pixels stay exact)."""
    found = TOLERANCE.get(spec.name, DEFAULT)
    if spec.invariance_points is None:
        return found
    return replace(found, shift=spec.invariance_points, resize=spec.invariance_points)


def crop_side(spec: MetricSpec) -> int:
    """The crops' side for a metric: 96 px, or its declared `min_side` when larger."""
    return max(SIDE, spec.min_side or 0)


@cache
def largest_side() -> int:
    """The largest crop side every seed image allows with room for a draw and the shift."""
    from banana_tests.distortions import clean_images

    return min(min(image.shape[0] - 1, image.shape[1] - 2) for image in clean_images().values())


@cache
def windows(side: int = SIDE) -> tuple[tuple[str, int, int], ...]:
    """(seed image, top, left) of BATCH crop windows of `side` px, two per seed image, drawn once
    from a seeded generator; each leaves room for the one-pixel shift."""
    import numpy as np

    from banana_tests.distortions import clean_images

    rng = np.random.default_rng(SEED)
    images = clean_images()
    names = sorted(images)
    out = []
    for i in range(BATCH):
        name = names[i % len(names)]
        height, width = images[name].shape[:2]
        out.append((name, int(rng.integers(height - side)), int(rng.integers(width - side - 1))))
    return tuple(out)


def crop(window: tuple[str, int, int], side: int = SIDE, shift: int = 0) -> Array:
    import numpy as np

    from banana_tests.distortions import clean_images

    name, top, left = window
    pixels = clean_images()[name][top : top + side, left + shift : left + shift + side]
    return np.ascontiguousarray(pixels)


def resized(image: Array) -> Array:
    """Bicubic, by GROWTH (+5 %)."""
    import numpy as np
    from PIL import Image

    side = round(image.shape[0] * GROWTH)
    return np.asarray(Image.fromarray(image).resize((side, side), Image.Resampling.BICUBIC))


def alone(scorer: Scorer, images: Sequence[Array]) -> list[float]:
    """Each image in a call of its own, straight to the model: the score cache would answer a
    second call, and the suite's batches would group crops of one size."""
    return [scorer.call([image])[0] for image in images]


def changes(scorer: Scorer, invariance: Invariance, folder: Path) -> list[float]:
    """|normalised score under the property − normalised score of the plain crop|, per crop."""
    side = crop_side(scorer.spec)
    crops = [crop(w, side) for w in windows(side)]
    if invariance is Invariance.BATCH:
        batched = scorer.call(crops)[:ALONE]
        pairs = list(zip(batched, alone(scorer, crops[:ALONE]), strict=True))
    elif invariance is Invariance.REPEAT:
        pairs = list(zip(alone(scorer, crops[:ALONE]), alone(scorer, crops[:ALONE]), strict=True))
    elif invariance is Invariance.PNG:
        from banana_tests.distortions import write_lossless

        # each PNG file and its lossless WebP twin in one call, so they share a batch
        twins = [
            [write_lossless(folder / f"crop{i}.{suffix}", c) for suffix in ("png", "webp")]
            for i, c in enumerate(crops[:ALONE])
        ]
        pairs = [(a, b) for a, b in map(scorer.scores, twins)]
    else:
        plain = crops[:GEOMETRIC]
        moved: list[Array] = (
            [crop(w, side, shift=1) for w in windows(side)[:GEOMETRIC]]
            if invariance is Invariance.SHIFT
            else [resized(c) for c in plain]
        )
        pairs = list(zip(scorer.scores(moved), scorer.scores(plain), strict=True))
    norm: Callable[[float], float] = scorer.normalise
    return [abs(norm(a) - norm(b)) for a, b in pairs]


@cache
def crop_set() -> str:
    """What an invariance check's change depends on besides the metric: the seed images' bytes,
    this module's code (windows, crop sizes, how each check is made), and the numpy and Pillow
    versions that draw the windows, resize and write the files. Read without decoding an image."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    for path in sorted(SEEDS.glob("*.png")):
        h.update(f"{path.name}\0".encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    h.update(" ".join(f"{n} {metadata.version(n)}" for n in ("numpy", "Pillow")).encode())
    return h.hexdigest()


def cache_name(scorer: Scorer, invariance: Invariance) -> str:
    """The check's name in the score cache, beside the metric's identity; the normalisation (its
    figures and its code) and the crop side are in it as the change is measured in normalised
    points on those crops (the cache stores raw scores otherwise: banana_tests.scoring.score_identity)."""
    figures = [scorer.scale.low, scorer.scale.high, scorer.scale.lower_better]
    side = crop_side(scorer.spec)
    scale = json.dumps(figures if side == SIDE else [*figures, side])
    digest = hashlib.sha256(f"{crop_set()}\0{scale}\0{normalisation_code()}".encode()).hexdigest()
    return f"invariance/{invariance.value}/{digest}"


@cache
def normalisation_code() -> str:
    """The sha256 of the normalisation's code (metrics_under_test.spec)."""
    return file_sha256(Path(inspect.getfile(Scale)))


def measured_change(scorer: Scorer, invariance: Invariance, folder: Path) -> float:
    """The change a check is judged on: the largest over the crops for the same pixels, else the
    median (a shift or resize moves some crops more than others)."""
    found = changes(scorer, invariance, folder)
    return max(found) if invariance.same_pixels else statistics.median(found)


def crops_of(invariance: Invariance) -> int:
    """How many crops a check measures."""
    return GEOMETRIC if invariance in (Invariance.SHIFT, Invariance.RESIZE) else ALONE


@pytest.mark.parametrize(PARAM, list(Invariance), ids=[i.value for i in Invariance])
def test_score_is_invariant(
    request: pytest.FixtureRequest,
    banana_metric: Scorer,
    banana_invariance: Invariance,
    tmp_path: Path,
) -> None:
    """Its identity (metric, check) is recorded at collection (session.reporter); its figures here."""
    invariance = banana_invariance
    limit = tolerance(banana_metric.spec).of(invariance)
    side = crop_side(banana_metric.spec)
    figures = {Field.CROP_SIDE: str(side), Field.TOLERANCE: repr(limit)}
    if side > SIDE and side > largest_side():  # the default side fits: no seed image decoded
        cannot_run(request, banana_metric, invariance, figures, None)
    name = cache_name(banana_metric, invariance)
    try:
        change, cached = banana_metric.remembered(
            name, lambda: measured_change(banana_metric, invariance, tmp_path)
        )
    except pytest.exit.Exception:
        raise  # the run stops (a metric's sys.exit): no verdict
    except Exception as exc:  # one line: an error for its environment's fault, else its verdict
        if banana_metric.book.models.load_failed(banana_metric.spec):
            raise  # it cannot load at all: no verdict, an error (session.scorer.load_or_skip)
        cannot_run(request, banana_metric, invariance, figures, exc)
    figures.update({Field.CHANGE: repr(change), Field.SCORE_CACHED: str(cached).lower()})
    request.node.user_properties.extend(figure_properties(figures))
    if not change <= limit:  # nan included
        measure = "largest" if invariance.same_pixels else "median"
        pytest.fail(
            f"{banana_metric.name} is not {invariance.value}-invariant: the {measure} change of the "
            f"normalised score over {crops_of(invariance)} crops of {side} px is {change:.4g} points, "
            f"not within its tolerance {limit:.4g}",
            pytrace=False,
        )


def cannot_run(
    request: pytest.FixtureRequest,
    scorer: Scorer,
    invariance: Invariance,
    figures: dict[Field, str],
    exc: Exception | None,
) -> NoReturn:
    """End the case in one line, naming the metric, the crop size and what the metric raised
    (`exc`: see session.scorer), or, with None, the `min_side` that no crop of the seed
    images reaches: a failing verdict."""
    side = int(figures[Field.CROP_SIDE])
    check, where = f"{invariance.value}-invariance", f"crops of {side} px"
    if exc is not None:
        figures[Field.RAISED] = raised(exc)
        request.node.user_properties.extend(figure_properties(figures))
        cannot_check(scorer.name, check, where, exc, (side, side), scorer.spec.min_side, request.config)
    too_large = f"its min_side {side} px is larger than the seed images allow ({largest_side()} px)"
    figures[Field.RAISED] = too_large
    request.node.user_properties.extend(figure_properties(figures))
    fail_verdict(
        f"{scorer.name} cannot be checked for {check} on {where}: {too_large}; {MIN_SIDE_HINT}",
        f"cannot be checked on {where}: {too_large}",
        request.config,
    )
