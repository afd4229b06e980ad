"""How ScoreBook and the oracle spend memory: windows decoded before scoring, references kept
while they fit."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from PIL import Image as PILImage

from banana_tests.scoring import batching, oracle
from banana_tests.scoring import score_book as scoring
from banana_tests.scoring.oracle import OracleFigures, change
from banana_tests.scoring.score_book import ScoreBook
from banana_tests.trajectories.imagefolder import read_imagefolder
from banana_tests.trajectories.images import ImageStore
from banana_tests.trajectories.records import DataError, Record
from metrics_under_test.protocol import Image
from metrics_under_test.registry import lookup
from metrics_under_test.spec import MetricSpec


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


def test_batches_hold_one_image_size_and_a_bounded_number_of_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "BATCH", 4)
    monkeypatch.setattr(batching, "BATCH_PIXELS", 10 * 10 * 3)
    sizes = [(10, 10)] * 6 + [(5, 5)] * 5 + [(20, 20)] * 2
    window = [
        (Record("s", "replicate", 0, i, Path(f"{i}.png"), "test"), np.zeros((*hw, 3), np.uint8))
        for i, hw in enumerate(sizes)
    ]

    shapes = [[image.shape[:2] for _, image in batch] for batch in batching.batches(window)]

    assert shapes == [
        [(5, 5)] * 4,  # the count cap
        [(5, 5)],
        [(10, 10)] * 3,  # the pixel cap
        [(10, 10)] * 3,
        [(20, 20)],  # bigger than the cap: alone
        [(20, 20)],
    ]
    assert sorted(r.step for batch in batching.batches(window) for r, _ in batch) == list(range(13))


class CountedReference(oracle.Reference):
    built = 0
    passes: ClassVar[list[int]] = []  # steps per call of `changes`

    def __init__(self, luma: np.ndarray) -> None:
        type(self).built += 1
        super().__init__(luma)

    def changes(self, steps):  # type: ignore[no-untyped-def]
        type(self).passes.append(len(steps))
        return super().changes(steps)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[CountedReference]:
    monkeypatch.setattr(oracle, "Reference", CountedReference)
    monkeypatch.setattr(CountedReference, "built", 0)
    monkeypatch.setattr(CountedReference, "passes", [])
    return CountedReference


def oracle_pairs(root: Path) -> list[tuple[Record, Record]]:
    rows = records(root)
    reference = {(r.seed_image, r.run): r for r in rows if r.step == 1}
    return [(reference[(r.seed_image, r.run)], r) for r in rows if r.step != 1]


@pytest.mark.parametrize(("budget", "built"), [(None, 4), (1, 8)])
def test_the_oracle_builds_a_references_statistics_once_while_they_fit(  # type: ignore[no-untyped-def]
    make_set, monkeypatch: pytest.MonkeyPatch, counted: type[CountedReference], budget: int | None, built: int
) -> None:
    pairs = oracle_pairs(make_set(seeds=("a", "b"), runs=(0, 1), steps=(1, 5, 10)))
    pairs = pairs[::2] + pairs[1::2]  # each reference comes back after the others
    if budget is not None:
        monkeypatch.setattr(oracle, "REFERENCE_BYTES", budget)
    book = OracleFigures(ImageStore())

    found = [book.changes([pair])[0] for pair in pairs]  # a case at a time, as the cases ask
    assert counted.built == built  # 4 references; over the budget, one is held at a time

    store = ImageStore()  # `change` builds its own references (counted too)
    assert found == [change(store.get(ref), store.get(step)) for ref, step in pairs]  # the same numbers


def test_a_runs_first_oracle_figure_brings_its_companions_in_one_pass(  # type: ignore[no-untyped-def]
    make_set, counted: type[CountedReference]
) -> None:
    pairs = oracle_pairs(make_set(seeds=("a",), runs=(0, 1), steps=(1, 2, 3, 5, 10)))
    companions: dict[Record, list[Record]] = {}
    for ref, step in pairs:
        companions.setdefault(ref, []).append(step)
    broken = pairs[2][1]  # run 0's step 5: a companion that cannot be decoded
    broken.path.write_bytes(broken.path.read_bytes()[:60])
    book = OracleFigures(ImageStore())

    found = [book.changes([pair], companions)[0] for pair in pairs if pair[1] is not broken]
    assert counted.passes == [3, 4]  # one pass per run; run 0's unreadable step left out

    store = ImageStore()  # `change` builds its own references (counted too)
    expected = [change(store.get(ref), store.get(step)) for ref, step in pairs if step is not broken]
    assert found == expected  # the same numbers as one at a time
    with pytest.raises(DataError, match=broken.path.name):  # its own case reports it
        book.changes([pairs[2]], companions)
