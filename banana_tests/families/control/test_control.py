"""Control degradations: does a metric see the classical distortions it was built for?

The other half of the paper's story: a metric that ranks noisier, blurrier or more compressed
crops as worse here, yet misses iterative-editing degradation, fails on the editing trajectories
alone. Eight crops of the clean seed images, each with two strengths, are drawn once from a seeded
generator and run as hypothesis's explicit examples; the stronger must score worse (normalised).
Written on the public fixtures: each metric's `Scorer` from `banana_metrics` scores the crops.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any

import numpy as np
import pytest
from _pytest.outcomes import Exit  # `pytest.exit.Exception`, an Exception: the scorer's answer to a sys.exit
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from banana_tests.distortions import CROP, DISTORTIONS, Crop, clean_images
from banana_tests.session.ownership import STATE
from banana_tests.session.scorer import NoVerdict, Scorer, cannot_check
from banana_tests.verdicts.verdict import clipped_tie, fail_verdict

MIN_GAP = 0.25  # strengths closer than this may legitimately tie


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "control_metric" in metafunc.fixturenames:
        pairs = [(m, d) for m in metafunc.config.stash[STATE].metrics for d in DISTORTIONS]
        metafunc.parametrize(("control_metric", "distortion"), pairs, ids=[f"{m}-{d}" for m, d in pairs])


EXAMPLES = 8
SEED = 20260403


def drawn_examples(count: int = EXAMPLES, seed: int = SEED) -> list[dict[str, Any]]:
    """The crops, strengths and noise seeds every run tries, drawn once from a seeded generator.

    Not drawn by hypothesis: its generation mixes in constants from every module outside
    site-packages, so an installed suite, a clone and a user's own project drew different crops
    and could disagree on a verdict."""
    rng = np.random.default_rng(seed)
    images = clean_images()
    out = []
    for _ in range(count):
        name = sorted(images)[rng.integers(len(images))]
        height, width = images[name].shape[:2]
        h, w = (min(int(rng.integers(CROP[0], CROP[1] + 1)), side) for side in (height, width))
        crop = Crop(name, int(rng.integers(height - h + 1)), int(rng.integers(width - w + 1)), h, w)
        low = float(rng.uniform(0.0, 1.0 - MIN_GAP))
        levels = (low, float(rng.uniform(low + MIN_GAP, 1.0)))
        out.append({"crop": crop, "levels": levels, "noise_seed": int(rng.integers(2**16))})
    return out


DRAWN = drawn_examples()


def _with_examples(test: Callable[..., None]) -> Callable[..., None]:
    for drawn in reversed(DRAWN):
        test = example(**drawn)(test)
    return test


def _one_line(test: Callable[..., None]) -> Callable[..., None]:
    """A case without a verdict (a hung metric, one that cannot load or whose environment is
    broken) ends in its one line, as in the other families.

    hypothesis stops at the first example that fails (`report_multiple_bugs=False`), so Ctrl-C,
    a metric's sys.exit (`Exit`) and pytest-timeout's stop, which it would otherwise report among
    the other examples' failures or follow with the next example, reach pytest alone; it notes
    the example on what it raises, and a NoVerdict's line names its crop itself, or no example
    matters (the examples after a hang do not wait again: the metric is hung, they error at once)."""

    @wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            test(*args, **kwargs)
        except NoVerdict as stop:
            vars(stop).pop("__notes__", None)
            raise stop from None

    return run


@_one_line
@_with_examples
# the drawn examples only, up to the first that fails: its one line is the case's
@settings(deadline=None, phases=(Phase.explicit,), database=None, report_multiple_bugs=False)
@given(
    crop=st.sampled_from([d["crop"] for d in DRAWN]),
    levels=st.sampled_from([d["levels"] for d in DRAWN]),
    noise_seed=st.sampled_from([d["noise_seed"] for d in DRAWN]),
)
def test_detects_control_degradation(
    pytestconfig: pytest.Config,
    banana_metrics: Mapping[str, Scorer],
    control_metric: str,
    distortion: str,
    crop: Crop,
    levels: tuple[float, float],
    noise_seed: int,
) -> None:
    scorer = banana_metrics[control_metric]
    distort = DISTORTIONS[distortion]
    crop = crop.at_least(scorer.spec.min_side)
    pixels = crop.pixels
    try:
        scores = scorer.scores([distort(pixels, s, noise_seed) for s in levels])
    except Exit:
        raise  # the run stops (a metric's sys.exit): no verdict
    except Exception as exc:  # one line: an error for its environment's fault, else its verdict
        if scorer.book.models.load_failed(scorer.spec):
            raise  # it cannot load at all: no verdict, an error (session.scorer.load_or_skip)
        where, shape = f"the crop {crop!r}", (crop.height, crop.width)
        cannot_check(control_metric, distortion, where, exc, shape, scorer.spec.min_side, pytestconfig)
    mild, strong = map(scorer.normalise, scores)
    if clipped_tie(mild, strong):
        fail_verdict(
            f"{control_metric} did not rank {distortion} at strength {levels[1]:.2f} below {levels[0]:.2f} "
            f"on the crop {crop!r} (noise seed {noise_seed}): saturated, both clipped to normalised "
            f"{strong:.2f}, an end of its score_range; see docs/metrics.md, 'Choosing score_range'",
            f"saturated: normalised {strong:.2f} = {mild:.2f}, an end of its score_range",
            pytestconfig,
        )
    if not strong < mild:
        fail_verdict(
            f"{control_metric} did not rank {distortion} at strength {levels[1]:.2f} below {levels[0]:.2f} "
            f"on the crop {crop!r} (noise seed {noise_seed}): normalised {strong:.2f} ≥ {mild:.2f}",
            f"normalised {strong:.2f} ≥ {mild:.2f}",
            pytestconfig,
        )
