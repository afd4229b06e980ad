"""A metric that misbehaves, and a cache folder that refuses files (issue 25): one row each.

Each row runs the shipped suite (`--pyargs banana_tests`) in a subprocess on a tiny set, with
`misbehaving`, a numpy-only metric told by environment variables what to do: interrupt itself
(SIGINT, or SIGTERM as a cancelled CI job sends it), call sys.exit, return NaN for, sleep on or
raise on marked images (top-left pixel (1, 2, 3)), or run out of memory on batches of more than
4 images. A stop must
end the run with exit 2 in every family of cases; a bad score or a slow batch must error the
cases of those images only, naming each image and record.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from metrics_under_test.custom import PROBE
from tests.conftest import suite_folder, weights_mirror

MISBEHAVING = """
import math, os, signal, sys, time

from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric

CALLS = [0]


@metric("misbehaving", lower_better=False, score_range=(0.0, 2000.0))
def misbehaving(images):
    CALLS[0] += 1
    act = os.environ.get("MISBEHAVE", "")
    marked = [img[0, 0].tolist() == [1, 2, 3] for img in images]
    if CALLS[0] == int(os.environ.get("MISBEHAVE_AT", "1")):
        if act == "sigint":
            os.kill(os.getpid(), signal.SIGINT)
        if act == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        if act == "exit":
            sys.exit(3)
    if act == "sleep" and any(marked):
        time.sleep(float(os.environ["SLEEP"]))
    if act == "raise" and any(marked):
        raise ValueError("cannot score a marked image")
    if act == "oom" and (len(images) > 4 or any(marked)):
        raise MemoryError("no room for this batch")
    scores = laplacian_variance(images)
    if act == "nan":
        return [math.nan if m else s for m, s in zip(marked, scores)]
    if act == "huge":
        return [1e308 if m else s for m, s in zip(marked, scores)]
    if act == "bool":
        return [True if m else s for m, s in zip(marked, scores)]
    if act == "extra" and any(marked):
        return scores + [0.0]
    if act == "short" and any(marked):
        return scores[1:]
    if act == "none" and any(marked):
        return None
    return scores
"""
METRIC = "--metric=misbehaving:misbehaving"
# The options that run one family of the shipped cases, and the call to misbehave on: the first
# calls are the load-time probe's (metrics_under_test.custom), the next scores the family's first batch.
FIRST = len(PROBE) + 1
FAMILIES = {
    "delta": (["-k", "test_detects_degradation"], FIRST),
    "snapshot": (["-k", "test_scores_match_snapshot"], FIRST),
    "trend": (["--trend", "-k", "test_trend_detects_degradation"], FIRST),
    # the first example (noise sharpens the Laplacian, so it would fail and end the case: hypothesis
    # stops at the first failing one); after two failing ones hypothesis folded a KeyboardInterrupt
    # into "2 distinct failures" and the run went on
    "control": (["-k", "test_detects_control_degradation and gaussian_noise"], FIRST),
}


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    folder = suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))
    (folder.path / "misbehaving.py").write_text(MISBEHAVING)
    return folder


def run(suite: pytest.Pytester, *args: str) -> pytest.RunResult:
    return suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", METRIC, "--no-cache", "-p", "no:randomly", *args
    )


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["sigint", "sigterm", "exit"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_stop_ends_the_run_with_exit_2(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, family: str, stop: str
) -> None:
    options, at = FAMILIES[family]
    monkeypatch.setenv("MISBEHAVE", stop)
    monkeypatch.setenv("MISBEHAVE_AT", str(at))

    result = run(suite, *options)

    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, output[-3000:]
    if stop == "sigint":
        assert "KeyboardInterrupt" in output and "distinct failures" not in output
    elif stop == "sigterm":
        assert "SIGTERM received: banana-tests stops as on Ctrl-C" in output, output[-3000:]
        assert "distinct failures" not in output
    else:
        assert "misbehaving called sys.exit(3) while scoring; the run stops" in output


@pytest.mark.slow
def test_a_stop_in_an_xdist_worker_ends_the_run_and_says_why(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xdist's controller says only "received keyboard-interrupt": the worker names the sys.exit."""
    monkeypatch.setenv("MISBEHAVE", "exit")
    monkeypatch.setenv("MISBEHAVE_AT", str(FIRST))

    result = run(suite, "-k", "test_detects_degradation", "-n", "2")

    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "banana-tests: misbehaving called sys.exit(3) while scoring; the run stops" in result.stderr.str()


def mark(root: Path, file_name: str, size: tuple[int, int] | None = None) -> None:
    """Give one image the marked top-left pixel (and another size, if given), its sha256 updated."""
    path = root / file_name
    image = np.asarray(Image.open(path).convert("RGB")).copy()
    if size is not None:
        image = np.asarray(Image.fromarray(image).resize(size)).copy()
    image[0, 0] = (1, 2, 3)
    Image.fromarray(image).save(path)
    rows = [json.loads(line) for line in (root / "metadata.jsonl").read_text().splitlines()]
    for row in rows:
        if row["file_name"] == file_name:
            row["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def line_of(root: Path, file_name: str) -> str:
    rows = [json.loads(line)["file_name"] for line in (root / "metadata.jsonl").read_text().splitlines()]
    return f"metadata.jsonl:{rows.index(file_name) + 1} ({root / file_name})"


def outcomes(path: Path) -> dict[str, tuple[str, str]]:
    """Case id -> (outcome, message) from a JUnit report."""
    out = {}
    for case in ET.parse(path).iter("testcase"):
        kid = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        name = str(case.get("name"))
        out[name[name.index("[") + 1 : -1]] = (
            "passed" if kid is None else kid.tag,
            "" if kid is None else f"{kid.get('message', '')}\n{kid.text or ''}",
        )
    return out


@dataclass(frozen=True)
class Row:
    """Marks the images `marked` (resized to `size`), empties `emptied`, sets MISBEHAVE to `act`;
    the cases `errored` error and name each image of `named` with its record and `says`."""

    act: str
    marked: tuple[str, ...] = ()
    emptied: tuple[str, ...] = ()
    size: tuple[int, int] | None = None
    options: tuple[str, ...] = ()
    errored: frozenset[str] = frozenset()
    named: tuple[str, ...] = ()
    says: str = ""


A5 = ("alpha/run0/step005.png", "alpha/run1/step005.png")
ROWS = {
    # a NaN named a batch position and errored every case of the metric
    "non-finite score": Row(
        "nan",
        marked=A5[:1],
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5[:1],
        says="metric 'misbehaving' scored it nan, not a finite number",
    ),
    # 1e308 was taken, cached and merged; normalised, it overflowed to a Δ of +inf, a miss
    "a score beyond the bound": Row(
        "huge",
        marked=A5[:1],
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5[:1],
        says="metric 'misbehaving' scored it 1e+308, beyond ±1e+12",
    ),
    # a boolean is 1.0 to float(): it was taken as a score
    "a boolean score": Row(
        "bool",
        marked=A5[:1],
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5[:1],
        says="metric 'misbehaving' returned True, a boolean, not a score",
    ),
    # a wrong count raised on whichever case first asked for the batch, naming no file; now the
    # records of that batch (the two marked images, of a size of their own) error, each by file
    **{
        f"one score too {which}": Row(
            act,
            marked=A5,
            size=(64, 48),
            errored=frozenset({"misbehaving-alpha-step5"}),
            named=A5,
            says=f"metric 'misbehaving' returned {count} scores for a batch of 2 images, this one among them",
        )
        for which, act, count in (("many", "extra", 3), ("few", "short", 1))
    },
    "no scores at all": Row(
        "none",
        marked=A5[:1],
        size=(64, 48),
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5[:1],
        says="metric 'misbehaving' returned None, not one float per image",
    ),
    # under the run mean, a case named only its first bad record
    "two bad records in one mean": Row(
        "",
        emptied=A5,
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5,
        says="2 records cannot be scored: ",
    ),
    "a bad reference and a bad step in one run": Row(
        "",
        emptied=("beta/run1/step001.png", "beta/run1/step010.png"),
        options=("--aggregate=per-run",),
        errored=frozenset({f"misbehaving-beta-run1-step{s}" for s in (5, 10, 20)}),
        named=("beta/run1/step001.png",),
        says="image file is empty",
    ),
    # the exception landed, raw, on the case that first asked for the batch (alpha-step5's
    # neighbours too: every image of a batch of 16 shared it); now the marked image's case alone
    "an exception on one image of a batch": Row(
        "raise",
        marked=A5[:1],
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5[:1],
        says="misbehaving raised ValueError: cannot score a marked image",
    ),
    # out of memory on the batch of 16: smaller batches score the rest; the image that runs out
    # of memory alone errors
    "out of memory": Row(
        "oom",
        marked=A5[:1],
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5[:1],
        says="misbehaving raised MemoryError: no room for this batch",
    ),
    # a batch past --batch-timeout errors its images' cases; the other batch still scores
    "batch over the time limit": Row(
        "sleep",
        marked=A5[:1],
        size=(64, 48),
        options=("--batch-timeout=1",),
        errored=frozenset({"misbehaving-alpha-step5"}),
        named=A5[:1],
        says="no score within --batch-timeout=1: misbehaving's batch of 1 image(s) was stopped after 1 s",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS.values(), ids=list(ROWS))
def test_a_bad_score_errors_only_its_cases_naming_each_record(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, row: Row
) -> None:
    data = suite.path / "data"
    for file_name in row.marked:
        mark(data, file_name, row.size)
    for file_name in row.emptied:
        (data / file_name).write_bytes(b"")
    monkeypatch.setenv("MISBEHAVE", row.act)
    monkeypatch.setenv("SLEEP", "30")

    result = run(suite, "-k", "test_detects_degradation", "--junitxml=j.xml", *row.options)

    cases = outcomes(suite.path / "j.xml")
    assert {case for case, (outcome, _) in cases.items() if outcome == "error"} == row.errored
    others = [outcome for case, (outcome, _) in cases.items() if case not in row.errored]
    assert others and set(others) <= {"passed", "failure"}
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for case in row.errored:
        message = cases[case][1]
        assert row.says in message, message
        for file_name in row.named:
            assert line_of(data, file_name).removeprefix("metadata.jsonl") in message, message
    for file_name in set(row.emptied) - set(row.named):  # a step's image, in its own cases
        assert any(str(data / file_name) in cases[c][1] for c in row.errored)


@pytest.mark.slow
def test_a_long_batch_prints_a_heartbeat(suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    mark(suite.path / "data", A5[0], (64, 48))
    monkeypatch.setenv("MISBEHAVE", "sleep")
    monkeypatch.setenv("SLEEP", "2.6")

    result = run(suite, "-k", "alpha-step5 and test_detects_degradation", "--heartbeat=1", "-n", "2")

    lines = [line for line in result.stderr.lines if "still scoring" in line]
    assert [line.rsplit(", ", 1)[1] for line in lines] == ["1 s so far", "2 s so far"]
    assert lines[0].startswith("banana-tests: misbehaving still scoring a batch of 1 image(s) (")
    assert str(suite.path / "data" / A5[0]) in lines[0]
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)  # a verdict, no error
    assert not {"error", "errors"} & result.parseoutcomes().keys()
    quiet = run(suite, "-k", "alpha-step5 and test_detects_degradation", "--heartbeat=0")
    assert "still scoring" not in quiet.stderr.str() + quiet.stdout.str()


@pytest.mark.slow
def test_an_unwritable_cache_folder_errors_only_the_metrics_that_need_files(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a mirror to stage from and a TORCH_HOME that refuses writes, collection died with a
    raw PermissionError (exit 2, no case ran); now brisque's cases error and piqe's run."""
    from tests.bad_inputs.test_cache_images import read_only_folder

    published = weights_mirror()
    if published is None:
        pytest.skip("no pyiqa weights mirror: staging checks the file's sha256 before it writes")
    mirror = suite.path / "mirror"
    mirror.mkdir()
    shutil.copyfile(published / "brisque_svm_weights.pth", mirror / "brisque_svm_weights.pth")
    refusing = read_only_folder(suite.path) / "torch"
    monkeypatch.setenv("TORCH_HOME", str(refusing))
    monkeypatch.setenv("BANANA_WEIGHTS_DIR", str(mirror))

    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=brisque,piqe", "--no-cache",
        "--seed-image=alpha", "--steps=5", "-k", "test_detects_degradation", "--junitxml=j.xml",
    )  # fmt: skip

    cases = outcomes(suite.path / "j.xml")
    assert cases["piqe-alpha-step5"][0] in ("passed", "failure"), result.stdout.str()[-2000:]
    outcome, message = cases["brisque-alpha-step5"]
    assert outcome == "error"
    folder = refusing / "hub" / "pyiqa"
    assert f"brisque: cannot stage brisque_svm_weights.pth from {mirror} into {folder}" in message
    assert "set TORCH_HOME to a writable folder" in message


def test_staging_into_a_refusing_folder_names_it_for_the_metric_that_needs_it(tmp_path: Path) -> None:
    from metrics_under_test.weights import REFUSED, UnwritableCache, check_staged, stage
    from tests.bad_inputs.test_cache_images import read_only_folder

    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "a.pth").write_bytes(b"a")
    refused, fine = read_only_folder(tmp_path) / "hub" / "a.pth", tmp_path / "cache" / "a.pth"
    try:
        assert stage(mirror, [("a.pth", refused), ("a.pth", fine)]) == ["a.pth"]
        assert fine.read_bytes() == b"a"
        check_staged("other", [fine])
        expected = f"^m: cannot stage a.pth from {mirror} into {refused.parent}"
        with pytest.raises(UnwritableCache, match=expected):
            check_staged("m", [fine, refused])
    finally:
        REFUSED.pop(refused, None)


def test_a_batch_past_the_limit_is_abandoned_whatever_the_metric_does() -> None:
    """The limit is kept by the waiting thread, never raised inside the metric (a metric that
    caught Exception around its work caught the old SIGALRM's); the next batch gets a fresh thread."""
    import threading
    import time

    from banana_tests.scoring.metric_calls import WAIT_STEP, Abandoned, BatchTimeout, BatchWatch

    watch, reasons = BatchWatch(None, 0.2), list[Abandoned]()
    started = time.monotonic()
    limit = re.escape("no score within --batch-timeout=0.2: m's batch of 3 image(s) was stopped after 0.2 s")
    with pytest.raises(BatchTimeout, match=limit):
        watch.run("m", 3, "first", lambda: time.sleep(5), reasons.append)
    assert time.monotonic() - started < 0.2 + WAIT_STEP
    assert len(reasons) == 1 and re.match(limit, reasons[0].reason) and not reasons[0].interrupted
    threads: list[threading.Thread] = []

    def which() -> int:
        threads.append(threading.current_thread())
        return len(threads)

    assert [watch.run("m", 1, "first", which, reasons.append) for _ in range(2)] == [1, 2]
    assert threads[0].name == "banana-scoring" and threads[0] is not threading.current_thread()
    assert threads[0] is threads[1]  # one thread for the batches that finish


def test_pytest_timeouts_signal_interrupts_a_batch_between_two_waits() -> None:
    """pytest-timeout's signal method (a SIGALRM timer set before the batch) fires during it,
    within WAIT_STEP of its time; the heartbeat's lines come from the waiting thread meanwhile."""
    import signal
    import threading
    import time

    from banana_tests.scoring.metric_calls import WAIT_STEP, Abandoned, BatchWatch

    class Timeout(Exception):
        pass

    def theirs(signum: int, frame: object) -> None:
        raise Timeout("Timeout (>0.5s) from pytest-timeout.")

    lines: list[tuple[str, threading.Thread]] = []
    reasons: list[Abandoned] = []
    previous = signal.signal(signal.SIGALRM, theirs)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    started = time.monotonic()
    try:
        with pytest.raises(Timeout):
            say = lambda line: lines.append((line, threading.current_thread()))  # noqa: E731
            BatchWatch(0.15, None, say).run("m", 1, "first", lambda: time.sleep(5), reasons.append)
        assert time.monotonic() - started < 0.5 + WAIT_STEP
        assert signal.getsignal(signal.SIGALRM) is theirs
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert [line.rsplit(", ", 1)[1] for line, _ in lines] == ["0 s so far"] * 3
    assert lines[0][0] == "banana-tests: m still scoring a batch of 1 image(s) (first), 0 s so far"
    assert {thread for _, thread in lines} == {threading.main_thread()}
    interrupted = r"m's batch of 1 image\(s\) was stopped after 0\.[5-7] s by the case's interruption "
    why = r"\(Timeout \(>0\.5s\) from pytest-timeout\.\)"
    assert len(reasons) == 1 and re.fullmatch(interrupted + why, reasons[0].reason) and reasons[0].interrupted


@pytest.mark.slow
def test_a_model_file_that_does_not_fit_errors_that_metrics_cases_naming_it(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RALI checkpoint without one of the scorer's tensors (issue 28): RALI's cases error naming
    `RALI/ckpt.pt` and the key, the run goes on to its verdicts and ends failed, not aborted."""
    pytest.importorskip("joblib")
    from tests.test_vlm_adapters import tiny_rali_in_a_process, trust_pickles

    monkeypatch.setenv("HF_HUB_CACHE", str(suite.path / "hf"))
    tiny_rali_in_a_process(suite.path / "hf", "scorer.logit_scale")
    trust_pickles(monkeypatch, suite.path / "hf")

    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=RALI,piqe", "--no-cache", "--steps=5",
        "-k", "test_detects_degradation", "--junitxml=j.xml",
    )  # fmt: skip

    cases = outcomes(suite.path / "j.xml")
    assert {case for case, (outcome, _) in cases.items() if outcome == "error"} == {
        "rali-alpha-step5",
        "rali-beta-step5",
    }, result.stdout.str()[-2000:]
    assert {cases[f"piqe-{seed}-step5"][0] for seed in ("alpha", "beta")} <= {"passed", "failure"}
    for seed in ("alpha", "beta"):
        message = cases[f"rali-{seed}-step5"][1]
        assert "RALI/ckpt.pt does not match the model: missing ['scorer.logit_scale']" in message
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.slow
def test_pytest_timeout_stops_a_sleeping_batch_and_the_metric_is_hung_for_the_run(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under pytest-timeout's `--timeout=20` a metric asleep in a batch was still scoring after
    270 s: the heartbeat's SIGALRM suspended pytest-timeout's timer. Now the case that waits on
    the batch is stopped at its time and the metric is hung for the run (issue 40): its other
    cases error at once, each in the one line that names it and the phase, never waiting again."""
    import time

    mark(suite.path / "data", A5[0], (64, 48))
    monkeypatch.setenv("MISBEHAVE", "sleep")
    monkeypatch.setenv("SLEEP", "600")

    started = time.monotonic()
    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", METRIC, "--no-cache", "-p", "no:randomly",
        "-k", "test_detects_degradation", "--timeout=10", "--junitxml=j.xml", timeout=120,
    )  # fmt: skip
    took = time.monotonic() - started

    assert took < 30, took
    cases = outcomes(suite.path / "j.xml")
    hung = "metric 'misbehaving' hung in its batch: misbehaving's batch of "
    stopped = "by the case's interruption (Timeout (>10.0s) from pytest-timeout.)"
    assert len(cases) == 6 and {outcome for outcome, _ in cases.values()} == {"error"}, result.stdout.str()[
        -3000:
    ]
    for _, message in cases.values():
        assert hung in message and stopped in message, message
    assert result.ret == pytest.ExitCode.TESTS_FAILED
