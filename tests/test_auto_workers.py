"""`-n auto` for the suite: as many workers as fit the usable cores (CPU affinity), each on the
thread policy's torch threads, serial below two; $PYTEST_XDIST_AUTO_NUM_WORKERS wins, as in
xdist. Other projects in the same environment keep xdist's own count."""

from __future__ import annotations

import sys

import pytest

from banana_tests.families.degradation import FAMILY as DEGRADATION
from banana_tests.plugin import pytest_xdist_auto_num_workers as auto_workers
from banana_tests.scheduler import worker_count
from banana_tests.session.ownership import SUITE_DIR
from tests.conftest import assert_outcomes, suite_folder
from tests.known_metrics import install_known_metrics

pytest.importorskip("xdist")


def workers(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    cores: int,
    *args: str,
    affinity: int | None = None,
    given: str | None = None,
    omp: str | None = None,
    memory_gb: float = 4096,
) -> int | None:
    """The hook's answer on a machine of `cores` cores of which the process may use `affinity`,
    with `memory_gb` available (the kernel's MemAvailable, as /proc/meminfo says it)."""
    monkeypatch.setattr(worker_count.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(worker_count.os, "sched_getaffinity", lambda pid: set(range(affinity or cores)))
    meminfo = pytester.path / "meminfo"
    meminfo.write_text(f"MemTotal: 1 kB\nMemAvailable: {int(memory_gb * 1e9 / 1024)} kB\n")
    monkeypatch.setattr(worker_count, "MEMINFO", meminfo)
    monkeypatch.setattr(worker_count, "CGROUP", pytester.path / "no-cgroup")
    for name, value in ((worker_count.AUTO_ENV, given), ("OMP_NUM_THREADS", omp)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    return auto_workers(pytester.parseconfig("-n", "auto", *args))


@pytest.mark.parametrize(
    ("cores", "affinity", "given", "omp", "expected"),
    [
        (2, None, None, None, 2),  # one torch thread per worker: a worker per core
        (64, None, None, None, 64),
        (1, None, None, None, 0),  # one worker would only pay the start-up again
        (64, 2, None, None, 2),  # a container's quota (affinity), not the host's cores
        (64, 1, None, None, 0),
        (8, None, None, "2", 4),  # OMP_NUM_THREADS=2: workers × threads fit the cores
        (2, None, None, "2", 0),  # one 2-thread process fills 2 cores
        (8, None, "3", None, 3),  # $PYTEST_XDIST_AUTO_NUM_WORKERS, as xdist reads it
        (8, None, "0", None, 0),
    ],
)
def test_workers_times_threads_fit_the_usable_cores(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    cores: int,
    affinity: int | None,
    given: str | None,
    omp: str | None,
    expected: int,
) -> None:
    for metrics in ("brisque", "brisque,niqe,piqe"):  # a metric spreads over workers: one is enough
        options = {"affinity": affinity, "given": given, "omp": omp}
        assert workers(pytester, monkeypatch, cores, f"--metric={metrics}", **options) == expected, metrics


def test_a_worker_count_that_is_no_number_is_ignored_with_a_warning(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.warns(UserWarning, match="PYTEST_XDIST_AUTO_NUM_WORKERS is not a number: 'many'"):
        assert workers(pytester, monkeypatch, 4, "--metric=brisque", given="many") == 4


def test_the_suite_folder_without_metric_option_counts_as_a_suite_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert workers(pytester, monkeypatch, 2, str(SUITE_DIR)) == 2
    assert workers(pytester, monkeypatch, 2, str(SUITE_DIR.parent)) == 2
    assert workers(pytester, monkeypatch, 2, f"{DEGRADATION.module}::test_detects_degradation") == 2


def test_another_projects_run_keeps_xdists_count(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_other="def test_x(): pass")

    assert workers(pytester, monkeypatch, 64, str(pytester.path)) is None


def test_the_suites_count_is_asked_before_xdists_whichever_plugin_registered_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pluggy asks the plugin registered last first; a venv's layout decides that order."""
    import pluggy
    import xdist.newhooks
    import xdist.plugin

    from banana_tests import plugin

    config = pytester.parseconfig(str(SUITE_DIR))
    monkeypatch.setattr(worker_count, "usable_cores", lambda: 64)
    monkeypatch.delenv(worker_count.AUTO_ENV, raising=False)
    for order in ((plugin, xdist.plugin), (xdist.plugin, plugin)):
        manager = pluggy.PluginManager("pytest")
        manager.add_hookspecs(xdist.newhooks)
        for module in order:
            manager.register(module)
        asked = manager.hook.pytest_xdist_auto_num_workers(config=config)
        assert (
            asked
            == plugin.pytest_xdist_auto_num_workers(config)
            != xdist.plugin.pytest_xdist_auto_num_workers(config)
        )


@pytest.mark.slow
def test_n_auto_starts_a_worker_per_core(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cores, one metric: two workers, each given seed images' cases."""
    suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5, 10, 20))
    pytester.makeconftest(
        "import os\nos.sched_getaffinity = lambda pid: {0, 1}\n"
    )  # 2 cores wherever it runs
    monkeypatch.delenv(worker_count.AUTO_ENV, raising=False)

    module = install_known_metrics(pytester.path)  # known verdicts, and no torch to import
    result = pytester.runpytest_subprocess(
        "--dataset=data", f"--metric={module}:noise_level", "-n", "auto", "--no-cache", "-v"
    )

    assert_outcomes(result, passed=6)  # noise_level detects every step
    assert "created: 2/2 workers" in result.stdout.str()
    ran_on = {line.split("]")[0] for line in result.outlines if "PASSED test_suite.py" in line}
    assert ran_on == {"[gw0", "[gw1"}, result.outlines


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
    from banana_tests.session.run_state import suite_of

    pytester.makepyfile(counted_factory=FACTORY)
    monkeypatch.syspath_prepend(pytester.path)
    config = pytester.parseconfig("-n", "auto", "--metric=piqe,counted_factory:make")

    auto_workers(config)
    state = suite_of(config)

    assert list(state.metrics) == ["piqe", "laplacian_variance"]
    assert sys.modules["counted_factory"].BUILDS == [1]


def test_cores_left_idle_leave_a_note_for_the_header(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = pytester.parseconfig("-n", "auto", "--metric=brisque,niqe,piqe")
    monkeypatch.setattr(worker_count.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.delenv(worker_count.AUTO_ENV, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert auto_workers(config) == 0
    note = config.stash[worker_count.AUTO_NOTE]
    assert "a serial run on 3 cores: 2 torch thread(s) per process" in note and "-n N overrides" in note


@pytest.mark.parametrize(
    ("metrics", "memory_gb", "expected", "why"),
    [
        ("ilniqe", 16, 5, "ilniqe peaks at 2.8 GiB a process and 14.9 GiB of memory is available"),
        ("brisque,ilniqe", 16, 5, "ilniqe peaks at 2.8 GiB"),  # a worker may run any of them
        ("brisque", 16, 14, "brisque peaks at 1.0 GiB a process"),
        ("ilniqe", 4, 0, "ilniqe peaks at 2.8 GiB"),  # one worker would not pay: serial
        ("ilniqe", 400, 64, None),  # cores, not memory, set the number: no note
    ],
)
def test_n_auto_starts_no_more_workers_than_fit_the_memory(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    metrics: str,
    memory_gb: float,
    expected: int,
    why: str | None,
) -> None:
    """Issue 40: 64 cores meant 64 workers whatever each model needs, and ILNIQE alone peaks at
    2.8 GB a process (about 180 GB for 64). 16 GB here is 16e9 bytes (14.9 GiB)."""
    assert workers(pytester, monkeypatch, 64, f"--metric={metrics}", memory_gb=memory_gb) == expected
    config = pytester.parseconfig("-n", "auto", f"--metric={metrics}")
    auto_workers(config)
    note = config.stash.get(worker_count.AUTO_NOTE, None)
    if why is None:
        assert note is None
    else:
        assert note is not None and why in note and "on 64 cores" in note and "-n N overrides" in note


@pytest.mark.slow
def test_n_auto_on_a_64_core_16_gb_machine_with_ilniqe_starts_five_workers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real run on the simulated machine: its cores and memory as the process reads them (CPU
    affinity, /proc/meminfo), ILNIQE selected, every case deselected (only the workers start)."""
    meminfo = pytester.path / "meminfo"
    meminfo.write_text(f"MemAvailable: {16 * 10**9 // 1024} kB\n")
    pytester.makeconftest(
        "import os\n"
        "from pathlib import Path\n"
        "from banana_tests.scheduler import worker_count\n"
        "os.sched_getaffinity = lambda pid: set(range(64))\n"
        f"worker_count.MEMINFO = Path({str(meminfo)!r})\n"
        f"worker_count.CGROUP = Path({str(pytester.path / 'no-cgroup')!r})\n"
    )
    monkeypatch.delenv(worker_count.AUTO_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    result = pytester.runpytest_subprocess(
        "--pyargs", "banana_tests", "--metric=ilniqe", "-n", "auto", "-k", "no_such_case", "--no-cache"
    )  # fmt: skip

    out = result.stdout.str()
    assert "created: 5/5 workers" in out, out
    assert "-n auto chose 5 workers on 64 cores: ilniqe peaks at 2.8 GiB a process and 14.9 GiB" in out
