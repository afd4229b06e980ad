"""The per-cell statistics of issue 27 on fixed numbers: run spread, separability, the oracle."""

from __future__ import annotations

import math

import numpy as np
import pytest
from skimage.metrics import structural_similarity

from banana_tests.families.degradation.matrix_sections import auc, separability
from banana_tests.scoring.oracle import UNCHANGED_PSNR, _blur, change, psnr, ssim
from banana_tests.verdicts.gaps import StrictOutcome, spread


@pytest.mark.parametrize(
    ("deltas", "outcome"),
    [
        ((-1.0, -0.5, -2.0), StrictOutcome.DETECTED),
        ((0.0, 0.5, 2.0), StrictOutcome.MISSED),  # Δ = 0 is a miss, as in the paper's rule
        ((-1.0, 0.0, -2.0), StrictOutcome.UNRESOLVED),
        ((-3.0, 4.0, 1.0), StrictOutcome.UNRESOLVED),
        ((-0.1,), StrictOutcome.DETECTED),
    ],
)
def test_strict_outcome_reads_the_whole_run_range(deltas: tuple[float, ...], outcome: StrictOutcome) -> None:
    assert spread(deltas).strict is outcome


def test_spread_figures() -> None:
    s = spread([-3.0, 4.0, 1.0])
    assert s.mean == pytest.approx(2 / 3)
    assert s.stdev == pytest.approx(math.sqrt(((-3 - 2 / 3) ** 2 + (4 - 2 / 3) ** 2 + (1 - 2 / 3) ** 2) / 2))
    assert s.interval == (-3.0, 4.0)
    assert spread([1.0]).stdev == 0.0
    assert spread([-1.0, 1.0]).stdev == math.sqrt(2)  # two runs already spread (the page's run Δ sd)


@pytest.mark.parametrize(("runs", "confidence"), [(1, 0.0), (3, 0.75), (4, 0.875), (5, 0.9375)])
def test_run_range_confidence(runs: int, confidence: float) -> None:
    assert spread([float(i) for i in range(runs)]).confidence == confidence


def test_run_range_covers_the_median_as_often_as_stated() -> None:
    rng = np.random.default_rng(7)
    draws = rng.standard_t(df=2, size=(20_000, 3)) + 1.5  # heavy tails: no normality assumed
    median = 1.5
    covered = np.mean((draws.min(axis=1) <= median) & (median <= draws.max(axis=1)))
    assert covered == pytest.approx(spread([0, 1, 2]).confidence, abs=0.01)


@pytest.mark.parametrize("bad", [(), (math.nan, 1.0), (math.inf,)])
def test_spread_refuses_what_says_nothing(bad: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        spread(bad)


def test_auc_edges_and_ties() -> None:
    assert auc([5.0, 6.0], [1.0, 2.0]) == 1.0  # every clean image outscores every degraded one
    assert auc([1.0, 2.0], [5.0, 6.0]) == 0.0  # the metric prefers the degraded images
    assert auc([3.0, 3.0], [3.0]) == 0.5  # ties count half
    assert auc([1.0, 4.0], [2.0, 3.0]) == 0.5
    assert auc([1.0, 3.0, 5.0], [2.0, 2.0]) == pytest.approx(4 / 6)


def test_auc_matches_the_pairwise_definition() -> None:
    rng = np.random.default_rng(3)
    clean = rng.integers(0, 10, 40).astype(float).tolist()  # many ties
    degraded = rng.integers(0, 10, 25).astype(float).tolist()
    pairs = [(c > d) + 0.5 * (c == d) for c in clean for d in degraded]
    assert auc(clean, degraded) == pytest.approx(sum(pairs) / len(pairs))


def test_separability_carries_the_content_spread() -> None:
    s = separability(5, clean=[10.0, 40.0, 25.0], degraded=[8.0, 38.0, 23.0])
    assert (s.step, s.clean, s.degraded) == (5, 3, 3)
    assert s.clean_spread == 30.0
    assert s.auc == pytest.approx(6 / 9)  # 10 beats 8; 40 beats all; 25 beats 8, 23


def _scene(seed: int, size: tuple[int, int] = (48, 64)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (*size, 3), dtype=np.uint8)


def test_unchanged_step_is_not_a_valid_trial() -> None:
    ref = _scene(0)
    same = change(ref, ref.copy())
    assert same.psnr == math.inf and same.ssim == pytest.approx(1.0)
    assert not same.valid_trial
    nudged = ref.copy()
    nudged[0, 0, 0] ^= 1  # one grey level on one pixel: far under one level RMS
    assert not change(ref, nudged).valid_trial


def test_noisy_step_is_a_valid_trial() -> None:
    y, x = np.mgrid[0:48, 0:64]
    ref = np.repeat(((x + y) * 2)[..., None], 3, axis=2).astype(np.uint8)  # smooth: noise shows in SSIM
    noise = np.random.default_rng(2).normal(0, 8, ref.shape)
    step = np.clip(ref + noise, 0, 255).astype(np.uint8)
    moved = change(ref, step)
    assert moved.valid_trial
    assert 25 < moved.psnr < UNCHANGED_PSNR
    assert moved.ssim < 0.99


def test_psnr_of_a_known_error() -> None:
    a = np.zeros((4, 4))
    assert psnr(a, a + 2.0) == pytest.approx(20 * math.log10(255 / 2))


def test_ssim_agrees_with_scikit_image() -> None:
    rng = np.random.default_rng(5)
    a = rng.uniform(0, 255, (40, 56))
    b = np.clip(a + rng.normal(0, 20, a.shape), 0, 255)
    ours = ssim(a, b)
    theirs = structural_similarity(
        a, b, data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
    )
    assert ours == pytest.approx(theirs, abs=2e-3)  # borders: scipy reflects, skimage crops


@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (32, 32), (33, 129), (97, 64), (130, 257)])
def test_blur_is_scipys_gaussian_filter_to_float32_rounding(shape: tuple[int, int]) -> None:
    """The oracle's matrix-product blur against scipy's gaussian_filter (mode 'reflect'), across
    its row blocks and column chunks (oracle.BAND_ROWS, BAND_COLUMNS) and below the window's size."""
    from scipy.ndimage import gaussian_filter

    planes = np.random.default_rng(3).uniform(0, 255**2, (3, *shape)).astype(np.float32)
    theirs = np.stack([gaussian_filter(p.astype(np.float64), sigma=1.5, truncate=3.5) for p in planes])
    ours = _blur(planes)
    assert ours.dtype == np.float32 and ours.shape == planes.shape
    assert np.max(np.abs(ours - theirs)) <= 4 * np.finfo(np.float32).eps * 255**2


@pytest.mark.parametrize("shape", [(40, 56), (7, 5), (97, 64)])
def test_ssim_is_within_1e_6_of_float64_gaussian_filters(shape: tuple[int, int]) -> None:
    """SSIM's statistics in float32 and blurred by matrix products (ORACLE_KEY) move the index
    by under 1e-6 from scipy's gaussian_filter of each statistic in float64."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng(7)
    a = rng.uniform(0, 255, shape)
    b = np.clip(a + rng.normal(0, 9, shape), 0, 255)

    def blur(x: np.ndarray) -> np.ndarray:
        return gaussian_filter(x, sigma=1.5, truncate=3.5)

    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b, cov = blur(a * a) - mu_a**2, blur(b * b) - mu_b**2, blur(a * b) - mu_a * mu_b
    index = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    assert ssim(a, b) == pytest.approx(float(np.mean(index)), abs=1e-6)


def test_a_cropped_step_is_compared_at_the_reference_size() -> None:
    ref = _scene(4, (60, 80))
    assert change(ref, ref[:30, :40]).psnr < UNCHANGED_PSNR  # resized up, not an error
