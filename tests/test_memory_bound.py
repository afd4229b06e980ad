"""A run's peak memory follows one batch of its largest metric, not the heap's history (issue 26).

ILNIQE on the embedded set peaked at 13.4 GB serial: the suite's malloc tuning kept every freed
buffer below 256 MiB in the heap, where ILNIQE's buffers (2-450 MB each, in sizes that grow
through each call) piled up instead of being reused: one 384 px image peaked at 11.7 GB, and at
2.7 GB with glibc's own 32 MiB threshold. Reproducing it takes gigabytes, so
benchmarks/bench_memory.py measures it; these tests check that ILNIQE is scored with glibc's own
thresholds however the process was tuned before, and one image per call of its model.
"""

from __future__ import annotations

import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from banana_tests.cli import main
from banana_tests.scoring import process_tuning
from tests.conftest import needs, suite_folder

GLIBC = process_tuning._glibc() is not None


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_tuning_for_a_metric_follows_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []

    class Libc:
        def mallopt(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    class Fragmenting:
        reuses_freed_memory = False

    monkeypatch.setattr(process_tuning, "_glibc", lambda: Libc())
    for name in process_tuning.USER_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    process_tuning.tune_for_scoring(object())  # NIQE, say: keeps freed buffers
    process_tuning.tune_for_scoring(Fragmenting())  # ILNIQE next in the same process
    mmap = process_tuning.M_MMAP_THRESHOLD
    assert [value for param, value in calls if param == mmap] == [
        process_tuning.MMAP_THRESHOLD,
        process_tuning.GLIBC_MMAP_CEILING,
    ]


@pytest.mark.slow
def test_ilniqe_says_it_fragments_a_keeping_heap_and_niqe_does_not() -> None:
    needs("pyiqa")
    from metrics_under_test.pyiqa_backend import PyiqaMetric
    from metrics_under_test.registry import resolve

    def no_model(name: str, device: object) -> None:  # the attribute comes before any file
        return None

    built = {n: PyiqaMetric(resolve(n)[0], "cpu", create_metric=no_model) for n in ("ilniqe", "niqe")}
    assert not process_tuning.reuses_freed_memory(built["ilniqe"])
    assert process_tuning.reuses_freed_memory(built["niqe"])


@pytest.mark.slow
def test_ilniqe_scores_one_image_per_model_call_where_niqe_takes_the_batch() -> None:
    """ILNIQE holds ~2.7 GB per image whatever its size (it resizes each to 524 px): the scorer
    groups the embedded set's 384 px images three to a batch, and three at once in ILNIQE's model
    would be past the 4 GB bound. NIQE's buffers follow the pixels, so a batch pays for it."""
    torch = needs("torch")
    needs("pyiqa")
    import numpy as np

    from banana_tests.scoring.batching import batches
    from metrics_under_test.pyiqa_backend import PyiqaMetric
    from metrics_under_test.registry import resolve

    handed: list[tuple[int, ...]] = []

    def recording_model(name: str, device: object) -> object:
        def model(batch: object) -> object:
            handed.append(tuple(batch.shape))  # type: ignore[attr-defined]
            return torch.zeros(batch.shape[0])  # type: ignore[attr-defined]

        return model

    embedded = [(i, np.zeros((384, 384, 3), np.uint8)) for i in range(3)]
    chunks = [[image for _, image in chunk] for chunk in batches(embedded)]
    assert [len(chunk) for chunk in chunks] == [3]  # the scorer's batch, for every metric
    shapes = {}
    for name in ("ilniqe", "niqe"):
        handed.clear()
        metric = PyiqaMetric(resolve(name)[0], "cpu", create_metric=recording_model)
        for chunk in chunks:
            metric(chunk)
        shapes[name] = list(handed)
    assert shapes == {"ilniqe": [(1, 3, 384, 384)] * 3, "niqe": [(3, 3, 384, 384)]}


GROWING = """
import numpy as np

from metrics_under_test.examples import laplacian_variance


class Growing:
    '''Keeps 1 MiB buffers on each call past the load-time probe until the allocator refuses
    (never written to: address space, not the machine's memory).'''

    name = "growing"
    lower_better = False
    score_range = (0.0, 2000.0)
    cost = "fast"

    def __init__(self):
        self.kept = []
        self.calls = 0

    def __call__(self, images):
        self.calls += 1
        if self.calls > 5:
            while True:
                self.kept.append(np.empty(1 << 20, np.uint8))
        return laplacian_variance(images)
"""
OTHER = "metrics_under_test.examples:laplacian_variance"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("prlimit") is None, reason="util-linux's prlimit")
def test_a_metric_that_exhausts_memory_errors_its_own_cases_and_the_junit_file_is_complete(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: under `prlimit --as` with -n 2, a metric that grew until MemoryError left the
    worker no memory: INTERNALERROR while it sent a report, exit 3, cases missing from JUnit. Its
    model is dropped the moment it runs out, so the run ends normally, with every planned case
    in the file and the other metric's verdicts as in a run without it."""
    pytest.importorskip("xdist")
    suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5))
    pytester.makepyfile(growing=GROWING)
    common = ("--pyargs", "banana_tests", "--dataset=data", "--no-cache", "-p", "no:randomly", "-n", "2")

    def run(metrics: str, junit: str, *limit: str) -> pytest.RunResult:
        args = (*limit, sys.executable, "-m", "pytest", *common, f"--metric={metrics}", f"--junitxml={junit}")
        return pytester.run(*args, timeout=300)

    alone = run(OTHER, "alone.xml")
    limited = run(f"growing:Growing,{OTHER}", "both.xml", "prlimit", "--as=3000000000")

    assert limited.ret == pytest.ExitCode.TESTS_FAILED, limited.stdout.str()[-3000:]
    assert "INTERNALERROR" not in limited.stdout.str() + limited.stderr.str()
    both = outcomes(pytester.path / "both.xml")
    other = {name: outcome for name, outcome in both.items() if "laplacian_variance" in name}
    assert other == outcomes(pytester.path / "alone.xml")
    assert len(both) == 2 * len(other)  # every planned case of both metrics
    assert any(o == "error" for n, o in both.items() if "growing" in n)
    assert main(["report", str(pytester.path / "both.xml"), "--out", str(pytester.path / "r")]) == 0
    assert alone.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)


def outcomes(junit: Path) -> dict[str, str]:
    """Each testcase's outcome: passed, failure, error or skipped."""
    found = {}
    for case in ET.parse(junit).iter("testcase"):
        tags = [c.tag for c in case if c.tag in ("failure", "error", "skipped")]
        found[case.get("name", "")] = tags[0] if tags else "passed"
    return found
