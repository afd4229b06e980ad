"""A metric's exception is the record's, not the batch's (issue 34): one row per metric that
raises on an image it cannot take.

In a user's set where step 20 of one seed image is a 1x1 PNG, the metric's exception (piqe's
RuntimeError, brisque's IndexError, a custom metric's ValueError) landed, raw, on whichever case
first asked for the batch: `<metric>-good_astronaut-step5` errored beside `<metric>-tiny-step20`.
Now the 1x1 step's case alone errors, in one line naming the record, the file and the exception,
and every case of the other seed image has its verdict. Below the suite run, the ScoreBook rules
behind it: a batch that raises is tried one image at a time (out of memory: in halves first), what
succeeded is cached, and a batch given the wrong number of scores errors its own records.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana_tests.scoring.score_book import ScoreBook
from banana_tests.scoring.score_cache import ScoreCache
from banana_tests.trajectories.imagefolder import read_imagefolder
from banana_tests.trajectories.records import DataError, Record
from metrics_under_test.spec import Backend, MetricSpec
from tests.conftest import weights_mirror, write_set

FUSSY = """
from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric


@metric("fussy", lower_better=False, score_range=(0.0, 2000.0))
def fussy(images):
    for img in images:
        if min(img.shape[:2]) < 8:
            raise ValueError(f"fussy needs at least 8x8 pixels, got {img.shape[1]}x{img.shape[0]}")
    return laplacian_variance(images)
"""
TINY = "tiny/run0/step020.png"
# metric -> what its one-line error says about the 1x1 image
RAISES = {
    "piqe": "piqe raised RuntimeError: maximum size for tensor at dimension 2 is 2 but size is 16",
    "brisque": "brisque raised IndexError: index 1 is out of bounds for dimension 1 with size 1",
    "fussy": "fussy raised ValueError: fussy needs at least 8x8 pixels, got 1x1",
}
Cases = dict[str, tuple[str, str]]  # case id -> (outcome, message)


def swap(root: Path, file_name: str, pixels: np.ndarray) -> Path:
    """The image `file_name` of the set at `root` becomes `pixels`, its sha256 updated as a
    user's tool would; the set's root is returned."""
    path = root / file_name
    Image.fromarray(pixels).save(path)
    rows = [json.loads(line) for line in (root / "metadata.jsonl").read_text().splitlines()]
    for row in rows:
        if row["file_name"] == file_name:
            row["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cases, Path]:
    """One suite run of every metric of RAISES (brisque only with the weights mirror)."""
    here = tmp_path_factory.mktemp("one-pixel")
    data = write_set(here / "data", seeds=("good_astronaut", "tiny"), steps=(1, 5, 10, 20))
    swap(data, TINY, np.full((1, 1, 3), 128, np.uint8))  # step 20 of run 0 of `tiny`: 1x1
    (here / "fussy.py").write_text(FUSSY)
    metrics = ["piqe", "fussy:fussy"] + (["brisque"] if weights_mirror() else [])
    cmd = [
        sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "--pyargs",
        "banana_tests", "--dataset=data", f"--metric={','.join(metrics)}", "--no-cache",
        "-k", "test_detects_degradation", "--junitxml=j.xml",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(here / "torch")}
    done = subprocess.run(cmd, cwd=here, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:]
    assert "INTERNALERROR" not in done.stdout + done.stderr
    cases = {}
    for case in ET.parse(here / "j.xml").iter("testcase"):
        kid = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        name = str(case.get("name"))
        cases[name[name.index("[") + 1 : -1]] = (
            "passed" if kid is None else kid.tag,
            "" if kid is None else kid.get("message", ""),
        )
    return cases, here / "data"


@pytest.mark.slow
@pytest.mark.parametrize("metric", list(RAISES))
def test_an_image_a_metric_cannot_take_errors_only_its_own_case(run: tuple[Cases, Path], metric: str) -> None:
    cases, data = run
    if metric == "brisque" and not weights_mirror():
        pytest.skip("no pyiqa weights mirror beside the clone or in $BANANA_WEIGHTS_DIR")
    own = {case: verdict for case, verdict in cases.items() if case.startswith(f"{metric}-")}
    errored = {case for case, (outcome, _) in own.items() if outcome == "error"}
    assert errored == {f"{metric}-tiny-step20"}, own
    message = own[f"{metric}-tiny-step20"][1]
    assert f"data/metadata.jsonl:12 ({data / TINY}): {RAISES[metric]}" in message
    assert len(message.splitlines()) == 1, message
    seeds = {case.rsplit("-", 2)[1] for case in own}
    assert seeds == {"good_astronaut", "tiny"}
    others = [outcome for case, (outcome, _) in own.items() if case not in errored]
    assert len(others) == 5 and set(others) <= {"passed", "failure"}


# ---- the ScoreBook's rules, with a metric of our own that keeps a log of its calls ----


class Picky:
    """Scores an image's mean; raises `error` on a batch holding an image darker than `dark`,
    or on any batch of more than `room` images."""

    name, lower_better, score_range = "picky", False, (0.0, 255.0)

    def __init__(self, error: Exception, dark: float = -1.0, room: int = 1000) -> None:
        self.error, self.dark, self.room = error, dark, room
        self.calls: list[int] = []

    def __call__(self, images: Sequence[np.ndarray]) -> list[float]:
        self.calls.append(len(images))
        means = [float(np.mean(img)) for img in images]
        if len(images) > self.room or min(means) < self.dark:
            raise self.error
        return means


SPEC = MetricSpec(name="picky", backend=Backend.CUSTOM, low=0.0, high=255.0, lower_better=False)


def six_records(root: Path) -> list[Record]:
    """Six images of one size; the third is black."""
    root = write_set(root, seeds=("a",), runs=(0, 1), steps=(1, 5, 10))
    swap(root, "a/run0/step010.png", np.zeros((96, 128, 3), np.uint8))
    rows = read_imagefolder(root).select("replicate")
    assert rows[2].path.name == "step010.png"
    return rows


def book_of(metric: Picky, tmp_path: Path) -> ScoreBook:
    return ScoreBook("cpu", loader=lambda spec, device: metric, cache=ScoreCache(tmp_path / "cache"))


def test_a_batch_that_raises_is_scored_one_image_at_a_time_and_the_rest_cached(tmp_path: Path) -> None:
    rows = six_records(tmp_path / "set")
    metric = Picky(ValueError("too dark\nto score"), dark=1.0)
    book = book_of(metric, tmp_path)

    good = book.scores(SPEC, [r for i, r in enumerate(rows) if i != 2], rows)

    assert len(good) == 5 and metric.calls == [6, 1, 1, 1, 1, 1, 1]
    with pytest.raises(DataError) as raised:
        book.scores(SPEC, [rows[2]])
    black = f"{rows[2].source} ({rows[2].path})"
    line = next(
        n for n, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "raise self.error" in text
    )
    raised_in = f"{Path(__file__)}:{line} in __call__"
    assert str(raised.value) == f"{black}: picky raised ValueError: too dark to score (at {raised_in})"
    again = book_of(Picky(ValueError("never called")), tmp_path)
    assert again.scores(SPEC, [r for i, r in enumerate(rows) if i != 2]) == good
    assert again.cached(SPEC, rows) == [True, True, False, True, True, True]


@pytest.mark.slow
def test_out_of_memory_halves_the_batch_before_it_blames_an_image(tmp_path: Path) -> None:
    rows = six_records(tmp_path / "set")
    metric = Picky(MemoryError("no room"), dark=1.0, room=2)

    book = book_of(metric, tmp_path)
    good = book.scores(SPEC, [r for i, r in enumerate(rows) if i != 2], rows)

    assert len(good) == 5
    assert metric.calls == [6, 3, 2, 1, 3, 2, 1]  # 6 → 3 + 3, each 3 → 2 + 1: the black image alone
    with pytest.raises(
        DataError, match=r"picky raised MemoryError: no room \(at .*test_metric_raises.py:\d+ in __call__\)$"
    ):
        book.scores(SPEC, [rows[2]])


class OneShort(Picky):
    """Breaks the protocol: one score fewer than images."""

    def __call__(self, images: Sequence[np.ndarray]) -> list[float]:
        return super().__call__(images)[1:]


def test_a_wrong_number_of_scores_errors_the_batchs_records_each_by_file(tmp_path: Path) -> None:
    """Which score is whose cannot be known: the batch is not tried again, each of its records
    errors, named by file (a MetricError naming no file errored the whole case before)."""
    rows = six_records(tmp_path / "set")
    metric = OneShort(ValueError("never raised"))

    with pytest.raises(DataError) as raised:
        book_of(metric, tmp_path).scores(SPEC, rows)
    message = str(raised.value)
    assert message.startswith("6 records cannot be scored: ")
    assert message.endswith(": metric 'picky' returned 5 scores for a batch of 6 images, this one among them")
    assert all(str(r.path) in message for r in rows)
    assert metric.calls == [6]


# ---- a real address-space limit, not a raised MemoryError ----

HUNGRY = """
import numpy as np
from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric


@metric("hungry", lower_better=False, score_range=(0.0, 2000.0))
def hungry(images):
    work = np.ones((len(images), {per_image}), np.uint8)  # a model's activations, per image
    del work
    return laplacian_variance(images)
"""
PER_IMAGE = 256 * 2**20


@pytest.mark.slow
def test_under_an_address_space_limit_a_batch_too_big_is_split_and_every_case_written(tmp_path: Path) -> None:
    """Under `RLIMIT_AS` (prlimit --as) a seed image's batch of 8 (two runs × four steps) needs 2 GiB
    and cannot be had; its halves fit. Every planned case gets its verdict and the JUnit file holds
    each one. Before, both step-5 cases (the ones that asked for the batch) errored with numpy's
    raw `_ArrayMemoryError`."""
    import resource

    data = write_set(tmp_path / "data", seeds=("alpha", "beta"), steps=(1, 5, 10, 20))
    (tmp_path / "hungry.py").write_text(HUNGRY.format(per_image=PER_IMAGE))
    cmd = [
        sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "--pyargs",
        "banana_tests", f"--dataset={data}", "--metric=hungry:hungry", "--no-cache",
        "-k", "test_detects_degradation", "--junitxml=j.xml",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(tmp_path / "torch")}

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

    done = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, preexec_fn=limit
    )
    output = done.stdout + done.stderr
    assert "INTERNALERROR" not in output and "MemoryError" not in output, output[-3000:]
    assert done.returncode in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), output[-3000:]
    outcomes = {}
    for case in ET.parse(tmp_path / "j.xml").iter("testcase"):
        kid = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        outcomes[str(case.get("name"))] = kid
    assert len(outcomes) == 6 and set(outcomes.values()) <= {"passed", "failure"}, outcomes


LIMIT = 2 * 2**30  # the process's own address space, and room for a batch of 4 images, not of 8
