"""A metric in a worker: its model built behind its spec, a custom one probed, one held at a time,
and every call to it (its import, construction and probe, each batch) watched.

Loading builds the model (the backend imported only then) and probes a custom metric; why one
could not load is remembered, so each of its cases fails alike without building it again. A model
that failed to build fails again at once, and a metric that hung is never built again (`Hung`).
Dropping the model returns its memory before anything else allocates.

A batch that runs long gets a line on the terminal every so often, and an optional time limit,
without taking a signal another plugin uses; a metric stopped for hanging is hung for the run.
A metric taking 30 s an image showed nothing for minutes, and a hung one held the run forever.
The batch runs in a scoring thread while the calling thread waits for it in steps of at most
WAIT_STEP seconds, printing the lines and keeping the limit itself. A signal meant for the caller
(pytest-timeout's SIGALRM, Ctrl-C) is handled between two steps, never inside torch code, so
pytest-timeout's `--timeout` bounds a case that waits on a batch. Loading a metric (its import,
construction and probe) runs the same way, within a load limit. A call stopped either way is
abandoned: `on_abandon` drops what it is using (the model) so that nothing of it is used again,
and the thread is stopped at its next Python instruction by an `AbandonedCall` raised in it (a
thread cannot be killed; one that kept running kept allocating until the process ended). The
exception unwinds the call's frames, so what they hold is freed; a model it leaves half-updated is
never used again. Code that never returns to Python (a C loop) is not stopped, but it allocates
nothing through Python either.

Since the abandoned call may still be inside the model, or inside the import of the metric's
module holding that module's import lock, using the metric again could wait forever (a second
import blocks on the lock) or read a half-updated model, and waiting out the limit again in every
case made one hung constructor cost 24 × `--timeout`. So a metric that hung is `Hung` for the rest
of the run: its remaining cases error at once, in one line naming it and the phase that hung.
"""

from __future__ import annotations

import ctypes
import enum
import gc
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, TypeVar

from banana_tests.scoring.process_tuning import release_freed_memory
from metrics_under_test.protocol import Metric, MetricError
from metrics_under_test.spec import Backend, MetricSpec
from metrics_under_test.weights import MissingWeights, NotPublished, UnwritableCache

HEARTBEAT_SECONDS = 30.0
WAIT_STEP = 0.25  # the longest a signal for the calling thread waits to be handled

T = TypeVar("T")


class BatchTimeout(Exception):
    """A batch ran past the time limit and was abandoned; its images have no score."""


class MetricHangs(MetricError):
    """A metric's import, construction or probe ran past the load limit and was abandoned."""


def to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass
class _Job(Generic[T]):
    """One call for the scoring thread, and what came of it."""

    call: Callable[[], T]
    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # the caller's to raise: sys.exit in a metric stops the run
            self.error = exc
        finally:
            self.done.set()

    def outcome(self) -> T:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]  # set when error is not


class AbandonedCall(BaseException):
    """Raised inside an abandoned scoring thread to end its call: no one waits for its result."""


class ScoringThread:
    """A daemon thread running jobs one after another: torch and OpenMP keep their per-thread
    state (thread pool, settings) from one batch to the next, as they did in the main thread."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job[object]] = queue.SimpleQueue()
        self.abandoned = False
        self._thread = threading.Thread(target=self._serve, name="banana-scoring", daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], T]) -> _Job[T]:
        job = _Job(call)
        self._jobs.put(job)  # type: ignore[arg-type]  # the queue only runs jobs and sets their results
        return job

    def abandon(self) -> None:
        """Stop serving, and end the running call at its next Python instruction."""
        self.abandoned = True
        ident = self._thread.ident
        if ident is not None and self._thread.is_alive():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(AbandonedCall))

    def _serve(self) -> None:
        try:
            while not self.abandoned:  # an abandoned thread ends after its job: its result is no one's
                self._jobs.get().run()  # unnamed: no reference to a job (and its model) outlives it
        except AbandonedCall:  # raised between two jobs rather than inside one
            pass


class Phase(enum.StrEnum):
    """A part of a metric's life that the watch bounds."""

    IMPORT = "import"
    CONSTRUCTION = "construction"
    PROBE = "probe"
    BATCH = "batch"


@dataclass(frozen=True)
class Limit:
    """How long a metric may take to load, and the option that says so (for messages)."""

    seconds: float
    option: str  # "--timeout=10" (pytest-timeout's) or "--load-timeout=600"


LOAD_SECONDS = 600.0
DEFAULT_LOAD_LIMIT = Limit(LOAD_SECONDS, f"--load-timeout={LOAD_SECONDS:g}")


@dataclass(frozen=True)
class Abandoned:
    """A watched call the caller stopped waiting for: why, and whether the wait was interrupted
    (pytest-timeout, Ctrl-C) rather than past the watch's own limit."""

    reason: str
    interrupted: bool


@dataclass
class BatchWatch:
    """`heartbeat`: seconds between "still scoring" lines (None: none); `timeout`: seconds a batch
    may take (None: no limit); `load_limit`: how long importing, building or probing a metric may
    take; `say` writes one line where the user sees it."""

    heartbeat: float | None = HEARTBEAT_SECONDS
    timeout: float | None = None
    say: Callable[[str], None] = to_stderr
    load_limit: Limit = DEFAULT_LOAD_LIMIT
    _thread: ScoringThread | None = field(default=None, init=False, repr=False)

    def run(
        self,
        metric: str,
        size: int,
        first: str,
        call: Callable[[], T],
        on_abandon: Callable[[Abandoned], None],
    ) -> T:
        """`call()`, one call of `metric` on `size` images, `first` naming the first of them. Past
        the time limit, or when the wait is interrupted (pytest-timeout, Ctrl-C), the batch is
        abandoned: `on_abandon` is told why, then BatchTimeout or the interruption is raised."""
        more = f" and {size - 1} more" if size > 1 else ""

        def over(elapsed: float) -> BatchTimeout:
            return BatchTimeout(
                f"no score within --batch-timeout={self.timeout:g}: {metric}'s batch of {size} "
                f"image(s) was stopped after {self.timeout:g} s; the other batches still run"
            )

        return self._wait(
            call,
            self.timeout,
            over,
            f"{metric} still scoring a batch of {size} image(s) ({first}{more})",
            f"{metric}'s batch of {size} image(s)",
            on_abandon,
        )

    def load(
        self, metric: str, phase: Phase, call: Callable[[], T], on_abandon: Callable[[Abandoned], None]
    ) -> T:
        """`call()`, one phase of loading `metric` (its import, construction or probe), within
        `load_limit`; past it, or interrupted, it is abandoned as a batch is, raising MetricHangs
        or the interruption."""
        limit = self.load_limit

        def over(elapsed: float) -> MetricHangs:
            return MetricHangs(f"no answer within {limit.option} ({elapsed:.1f} s)")

        return self._wait(call, limit.seconds, over, f"{metric} still in its {phase}", "it", on_abandon)

    def _wait(
        self,
        call: Callable[[], T],
        limit: float | None,
        over: Callable[[float], Exception],
        still: str,
        what: str,
        on_abandon: Callable[[Abandoned], None],
    ) -> T:
        """`call()` in the scoring thread, waited on in steps: past `limit` seconds `over(elapsed)`
        is raised; every heartbeat the `still` line is said; an interruption names the call `what`."""
        if self._thread is None:
            self._thread = ScoringThread()
        job = self._thread.submit(call)
        start = time.monotonic()
        beats = 0
        try:
            while not job.done.wait(self._step(time.monotonic() - start, beats, limit)):
                elapsed = time.monotonic() - start
                if limit is not None and elapsed >= limit:
                    raise over(elapsed)
                if self.heartbeat and elapsed >= (beats + 1) * self.heartbeat:
                    beats = int(elapsed // self.heartbeat)
                    self.say(f"banana-tests: {still}, {elapsed:.0f} s so far")
        except BaseException as exc:
            self._thread.abandon()
            self._thread = None
            if isinstance(exc, BatchTimeout | MetricHangs):
                on_abandon(Abandoned(str(exc), interrupted=False))
            else:
                on_abandon(Abandoned(_interrupted(what, exc, start), interrupted=True))
            raise
        return job.outcome()

    def _step(self, elapsed: float, beats: int, limit: float | None) -> float:
        """How long to wait next: WAIT_STEP, or less when a line or the limit falls due sooner."""
        due = [WAIT_STEP]
        if self.heartbeat:
            due.append((beats + 1) * self.heartbeat - elapsed)
        if limit is not None:
            due.append(limit - elapsed)
        return max(min(due), 0.0)


def _interrupted(what: str, exc: BaseException, start: float) -> str:
    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{what} was stopped after {time.monotonic() - start:.1f} s by the case's interruption ({why})"


class MetricHung(MetricError):
    """A case of a metric that hung earlier in the run, or the case that stopped it."""


@dataclass(frozen=True)
class Hung:
    """`metric` hung in `phase`; `reason` says what stopped it (the limit, or the case's
    interruption by pytest-timeout)."""

    metric: str
    phase: Phase
    reason: str

    def line(self) -> str:
        return (
            f"metric {self.metric!r} hung in its {self.phase}: {self.reason}; its other cases in this "
            "run error without waiting"
        )

    def error(self) -> MetricHung:
        return MetricHung(self.line())


Loader = Callable[[MetricSpec, str], Metric]
Prober = Callable[[MetricSpec, Metric], None]
# Load failures the suite's rules tell apart, and what a metric raises about itself rather than
# an image: the whole metric's cases error.
KEPT = (MissingWeights, UnwritableCache, NotPublished, MetricError)


@dataclass(frozen=True)
class LoadFailure:
    """Why a metric could not load, kept as its exception's type and message, never the object."""

    metric: str
    kind: type[Exception]
    message: str

    def again(self) -> Exception:
        """A new exception for the next case: of the same type when the suite's rules read it
        (a skip for MissingWeights, one line for UnwritableCache, NotPublished and MetricError), else a
        MetricError in one line; the first case showed the whole traceback."""
        if self.kind in KEPT:
            return self.kind(self.message)
        return MetricError(
            f"metric {self.metric!r} could not load: {self.kind.__name__}: {self.message} "
            "(the traceback is in the first case that loaded it)"
        )


def load_metric(spec: MetricSpec, device: str) -> Metric:
    """Build the metric behind `spec` and probe it (`probe_custom`); the backend is imported only
    now. The process is left as it is: a suite run tunes its own
    (banana_tests.core.suite.tuned_load)."""
    metric = built_metric(spec, device)
    probe_custom(spec, metric)
    return metric


def probe_custom(spec: MetricSpec, metric: Metric) -> None:
    """A custom metric's load-time probe (metrics_under_test.custom); the others have none."""
    if spec.backend is Backend.CUSTOM:
        from metrics_under_test.custom import probe

        probe(spec.name, metric)


def built_metric(spec: MetricSpec, device: str) -> Metric:
    """The metric behind `spec`, built, not yet probed: the book bounds the two apart."""
    if spec.backend is Backend.CUSTOM:
        from metrics_under_test.custom import build

        return build(spec, device, probed=False)
    if spec.backend is Backend.VLM:
        from metrics_under_test import vlm

        return vlm.build(spec, device)
    from metrics_under_test.pyiqa_backend import PyiqaMetric

    return PyiqaMetric(spec, device)


class HeldModel:
    """The worker's current model, and what it remembers of the metrics that could not load."""

    def __init__(
        self,
        device: str,
        loader: Loader,
        prober: Prober | None,
        watch: BatchWatch,
        hung: Mapping[str, Hung] | None = None,
    ) -> None:
        self.device = device
        self.watch = watch
        self.hung: dict[str, Hung] = dict(hung or {})  # stopped for the run, by metric name
        self._loader = loader
        self._prober = prober
        self._current: tuple[str, Metric] | None = None
        self._broken: dict[str, LoadFailure] = {}

    def load_failed(self, spec: MetricSpec) -> bool:
        """Whether the metric could not be built in this process (its cases say so; see LoadFailure)."""
        return spec.name in self._broken

    def abandon(self, spec: MetricSpec, phase: Phase) -> Callable[[Abandoned], None]:
        """What abandoning `spec` in `phase` does: forget the current model (the abandoned thread
        may still be inside it). Past --batch-timeout the next batch builds a new one; a load
        phase stopped either way, or a batch stopped by the case's interruption (pytest-timeout),
        leaves the metric hung for the run."""

        def abandon(abandoned: Abandoned) -> None:
            self._current = None
            if abandoned.interrupted or phase is not Phase.BATCH:
                self.hung[spec.name] = Hung(spec.name, phase, abandoned.reason)

        return abandon

    def check_hung(self, spec: MetricSpec) -> None:
        if spec.name in self.hung:
            raise self.hung[spec.name].error()

    def _load(self, spec: MetricSpec) -> Metric:
        """Build the metric, then probe it, each in the scoring thread within the load limit."""
        metric = self._phase(spec, Phase.CONSTRUCTION, partial(self._loader, spec, self.device))
        if self._prober is not None:
            self._phase(spec, Phase.PROBE, partial(self._prober, spec, metric))
        return metric

    def _phase(self, spec: MetricSpec, phase: Phase, call: Callable[[], T]) -> T:
        try:
            return self.watch.load(spec.name, phase, call, self.abandon(spec, phase))
        except MetricHangs:
            raise self.hung[spec.name].error() from None

    def get(self, spec: MetricSpec) -> Metric:
        """The metric's model. One that failed to load fails again without building, as a fresh
        exception (LoadFailure.again): re-raising the first one grew its traceback by every case
        that met it, and carried the notes another test (hypothesis) added to it. One that hung
        is never built again (`Hung`)."""
        self.check_hung(spec)
        if spec.name in self._broken:
            raise self._broken[spec.name].again() from None
        if self._current is not None and self._current[0] == spec.name:
            return self._current[1]
        if self._current is not None:
            self._current = None  # drop the previous model before building the next
            gc.collect()  # a full pass costs ~0.25 s with torch loaded: only when a model is dropped
            release_freed_memory()
        try:
            metric = self._load(spec)
        except MetricHung:
            raise
        except Exception as exc:
            self._broken[spec.name] = LoadFailure(spec.name, type(exc), str(exc))
            raise
        self._current = (spec.name, metric)
        return metric

    def drop(self) -> None:
        """After a metric ran out of memory: drop its model, and what the model holds, before
        anything else allocates (pytest's report of the case, xdist's message to its controller),
        so the process goes on; the next batch builds the model again."""
        self._current = None
        gc.collect()
        release_freed_memory()
