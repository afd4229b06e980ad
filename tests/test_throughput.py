"""Throughput guarantees that a test can count: each metric's model is built once per worker, its
cases spread over the workers, and no image scored twice."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter

import pytest

from banana_tests.core.machine import gpu_driver_loaded
from metrics_under_test.custom import PROBE
from tests.conftest import assert_outcomes, suite_folder
from tests.known_metrics import install_known_metrics

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

COUNTING = '''
import os
import sys

from known_metrics import sigma


LOG = os.environ["BUILD_LOG"]
if getattr(sys.modules["__main__"].__spec__, "name", "") == "banana_tests.scoring.score_identity":
    LOG += ".looked"  # the look at what the metric loads (its cache identity) is counted apart


class Counted:
    """Appends "<name> <pid>" to $BUILD_LOG each time it is constructed; scores the noise σ."""

    score_range = (0.0, 100.0)

    def __init__(self):
        with open(LOG, "a") as log:
            log.write(f"{self.name} {os.getpid()}\\n")

    def __call__(self, images):
        with open(LOG + ".scored", "a") as log:
            log.write(f"{self.name} {os.getpid()} {len(images)}\\n")
        return [sigma(img) for img in images]


class First(Counted):  # lower σ is better: detects every step (tests/known_metrics.py)
    name, lower_better = "first", True


class Second(Counted):  # higher σ is better: misses every step
    name, lower_better = "second", False
'''


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    suite_folder(pytester, monkeypatch, seeds=("alpha", "beta", "gamma"), runs=(0, 1), steps=(1, 5, 10, 20))
    install_known_metrics(pytester.path)
    pytester.makepyfile(countmetric=COUNTING)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    monkeypatch.setenv("BUILD_LOG", str(pytester.path / "builds.log"))
    return pytester


def scored(folder: pytest.Pytester) -> list[tuple[str, str, int]]:
    """(metric, process id, images) of each call of a counted metric, its probe included."""
    lines = (folder.path / "builds.log.scored").read_text().splitlines()
    return [(name, pid, int(n)) for name, pid, n in (line.split() for line in lines)]


def test_a_metric_spreads_over_the_workers_each_building_it_once(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        "-n", "2", "--dataset=data", "--metric=countmetric:First,countmetric:Second", "--no-cache"
    )
    assert_outcomes(result, passed=9, missed=9)  # 3 seed images × 3 steps, each metric
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    builds = Counter(tuple(line.split()) for line in (suite.path / "builds.log").read_text().splitlines())
    assert set(builds.values()) == {1}  # each (metric, worker) once
    assert len({pid for _, pid in builds}) == 2  # both workers scored: groups of one seed image
    for metric in ("first", "second"):
        workers = [pid for name, pid in builds if name == metric]
        images = sum(n for name, _, n in scored(suite) if name == metric)
        # each worker probes the metric when it builds it (metrics_under_test.custom); the set's 24
        # images (3 seed images × 2 runs × steps 1, 5, 10, 20) are scored once in all
        probed = sum(len(batch) for batch in PROBE)
        assert images == 24 + probed * len(workers), (metric, scored(suite))


def test_a_rerun_from_the_cache_builds_nothing(suite: pytest.Pytester) -> None:
    args = ("--dataset=data", "--metric=countmetric:First", "--junitxml=j.xml", "-o", "junit_family=xunit1")
    suite.runpytest_subprocess(*args).assert_outcomes(passed=9)
    (suite.path / "builds.log").unlink()
    suite.runpytest_subprocess(*args).assert_outcomes(passed=9)
    assert not (suite.path / "builds.log").exists()
    cached = {
        p.get("value")
        for p in ET.parse(suite.path / "j.xml").iter("property")
        if p.get("name") == "score_cached"
    }
    assert cached == {"true"}


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
def test_a_narrowed_run_scores_only_the_cases_it_selected(
    suite: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    result = suite.runpytest_subprocess(
        *workers, "--dataset=data", "--metric=countmetric:First", "--no-cache", "-k", "beta and step10"
    )
    assert_outcomes(result, passed=1)
    calls = [n for _, _, n in scored(suite)]
    probe, batches = calls[: len(PROBE)], calls[len(PROBE) :]
    assert probe == [len(batch) for batch in PROBE]  # a custom metric is probed when it is built
    assert sum(batches) == 4  # beta's steps 1 and 10, two runs each: not the set's 24


def _cuda() -> bool:
    if not gpu_driver_loaded():
        return False
    import torch

    return bool(torch.cuda.is_available())


@pytest.mark.skipif(not _cuda(), reason="CUDA is not available here")
def test_the_torch_example_runs_on_cuda(suite: pytest.Pytester) -> None:
    result = suite.runpytest_subprocess(
        "--dataset=data", "--metric=noise_sigma", "--device=cuda", "--no-cache"
    )
    result.assert_outcomes(passed=9)  # the torch twin of known_metrics:noise_level, lower is better


def test_asking_for_cuda_where_there_is_none_is_a_clear_error(suite: pytest.Pytester) -> None:
    if _cuda():
        pytest.skip("CUDA is available here")
    result = suite.runpytest_subprocess(
        "--dataset=data", "--metric=countmetric:First", "--device=cuda", "--no-cache"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --device=cuda: CUDA is not available on this machine*"])
