"""Tuning the scoring process: a fixed torch thread count, and glibc keeping freed buffers."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from banana_tests.scoring import process_tuning
from banana_tests.scoring.process_tuning import SavedState, fix_threads, keep_freed_memory, score_threads

GLIBC = process_tuning._glibc() is not None


@pytest.mark.parametrize(
    ("workers", "omp", "expected"),
    [("2", None, [1]), ("4", None, [1]), ("", None, [1]), ("2", "2", [])],
)
def test_torch_scores_on_one_thread_serial_or_under_xdist(
    monkeypatch: pytest.MonkeyPatch, workers: str, omp: str | None, expected: list[int]
) -> None:
    """One thread whatever the worker count, so a Δ is the same; OMP_NUM_THREADS is torch's to obey."""
    calls: list[int] = []
    torch = types.SimpleNamespace(set_num_threads=calls.append, get_num_threads=lambda: 2)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(process_tuning, "SAVED", SavedState())  # this process's own is left alone
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", workers)
    if omp is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)

    fix_threads()

    assert calls == expected
    assert score_threads() == (int(omp) if omp else process_tuning.SCORE_THREADS)


CHURN = """
import ctypes, ctypes.util, resource, sys
from banana_tests.scoring.process_tuning import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
size = 64 * 2**20  # one batch's buffer: above glibc's 32 MiB mmap ceiling
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    p = libc.malloc(size)
    ctypes.memset(p, 1, size)
    libc.free(ctypes.c_void_p(p))
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    """Minor page faults of a fresh process that fills and frees a 64 MiB buffer 20 times."""
    env = {k: v for k, v in os.environ.items() if k not in process_tuning.USER_SETTINGS}
    cmd = [sys.executable, "-c", CHURN, mode]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return int(out.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_freed_buffers_are_reused_instead_of_faulted_in_again() -> None:
    pages = 64 * 2**20 // 4096

    kept, default = page_faults("keep"), page_faults("default")

    assert default > 15 * pages  # every round maps and faults in the buffer afresh
    assert kept < 3 * pages  # the first round faults it in; the rest reuse it


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_a_users_own_malloc_tuning_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")

    assert keep_freed_memory() is False


def test_nothing_to_tune_off_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process_tuning, "_glibc", lambda: None)

    assert keep_freed_memory() is False
    process_tuning.release_freed_memory()  # a no-op, not an error (no libc to call)


def test_release_gives_the_heaps_free_memory_back_to_the_kernel() -> None:
    """Between metrics the heap's free memory goes back: the process's resident size falls by
    what was freed inside the heap (which free() alone keeps, pinned under a live block)."""
    libc = process_tuning._glibc()
    if libc is None or not Path("/proc/self/statm").exists():
        pytest.skip("glibc and /proc are where the heap is trimmed")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")

    def resident() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * page

    blocks = [libc.malloc(64 * 1024) for _ in range(1600)]  # 100 MiB below the mmap threshold
    for block in blocks:
        ctypes.memset(block, 1, 64 * 1024)
    guard = libc.malloc(64 * 1024)  # above them all: free() cannot shrink the heap from its top
    for block in blocks:
        libc.free(block)
    before = resident()
    process_tuning.release_freed_memory()
    after = resident()
    libc.free(guard)
    assert before - after > 50 * 2**20, (before, after)


FREEZE = """
import atexit, gc
from banana_tests.scoring.process_tuning import freeze_heap_at_exit
before = atexit._ncallbacks()
freeze_heap_at_exit()
freeze_heap_at_exit()
assert atexit._ncallbacks() == before + 1, "registered once"
assert gc.get_freeze_count() == 0
atexit._run_exitfuncs()
print(gc.get_freeze_count())
"""


@pytest.mark.slow
def test_the_heap_is_frozen_at_exit_so_teardown_skips_its_collections() -> None:
    out = subprocess.run([sys.executable, "-c", FREEZE], capture_output=True, text=True, check=True)

    assert int(out.stdout) > 10_000  # every live object, out of the collector's view


COLLECTED = """
import gc, sys
from banana_tests.scoring.process_tuning import freeze_collected
setting = sys.argv[1]
if setting == "disabled":
    gc.disable()
elif setting == "1000":
    gc.set_threshold(1000, 10, 10)
before = gc.get_threshold()[0]
freeze_collected()
print(gc.get_freeze_count() > 10_000, before, gc.get_threshold()[0], gc.isenabled())
"""


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["python's", "1000", "disabled"])
def test_collection_is_frozen_and_young_objects_collected_less_often_unless_the_user_chose(
    setting: str,
) -> None:
    run = subprocess.run([sys.executable, "-c", COLLECTED, setting], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    frozen, before, after, enabled = run.stdout.split()

    assert frozen == "True"
    if setting == "python's" and int(before) == process_tuning.PYTHON_YOUNG_COLLECTION:
        assert (after, enabled) == (str(process_tuning.YOUNG_COLLECTION), "True")
    else:  # the user's threshold, or collection disabled: left as it was
        assert (after, enabled) == (before, str(setting != "disabled"))


@pytest.mark.slow
def test_a_suite_run_tunes_its_collector_after_collection(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("import gc\nAT_START = gc.get_threshold()[0]\n")
    pytester.makepyfile(
        test_own=f"""
        import gc
        from conftest import AT_START

        def test_collector(banana_metric):
            assert gc.get_freeze_count() > 10_000
            python_s = AT_START == {process_tuning.PYTHON_YOUNG_COLLECTION}
            assert gc.get_threshold()[0] == ({process_tuning.YOUNG_COLLECTION} if python_s else AT_START)
        """
    )
    result = pytester.runpytest_subprocess("--metric=laplacian_variance", "-p", "no:randomly")

    result.assert_outcomes(passed=1)


@pytest.mark.slow
def test_an_xdist_worker_keeps_its_tuning_to_its_exit(pytester: pytest.Pytester) -> None:
    """A worker's process ends with its session: nothing to hand back, and unfreezing there gave
    its exit a full collection over every object the run froze (docs/speed.md)."""
    pytester.makeconftest(
        """
        import gc
        from pathlib import Path
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_unconfigure(config):
            if hasattr(config, "workerinput"):
                Path("seen.txt").write_text(f"frozen at the worker's end: {gc.get_freeze_count()}")
        """
    )
    pytester.makepyfile(test_own="def test_collector(banana_metric):\n    pass\n")
    result = pytester.runpytest_subprocess("--metric=laplacian_variance", "-n", "1")

    result.assert_outcomes(passed=1)
    frozen = int((pytester.path / "seen.txt").read_text().split(":")[1])
    assert frozen > 10_000


# A suite run inside a longer-lived process (pytest.main, as a notebook or an in-process pytester
# would): the state it tunes, before and after, then glibc's handling of a 64 MiB buffer.
THREADS_SEEN = """
import torch
from known_metrics import noise_level
from metrics_under_test.protocol import metric

SEEN = []


@metric("noise_threads", lower_better=True, score_range=(0.0, 100.0), cost="fast")
def noise_threads(images):
    SEEN.append(torch.get_num_threads())
    return noise_level(images)
"""

AROUND_A_RUN = """
import gc, json, sys
import pytest
import torch


def subprocess_free_churn():
    import ctypes, ctypes.util, resource
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    size = 64 * 2**20
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        p = libc.malloc(size)
        ctypes.memset(p, 1, size)
        libc.free(ctypes.c_void_p(p))
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start

gc.unfreeze()
gc.set_threshold(700, 10, 10)
torch.set_num_threads(2)


def state():
    threads = torch.get_num_threads()
    return {"threshold": gc.get_threshold(), "frozen": gc.get_freeze_count(), "threads": threads}


class During:
    def pytest_runtest_call(self, item):
        self.state = state()


before, during = state(), During()
code = pytest.main(["test_suite.py", "--dataset=data", "--metric=threads_seen:noise_threads", "-q", "-p",
                    "no:randomly", "-p", "no:cacheprovider"], plugins=[during])
after = state()
faults = int(subprocess_free_churn()) if len(sys.argv) > 1 else None
import threads_seen
seen = {"code": int(code), "before": before, "during": during.state, "after": after, "faults": faults,
        "scoring_threads": sorted(set(threads_seen.SEEN))}
print(json.dumps(seen))
"""


@pytest.mark.slow
def test_a_suite_run_puts_back_what_it_tuned_in_its_process(suite: pytest.Pytester) -> None:
    """gc.freeze, the collector's threshold, torch's threads and glibc's thresholds were changed
    by a suite run and never put back."""
    env = {k: v for k, v in os.environ.items() if k not in (*process_tuning.USER_SETTINGS, "OMP_NUM_THREADS")}
    env["PYTEST_XDIST_WORKER_COUNT"] = "2"  # as in a worker: torch gets its share of the cores
    (suite.path / "threads_seen.py").write_text(THREADS_SEEN, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-c", AROUND_A_RUN, *(["churn"] if GLIBC else [])],
        cwd=suite.path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])

    assert seen["code"] == pytest.ExitCode.OK
    assert seen["during"]["threshold"][0] == process_tuning.YOUNG_COLLECTION  # it did tune them
    assert seen["during"]["frozen"] > 10_000
    # torch's threads are the scoring thread's, where the metric loads and scores
    assert seen["scoring_threads"] == [max(1, (os.cpu_count() or 1) // 2)]
    assert seen["after"] == seen["before"] == {"threshold": [700, 10, 10], "frozen": 0, "threads": 2}
    if GLIBC:  # no longer kept for reuse (as the run kept them): mapped and faulted in every round
        assert seen["faults"] > 15 * (64 * 2**20 // 4096)
