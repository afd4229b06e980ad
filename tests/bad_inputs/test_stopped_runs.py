"""A run that stops before its end: it must never read as a pass.

SIGTERM (a cancelled CI job, `docker stop`, Kubernetes) stops a suite run as Ctrl-C does: exit
2, the workers stopped, the JUnit file of the cases that finished written, with the plan taken
when collection ended, so `banana-tests report` exits 3 naming how many of how many ran. A run
whose process ends (a metric calling `os._exit(0)`) exits 0 and writes no file: the gate reads
the file through `report`, which fails on a missing file in one line.

The suite runs in a child process of its own session (a signal to its group reaches no one
else), with SIGINT and SIGTERM at their defaults (tests.conftest.default_stops), on a tiny set
whose one marked image the metric sleeps on for good, so the run is still going whenever the
signal comes; the test waits for the file the metric touches when it starts sleeping.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from banana_tests.cli import main
from banana_tests.reports.merge_checks import INCOMPLETE_EXIT, PLANNED
from tests.bad_inputs.test_metric_misbehaves import mark
from tests.conftest import default_stops, write_set

STOPPING = """
import os, time
from pathlib import Path

from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric


@metric("stopping", lower_better=False, score_range=(0.0, 2000.0))
def stopping(images):
    if os.environ.get("STOPPING") == "exit":
        os._exit(0)
    if any(img[0, 0].tolist() == [1, 2, 3] for img in images):
        Path(os.environ["STOPPING_FLAG"]).touch()
        while True:  # a model that keeps computing, in Python, until stopped
            time.sleep(0.05)
    return laplacian_variance(images)
"""
WAIT = 300  # seconds: for the metric to start sleeping, or the run to end, on a loaded machine


def start(root: Path, *options: str, **env: str) -> subprocess.Popen[bytes]:
    """The suite on `root`'s set with `stopping`, in a session of its own; its output in root/out.txt."""
    (root / "stopping.py").write_text(STOPPING)
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "banana_tests", f"--dataset={root / 'set'}",
           "--metric=stopping:stopping", "--no-cache", "-p", "no:randomly", "-p", "no:cacheprovider",
           f"--junitxml={root / 'j.xml'}", *options]  # fmt: skip
    flag = str(root / "flag")
    child_env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(root), "STOPPING_FLAG": flag, **env}
    with (root / "out.txt").open("wb") as out:
        return subprocess.Popen(
            cmd, cwd=root, env=child_env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=default_stops,
        )  # fmt: skip


def group_gone(pgid: int) -> bool:
    """No process of the child's session is left (its workers included), waiting up to WAIT s."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def report(xml: Path, out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "banana_tests.cli", "report", str(xml), "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=WAIT, check=False)


@pytest.fixture
def stopped_set(tmp_path: Path) -> Path:
    """Two seed images; beta's step 20 is the marked image the metric sleeps on."""
    write_set(tmp_path / "set", seeds=("alpha", "beta"), runs=(0,), steps=(1, 5, 10, 20))
    mark(tmp_path / "set", "beta/run0/step020.png")
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stop", "to_group"),
    [(signal.SIGTERM, False), (signal.SIGTERM, True), (signal.SIGINT, True)],
    ids=["sigterm-controller", "sigterm-group", "ctrl-c"],
)
def test_a_run_stopped_under_xdist_exits_2_and_its_junit_reads_incomplete(
    stopped_set: Path, stop: signal.Signals, to_group: bool
) -> None:
    """`docker stop` signals the controller alone, a CI cancel or Ctrl-C the whole group."""
    root = stopped_set
    proc = start(root, "-n", "2")
    try:
        deadline = time.monotonic() + WAIT
        while not (root / "flag").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, (root / "out.txt").read_text()[-3000:]
        if to_group:
            os.killpg(proc.pid, stop)
        else:
            proc.send_signal(stop)
        status = proc.wait(timeout=WAIT)
        assert group_gone(proc.pid), "a worker outlived the run"
    finally:
        if proc.poll() is None or not group_gone(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    output = (root / "out.txt").read_text()
    assert status == pytest.ExitCode.INTERRUPTED, output[-3000:]
    if stop == signal.SIGTERM:
        assert "SIGTERM received: banana-tests stops as on Ctrl-C" in output, output[-3000:]
    xml = root / "j.xml"
    assert xml.exists(), output[-3000:]
    planned = [line for p in ET.parse(xml).iter("property") if p.get("name") == PLANNED
               for line in p.get("value", "").split("\n") if line]  # fmt: skip
    done = report(xml, root / "r")
    assert done.returncode == INCOMPLETE_EXIT, done.stderr
    stopped = [line for line in done.stderr.splitlines() if "its run stopped before its end" in line]
    assert len(stopped) == 1 and stopped[0].startswith(f"{xml}: "), done.stderr
    assert stopped[0].endswith(f" of {len(planned)} planned case(s) ran") and len(planned) > 1, done.stderr


@pytest.mark.slow
def test_a_metric_that_ends_the_process_leaves_no_junit_and_the_gates_report_fails(stopped_set: Path) -> None:
    """`os._exit(0)` in the metric: pytest exits 0 with no file; the recipe's `report` exits 2."""
    proc = start(stopped_set, STOPPING="exit")
    assert proc.wait(timeout=WAIT) == 0
    assert not (stopped_set / "j.xml").exists()
    done = report(stopped_set / "j.xml", stopped_set / "r")
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and f"{stopped_set / 'j.xml'}: no such file" in err[0], done.stderr
    assert not (stopped_set / "r").exists()


def test_report_on_a_missing_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "reports" / "gate.xml"
    assert main(["report", str(missing), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{missing}: no such file" in err[0] and "its process ends before" in err[0]
    assert not (tmp_path / "r").exists()
