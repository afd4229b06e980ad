"""Control degradations: does a metric see the classical distortions it was built for?

The other half of the paper's story: a metric that ranks noisier, blurrier or more compressed
crops as worse here, yet misses iterative-editing degradation, fails on the editing trajectories
alone. hypothesis draws the crop and two strengths; the stronger must score worse (normalised).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from banana_tests.data import SEEDS
from banana_tests.distortions import DISTORTIONS, Array
from banana_tests.plugin import STATE, load_or_skip
from banana_tests.verdicts import fail_verdict
from metrics_under_test.protocol import Metric, check_scores
from metrics_under_test.registry import MetricSpec

MIN_GAP = 0.25  # strengths closer than this may legitimately tie
CROP = (160, 320)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "control_metric" in metafunc.fixturenames:
        pairs = [(m, d) for m in metafunc.config.stash[STATE].metrics for d in DISTORTIONS]
        metafunc.parametrize(("control_metric", "distortion"), pairs, ids=[f"{m}-{d}" for m, d in pairs])


@cache
def clean_images() -> dict[str, Array]:
    """The embedded set's seed images before any edit (shipped PNGs): clean, varied content."""
    from PIL import Image

    paths = sorted(SEEDS.glob("*.png"))
    if not paths:
        raise FileNotFoundError(f"{SEEDS}: no seed images; rebuild them with `banana-tests fixtures refresh`")
    return {p.stem: np.asarray(Image.open(p).convert("RGB")) for p in paths}


@dataclass(frozen=True)
class Crop:
    """A drawn crop, by seed image and box: hypothesis prints a falsifying example's arguments,
    and this repr keeps ~150,000 pixel values out of the report."""

    seed_image: str
    top: int
    left: int
    height: int
    width: int

    def __repr__(self) -> str:
        box = f"{self.top}:{self.top + self.height}, {self.left}:{self.left + self.width}"
        return f"{self.seed_image}[{box}] ({self.width}x{self.height})"

    @property
    def pixels(self) -> Array:
        box = (slice(self.top, self.top + self.height), slice(self.left, self.left + self.width))
        return np.ascontiguousarray(clean_images()[self.seed_image][box])


@cache
def metric(spec: MetricSpec, device: str) -> Metric:
    """Built once per worker; the offline metrics this runs in CI are small."""
    from banana_tests.scoring import load_metric

    return load_metric(spec, device)


@st.composite
def crops(draw: st.DrawFn) -> Crop:
    name = draw(st.sampled_from(sorted(clean_images())))
    height, width = clean_images()[name].shape[:2]
    h, w = draw(st.integers(*CROP)), draw(st.integers(*CROP))
    h, w = min(h, height), min(w, width)
    return Crop(name, draw(st.integers(0, height - h)), draw(st.integers(0, width - w)), h, w)


@st.composite
def strengths(draw: st.DrawFn) -> tuple[float, float]:
    low = draw(st.floats(0.0, 1.0 - MIN_GAP))
    return low, draw(st.floats(low + MIN_GAP, 1.0))


@seed(20260403)  # the same draws on every run, also after an edit (derandomize hashes the source)
@settings(
    deadline=None,
    max_examples=8,
    phases=(Phase.explicit, Phase.generate),  # no shrinking: each step rescoring would cost minutes
    suppress_health_check=[HealthCheck.too_slow],
)
@given(crop=crops(), levels=strengths(), noise_seed=st.integers(0, 2**16))
def test_detects_control_degradation(
    pytestconfig: pytest.Config,
    control_metric: str,
    distortion: str,
    crop: Crop,
    levels: tuple[float, float],
    noise_seed: int,
) -> None:
    state = pytestconfig.stash[STATE]
    spec = state.metrics[control_metric]
    score = load_or_skip(pytestconfig, spec, lambda: metric(spec, state.book.device))
    distort = DISTORTIONS[distortion]
    pixels = crop.pixels
    images = [distort(pixels, s, noise_seed) for s in levels]
    mild, strong = (spec.scale.normalise(v) for v in check_scores(spec.name, images, score(images)))
    if not strong < mild:
        fail_verdict(
            f"{control_metric} did not rank {distortion} at strength {levels[1]:.2f} below {levels[0]:.2f} "
            f"on the crop {crop!r} (noise seed {noise_seed}): normalised {strong:.2f} ≥ {mild:.2f}",
            f"normalised {strong:.2f} ≥ {mild:.2f}",
            pytestconfig,
        )
