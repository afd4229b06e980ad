"""`-n auto` for the suite: a worker per metric with at least two cores each, else serial;
other projects in the same environment keep xdist's own count."""

from __future__ import annotations

import sys

import pytest

from banana_tests.plugin import pytest_xdist_auto_num_workers as auto_workers
from banana_tests.scheduler import metric_groups as scheduler
from banana_tests.session.ownership import SUITE_DIR
from tests.conftest import assert_outcomes, suite_folder
from tests.known_metrics import install_known_metrics

pytest.importorskip("xdist")


def workers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cores: int, *args: str) -> int | None:
    monkeypatch.setattr(scheduler.os, "cpu_count", lambda: cores)
    return auto_workers(pytester.parseconfig("-n", "auto", *args))


@pytest.mark.parametrize(
    ("cores", "metrics", "expected"),
    [
        (2, "brisque,niqe,piqe", 0),  # one worker of 2 cores: serial, which uses both through torch
        (4, "brisque,niqe,piqe", 2),
        (8, "brisque,niqe,piqe", 3),  # a metric stays on one worker: a 4th would idle
        (64, "brisque", 0),
        (16, "brisque,niqe,piqe,laplacian_variance,noise_sigma", 5),
    ],
)
def test_a_worker_per_metric_with_two_cores_each(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cores: int, metrics: str, expected: int
) -> None:
    assert workers(pytester, monkeypatch, cores, f"--metric={metrics}") == expected


def test_the_suite_folder_without_metric_option_counts_as_a_suite_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert workers(pytester, monkeypatch, 2, str(SUITE_DIR)) == 0
    assert workers(pytester, monkeypatch, 2, str(SUITE_DIR.parent)) == 0
    assert (
        workers(pytester, monkeypatch, 2, f"{SUITE_DIR / 'test_degradation.py'}::test_detects_degradation")
        == 0
    )


def test_another_projects_run_keeps_xdists_count(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_other="def test_x(): pass")

    assert workers(pytester, monkeypatch, 64, str(pytester.path)) is None


def test_an_unknown_metric_is_left_to_the_usage_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert workers(pytester, monkeypatch, 8, "--metric=no_such_metric") is None


def test_n_auto_runs_the_suite_serially_on_two_cores(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite_folder(pytester, monkeypatch, seeds=("alpha",), runs=(0,), steps=(1, 5, 10, 20))
    pytester.makeconftest("import os\nos.cpu_count = lambda: 2\n")  # this machine's size, wherever it runs

    module = install_known_metrics(pytester.path)  # known verdicts, and no torch to import
    result = pytester.runpytest_subprocess(
        "--dataset=data", f"--metric={module}:noise_level,laplacian_variance", "-n", "auto", "--no-cache"
    )

    assert_outcomes(result, passed=3, missed=3)  # noise_level detects every step, the Laplacian none
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "created:" not in result.stdout.str()  # xdist started no workers


FACTORY = """
from metrics_under_test.examples import laplacian_variance

BUILDS = []


def make():
    BUILDS.append(1)
    return laplacian_variance
"""


def test_a_factory_metric_is_built_once_for_the_count_and_the_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from banana_tests.session.suite import SuiteState

    pytester.makepyfile(counted_factory=FACTORY)
    monkeypatch.syspath_prepend(pytester.path)
    config = pytester.parseconfig("-n", "auto", "--metric=piqe,counted_factory:make")

    auto_workers(config)
    state = SuiteState.from_config(config)

    assert list(state.metrics) == ["piqe", "laplacian_variance"]
    assert sys.modules["counted_factory"].BUILDS == [1]


def test_fewer_workers_than_cores_leave_a_note_for_the_header(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler.os, "cpu_count", lambda: 2)
    config = pytester.parseconfig("-n", "auto", "--metric=brisque,niqe,piqe")
    assert auto_workers(config) == 0
    note = config.stash[scheduler.AUTO_NOTE]
    assert "a serial run on 2 cores for 3 metric(s)" in note and "-n N overrides" in note
