"""An image's score must not depend on the batch it is scored in (issue 19).

The suite scores images in batches of one size (`banana_tests.scoring.batching.batches`), so a metric or
adapter that mishandles a batch of two or more images (ILNIQE raised on the pyiqa adapter's
channels-last tensor) or mixes images up within one would change the matrix silently. Every metric
that can run offline here but ILNIQE (tests/test_paper_metrics.py, below) is scored through the
suite's own path, ScoreBook and load_metric, and each score compared with the image scored alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from banana_tests.scoring.metric_calls import load_metric
from banana_tests.scoring.score_book import ScoreBook
from banana_tests.trajectories.images import ImageStore
from banana_tests.trajectories.records import Record
from metrics_under_test.protocol import Image, Metric
from metrics_under_test.registry import resolve
from metrics_under_test.spec import Backend, MetricSpec
from metrics_under_test.weights import stage
from tests.conftest import needs, weights_mirror, write_crops

# ILNIQE is not here: tests/test_paper_metrics.py checks it (tolerance 0, one image per call in the
# adapter) in a process of its own, where it peaks at 2.8 GB. In an xdist worker of `pytest tests
# -n 2` its two cases peaked at 11.4 GB; on two workers at once they were killed for memory.
# max |batched - alone| allowed per metric, from differences measured on this machine on the crops
# below and, where said, on embedded images in the suite's own batches (up to 5 images of 384 px).
TOLERANCE = {
    # float32 SVM: a sum of 774 support-vector terms with coefficients up to ±1024 that cancel down
    # to the score; one image (gemv) and a batch (gemm) add them in different orders, so batched
    # scores moved by up to 0.06 (0.0015 on the crops). The adapter now scores BRISQUE one image
    # per call (pyiqa_backend.ONE_AT_A_TIME): exact.
    "brisque": 0.0,
    # computed in float64; measured exactly 0 on the crops and on all 96 embedded images. NIQE
    # inverts a covariance matrix, which can amplify roundoff (as in ILNIQE): 1e-6 allows for it;
    # PIQE has no such step.
    "niqe": 1e-6,
    "piqe": 1e-9,
    # a histogram of per-pixel luminance levels: measured exactly 0 on the crops and on all 96
    # embedded images. Only a pixel whose float32 luminance sits on a level's edge could move to the
    # next bin, which changes the entropy of a 128 px crop by < 1e-3.
    "entropy": 1e-3,
    # each image by the same float64 numpy code, one at a time whatever the list: equal by design.
    "laplacian_variance": 0.0,
    # float32 convolution and a mean over ~16k pixels: measured 0 on these crops, 4.8e-7 (one
    # float32 ulp at ~5) on a batch of three.
    "noise_sigma": 1e-4,
}
# pyiqa's metrics (a real model each) are the slow tier; the numpy ones run in the fast tier.
NAMES = [
    pytest.param(n, marks=[pytest.mark.slow] if resolve(n)[0].backend is Backend.PYIQA else [])
    for n in TOLERANCE
]
# Crops of the embedded images, (seed image, step, top, left, height, width): real textures, small
# enough to be fast (ILNIQE resizes every image to 524 px whatever its size: ~10 s each here), and
# at least NIQE's 96 px block. Two of one size make a batch; the third has another size.
CROPS = (
    ("astronaut", 5, 40, 60, 128, 128),
    ("brick", 20, 10, 10, 128, 128),
    ("chelsea", 10, 0, 0, 96, 160),
)
MIRROR_ENV = "BANANA_WEIGHTS_DIR"


@pytest.fixture(scope="module")
def torch_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A pyiqa cache of this module's own, offline, so no download is tried and none is left behind."""
    home = tmp_path_factory.mktemp("torch")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCH_HOME", str(home))
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield home


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    """The crops as PNG files, read back through the suite's image store like any data set."""
    return write_crops(tmp_path_factory.mktemp("crops"), CROPS)


@pytest.fixture(scope="module")
def built(torch_home: Path) -> Callable[[str], tuple[MetricSpec, Metric]]:
    """Each metric built once for the module by load_metric, its parameters staged from the mirror."""
    cache: dict[str, tuple[MetricSpec, Metric]] = {}

    def get(name: str) -> tuple[MetricSpec, Metric]:
        if name not in cache:
            (spec,) = resolve(name)
            folder = weights_mirror()
            if folder is not None:
                stage(folder, ((w.file, w.path) for w in spec.weights))
            missing = [w.file for w in spec.missing_weights()]
            if missing:
                where = f"not in {folder}" if folder else f"missing and ${MIRROR_ENV} is not set"
                pytest.skip(f"{name}: {', '.join(missing)} {where}; set {MIRROR_ENV} to a folder holding it")
            cache[name] = (spec, load_metric(spec, "cpu"))
        return cache[name]

    return get


class Batches:
    """The metric, recording the size of each list it is handed."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric
        self.name, self.lower_better, self.score_range = metric.name, metric.lower_better, metric.score_range
        self.sizes: list[int] = []

    def __call__(self, images: Sequence[Image]) -> list[float]:
        self.sizes.append(len(images))
        return list(self.metric(images))


@pytest.fixture(scope="module")
def alone(
    built: Callable[[str], tuple[MetricSpec, Metric]], records: list[Record]
) -> Callable[[str], list[float]]:
    """Each crop's score with the crop scored on its own, once per metric."""
    cache: dict[str, list[float]] = {}
    store = ImageStore()

    def get(name: str) -> list[float]:
        if name not in cache:
            metric = built(name)[1]
            cache[name] = [metric([store.get(r)])[0] for r in records]
        return cache[name]

    return get


@pytest.mark.parametrize("name", NAMES)
def test_the_score_book_scores_a_batch_as_each_image_alone(
    name: str,
    built: Callable[[str], tuple[MetricSpec, Metric]],
    alone: Callable[[str], list[float]],
    records: list[Record],
) -> None:
    if name == "noise_sigma":  # the example metric in torch
        needs("torch")
    spec, metric = built(name)
    spy = Batches(metric)
    book = ScoreBook("cpu", ImageStore(), loader=lambda spec, device: spy)

    scores = book.scores(spec, records)

    assert sorted(spy.sizes) == [1, 2]  # the two crops of one size were scored together
    assert np.abs(np.subtract(scores, alone(name))).max() <= TOLERANCE[name]


@pytest.mark.parametrize("name", NAMES)
def test_a_mixed_size_list_scores_as_each_image_alone(
    name: str,
    built: Callable[[str], tuple[MetricSpec, Metric]],
    alone: Callable[[str], list[float]],
    records: list[Record],
) -> None:
    if name == "noise_sigma":  # the example metric in torch
        needs("torch")
    store = ImageStore()
    order = [0, 2, 1]  # the odd size between the two of one size
    metric = built(name)[1]

    scores = metric([store.get(records[i]) for i in order])

    expected = [alone(name)[i] for i in order]
    assert np.abs(np.subtract(scores, expected)).max() <= TOLERANCE[name]


@pytest.mark.slow
def test_pyiqa_reads_the_parameters_staged_under_todays_torch_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyiqa fixes its cache folder when first imported. A worker that imported it under another
    TORCH_HOME (here: a stale folder, as after an earlier test) must still find the files the suite
    staged under the current one, not try a download (CI failed so once, offline)."""
    needs("pyiqa")
    from pyiqa.utils import download_util

    from metrics_under_test.pyiqa_backend import PyiqaMetric

    mirror = weights_mirror()
    if mirror is None:
        pytest.skip("no weights mirror beside the clone and $BANANA_WEIGHTS_DIR unset")
    monkeypatch.setattr(download_util, "DEFAULT_CACHE_DIR", str(tmp_path / "stale" / "hub" / "pyiqa"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (spec,) = resolve("brisque")
    stage(mirror, ((w.file, w.path) for w in spec.weights))
    PyiqaMetric(spec, "cpu")  # raised MissingWeights when pyiqa looked in the stale folder
    assert Path(download_util.DEFAULT_CACHE_DIR) == tmp_path / "torch" / "hub" / "pyiqa"
