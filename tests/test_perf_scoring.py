"""How ScoreBook spends memory and cores: windows decoded before scoring, torch threads per worker."""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from banana_tests import scoring
from banana_tests.images import ImageStore
from banana_tests.scoring import ScoreBook, share_cores
from banana_tests.trajectories import DataError, Record, read_imagefolder
from metrics_under_test.protocol import Image
from metrics_under_test.registry import MetricSpec, lookup


class Recorder:
    """A metric that records how many images the store had decoded at each call."""

    def __init__(self, store: ImageStore) -> None:
        self.store = store
        self.calls: list[tuple[int, int]] = []  # (batch size, decodes so far)

    def __call__(self, images: Sequence[Image]) -> list[float]:
        self.calls.append((len(images), self.store.decodes))
        return [float(np.mean(img)) for img in images]


def records(root: Path) -> list[Record]:
    return read_imagefolder(root).select("replicate")


def test_each_window_is_decoded_before_it_is_scored(make_set, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    rows = records(make_set(seeds=("a", "b", "c"), runs=(0, 1), steps=(1, 5, 10, 20)))
    image_bytes = np.asarray(PILImage.open(rows[0].path)).nbytes
    monkeypatch.setattr(scoring, "WINDOW_BYTES", 5 * image_bytes)
    store = ImageStore()
    metric = Recorder(store)
    book = ScoreBook("cpu", store, loader=lambda spec, device: metric)
    spec = lookup("piqe")

    scores = book.scores(spec, rows[:1], rows)

    assert len(scores) == 1 and store.decodes == len(rows) == 24
    assert [size for size, _ in metric.calls] == [5, 5, 5, 5, 4]
    assert [decoded for _, decoded in metric.calls] == [5, 10, 15, 20, 24]
    book.scores(spec, rows)
    assert store.decodes == 24 and len(metric.calls) == 5  # scored once, decoded once


def test_a_bad_image_in_a_window_is_reported_and_the_rest_scored(make_set) -> None:  # type: ignore[no-untyped-def]
    rows = records(make_set(seeds=("a",), runs=(0,), steps=(1, 5, 10)))
    rows[1].path.write_bytes(b"not a png")
    store = ImageStore()
    book = ScoreBook("cpu", store, loader=lambda spec, device: Recorder(store))
    spec: MetricSpec = lookup("piqe")

    good = book.scores(spec, [rows[0], rows[2]], rows)

    assert len(good) == 2
    with pytest.raises(DataError, match="step005"):
        book.scores(spec, [rows[1]])


@pytest.mark.parametrize(
    ("workers", "omp", "expected"),
    [("2", None, [1]), ("4", None, [1]), ("", None, []), ("2", "2", [])],
)
def test_torch_gets_its_share_of_the_cores_under_xdist(
    monkeypatch: pytest.MonkeyPatch, workers: str, omp: str | None, expected: list[int]
) -> None:
    calls: list[int] = []
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(set_num_threads=calls.append))
    monkeypatch.setattr(scoring.os, "cpu_count", lambda: 2)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", workers)
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)

    share_cores()

    assert calls == expected
