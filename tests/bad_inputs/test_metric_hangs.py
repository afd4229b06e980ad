"""A metric that hangs, in each phase of its life (issue 40): one row each.

Each row runs the shipped suite (`--pyargs banana_tests`) in a subprocess with `hanging`, a
numpy-only metric whose module import, constructor or calls sleep for an hour, as told by
environment variables. The run must end within 60 s with one line per case naming the metric and
the phase that hung: the metric is stopped once, within `--timeout` (or `--load-timeout` without
it), and is hung for the run; no case waits again, in any family (the control family runs
under hypothesis, which swallows pytest-timeout's stop), serial or under xdist. Each such case is an
error, in the terminal, JUnit and summary.md, wherever the metric hung (issue 50). A hung call
that keeps allocating is measured by the last row (issue 50: no bound yet).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.bad_inputs.test_metric_misbehaves import outcomes
from tests.conftest import suite_folder

HANGING = """
import os, time

from metrics_under_test.examples import laplacian_variance

HANG = os.environ.get("HANG", "")
CALLS = [0]
HELD = []  # the chunks a growing hang allocated, by the time each was
if HANG == "import":
    time.sleep(3600)


def grow():
    import atexit, json, numpy as np

    atexit.register(lambda: open(os.environ["GROW_LOG"], "w").write(json.dumps([t for t, _ in HELD])))
    while len(HELD) < int(os.environ["GROW_CAP"]):  # 64 MiB every 0.25 s, every page touched
        HELD.append((time.monotonic(), np.ones(64 << 20, dtype=np.uint8)))
        time.sleep(0.25)
    time.sleep(3600)


class Hanging:
    name = "hanging"
    lower_better = False
    score_range = (0.0, 2000.0)
    cost = "fast"

    def __init__(self):
        if HANG == "construction":
            time.sleep(3600)

    def __call__(self, images):
        CALLS[0] += 1  # the load-time probe makes the first two calls
        if HANG == "call" and CALLS[0] > int(os.environ.get("HANG_AFTER", "0")):
            time.sleep(3600)
        if HANG == "grow" and CALLS[0] > 2:
            grow()
        return laplacian_variance(images)


class Slow:
    name = "slow"
    lower_better = False
    score_range = (0.0, 2000.0)
    cost = "fast"

    def __call__(self, images):
        time.sleep(0.7)  # its probe's two calls and a batch fit in --timeout=3
        return laplacian_variance(images)
"""
DELTA_AND_CONTROL = ("-k", "test_detects_degradation or test_detects_control_degradation")
CASES = 6 + 3  # 2 seed images x 3 steps, and 3 control distortions
WITHIN_S = 60


@dataclass(frozen=True)
class Row:
    """`HANG` (and `HANG_AFTER`) for the metric, the options of the run; every case then names
    `metric` and `phase` in one line."""

    hang: str
    options: tuple[str, ...]
    phase: str
    hang_after: int = 0
    metric: str = "hanging"
    cases: int = CASES
    timed_out: int = 0  # the first cases, which error for --batch-timeout instead


ROWS = {
    # full suite families, no output for 600 s (killed): hypothesis ran the next example after
    # pytest-timeout's stop, and that hung again with no alarm left
    # and every family: Δ, control, invariance and the score snapshot
    "constructor, --timeout": Row("construction", ("--timeout=10",), "construction", cases=CASES + 5 + 1),
    # hung inside pytest_configure, silently, forever
    "import, --timeout": Row(
        "import", ("--timeout=10", *DELTA_AND_CONTROL), "import", metric="hanging:Hanging"
    ),
    # killed at 150 s: the batch stopped by --batch-timeout rebuilt the metric, whose probe ran on
    # the main thread, where no timeout applied (the first case errors for the batch's time limit;
    # the next one rebuilds the metric)
    "probe on rebuild, --timeout": Row(
        "call",
        ("--timeout=10", "--batch-timeout=3", "-k", "control and (noise or blur)"),
        "probe",
        hang_after=2,
        cases=2,
        timed_out=1,
    ),
    # every call after the probe hangs: pytest-timeout stops the control case's first example
    "control family's batch, --timeout": Row(
        "call", ("--timeout=10", "-k", "test_detects_control_degradation"), "batch", hang_after=2, cases=3
    ),
    # without pytest-timeout, the load limit
    "constructor, --load-timeout": Row(
        "construction", ("--load-timeout=5", *DELTA_AND_CONTROL), "construction"
    ),
    "import, --load-timeout": Row(
        "import", ("--load-timeout=5", *DELTA_AND_CONTROL), "import", metric="hanging:Hanging"
    ),
    # under xdist: each worker stops the metric once; an import hung in the controller is not
    # imported again by its workers
    "constructor, --timeout, -n 2": Row(
        "construction", ("--timeout=10", "-n", "2", *DELTA_AND_CONTROL), "construction"
    ),
    "import, --timeout, -n 2": Row(
        "import", ("--timeout=10", "-n", "2", *DELTA_AND_CONTROL), "import", metric="hanging:Hanging"
    ),
}


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    folder = suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))
    (folder.path / "hanging.py").write_text(HANGING)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("row", ROWS.values(), ids=list(ROWS))
def test_a_hanging_metric_is_stopped_once_and_each_case_says_so_in_one_line(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, row: Row
) -> None:
    monkeypatch.setenv("HANG", row.hang)
    monkeypatch.setenv("HANG_AFTER", str(row.hang_after))

    started = time.monotonic()
    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=hanging:Hanging", "--no-cache",
        "-p", "no:randomly", "--junitxml=j.xml", *row.options, timeout=WITHIN_S + 60,
    )  # fmt: skip
    took = time.monotonic() - started

    assert took < WITHIN_S, (took, result.stdout.str()[-3000:])
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    cases = outcomes(suite.path / "j.xml")
    assert len(cases) == row.cases, cases
    says = f"metric {row.metric!r} hung in its {row.phase}: "
    for n, (case, (outcome, message)) in enumerate(cases.items()):
        assert outcome == "error", (case, outcome)  # a call that hung was a failure
        attribute, text = message.split("\n", 1)
        assert text.strip().count("\n") == 0, (case, message)
        if n < row.timed_out:
            assert "no score within --batch-timeout=3" in attribute, (case, message)
            continue
        assert says in attribute, (case, message)
        assert "its other cases in this run error without waiting" in text, (case, message)


def test_a_hung_metric_is_never_built_again_and_errors_at_once() -> None:
    """In one process: the constructor that sleeps is abandoned at the load limit, and every
    later use of the metric (scores, its model) errors without calling the loader again."""
    from banana_tests.scoring.metric_calls import WAIT_STEP, BatchWatch, Limit, MetricHung
    from banana_tests.scoring.score_book import ScoreBook
    from metrics_under_test.spec import Backend, MetricSpec

    built: list[str] = []

    def sleeping_loader(spec: MetricSpec, device: str) -> object:
        built.append(spec.name)
        time.sleep(30)
        raise AssertionError("abandoned long before")

    watch = BatchWatch(None, None, load_limit=Limit(0.3, "--load-timeout=0.3"))
    book = ScoreBook("cpu", loader=sleeping_loader, watch=watch)  # type: ignore[arg-type]
    spec = MetricSpec("sleepy", Backend.CUSTOM, 0.0, 1.0, False)
    line = "metric 'sleepy' hung in its construction: no answer within --load-timeout=0.3"
    started = time.monotonic()
    with pytest.raises(MetricHung, match=line):
        book.model(spec)
    assert time.monotonic() - started < 0.3 + WAIT_STEP + 0.5
    started = time.monotonic()
    for use in (lambda: book.model(spec), lambda: book.scores(spec, []), lambda: book.score_pixels(spec, [])):
        with pytest.raises(MetricHung, match=line):
            use()
    assert time.monotonic() - started < 0.1 and built == ["sleepy"]


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_hang_inside_the_search_is_an_error_in_the_terminal_junit_and_summary(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    """It was FAILED (`HungOutcome`) in the terminal and JUnit, and an error in summary.md."""
    from banana_tests.cli import main

    monkeypatch.setenv("HANG", "call")
    monkeypatch.setenv("HANG_AFTER", "2")  # the probe's two calls, then the search's first hangs

    started = time.monotonic()
    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=hanging:Hanging", "--no-cache",
        "-p", "no:randomly", "--junitxml=j.xml", "--timeout=10", "--search=2", "-k", "test_no_worst_escape",
        "-n", workers, "-rE", timeout=WITHIN_S + 60,
    )  # fmt: skip

    assert time.monotonic() - started < WITHIN_S, result.stdout.str()[-3000:]
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    result.assert_outcomes(errors=1)
    [line] = [x for x in result.outlines if x.startswith("ERROR ")]
    # pytest cuts the short summary line at 80 columns, and the path is longer now
    assert line.startswith("ERROR families/search/test_search.py::test_no_worst_escape[hanging] - HungOut")
    assert sum(x.startswith("metric 'hanging' hung in its batch: ") for x in result.outlines) == 1
    cases = outcomes(suite.path / "j.xml")
    assert list(cases) == ["hanging"] and cases["hanging"][0] == "error", cases
    report = ["report", str(suite.path / "j.xml"), f"--out={suite.path / 'report'}", "--allow-incomplete"]
    assert main(report) == 0  # -k narrowed the run: a partial merge, allowed here
    assert "| hanging | error |" in (suite.path / "report" / "summary.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_hung_call_stops_growing_once_it_is_stopped(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that allocates 64 MiB every 0.25 s is stopped by --timeout=3; the run goes on with
    another metric for seconds. Bounded: no chunk is allocated later than the 3 s window, with a
    second's slack. It went on allocating while the other metric scored, until the process ended
    (3 of 9 chunks after the stop), before the abandoned thread was stopped by an exception."""
    import json

    log = suite.path / "grow.json"
    monkeypatch.setenv("HANG", "grow")
    monkeypatch.setenv("GROW_CAP", "32")
    monkeypatch.setenv("GROW_LOG", str(log))

    result = suite.runpytest_subprocess(
        "--pyargs", "banana_tests", "--dataset=data", "--metric=hanging:Hanging,hanging:Slow", "--no-cache",
        "-p", "no:randomly", "--junitxml=j.xml", "--timeout=3", "-k", "test_detects_degradation",
        timeout=WITHIN_S + 60,
    )  # fmt: skip

    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()[-3000:]
    cases = outcomes(suite.path / "j.xml")
    assert {c for c, (o, _) in cases.items() if o == "error"} == {
        c for c in cases if c.startswith("hanging-")
    }
    assert len(cases) == 12  # every planned case: 2 metrics x 2 seed images x 3 steps
    chunks = json.loads(log.read_text())
    later = [t - chunks[0] for t in chunks if t - chunks[0] > 3 + 1]  # the call began by its first chunk
    assert not later, (
        f"{len(later)} of {len(chunks)} chunks allocated after the stop, the last at {later[-1]:.1f} s"
    )
