"""One metric on trial as a test sees it, and the cases its faults leave without a verdict.

A `Scorer` is what the public `banana_metric` fixture yields. It scores records of the trajectory
set, image files and in-memory images through the worker's `ScoreBook` (one model per worker,
batches of one size, the persistent score cache), and computes Δ with the same engine as the
shipped cases. Loading follows the gate's rule: a metric whose parameters are missing skips a
test when only `offline` or `all` chose it, and fails it otherwise (named with `--metric`, or one
of the default metrics), with a hint that runs as printed.

A metric that cannot load, whose environment is broken (banana_tests.scoring.returned_scores), or an image
that cannot be read leaves its case without a verdict (`NoVerdict`), in every family: an error in
one line naming the metric, the input and the exception, never a verdict a baseline could list. A
traceback through the suite's frames would show their locals (the run's state, the batch's
records) and, for a truncated image, the decoder's chained one. The reporter files such a case
as an error (banana_tests.session.reporter), also when a baseline expects it to fail.

A metric that raised on an image the suite made for a check (a control or an invariance crop,
`cannot_check`): a fault of its environment (a missing file, no network, a library that does not
import, no memory) is the case's error; any other exception is the metric's answer to that input,
the check's failing verdict, which a baseline can list (docs/metrics.md, "Inputs a metric
needs"). The hint to declare `min_side` comes only when the size is what it rejected: the input
is smaller than the load-time probe's crops, which the metric scored, or no larger than its own
`min_side`, or the exception speaks of a size.

Nothing here imports torch, pyiqa or numpy: the model is built on the first score that the cache
does not hold, never when the fixture is set up.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeAlias, TypeVar

import pytest
from _pytest.outcomes import Failed  # `pytest.fail.Exception`: pytest shows it without a traceback

from banana_tests.scoring.batching import case_records
from banana_tests.scoring.metric_calls import MetricHung
from banana_tests.scoring.returned_scores import environment_fault
from banana_tests.trajectories.records import DataError, Record
from banana_tests.verdicts.gaps import Gap, gap
from banana_tests.verdicts.verdict import fail_verdict
from metrics_under_test.custom import PROBE
from metrics_under_test.protocol import MetricError, raised_at
from metrics_under_test.spec import MetricSpec, Scale
from metrics_under_test.weights import MissingWeights, NotPublished, UnwritableCache

if TYPE_CHECKING:
    from banana_tests.scoring.score_book import ScoreBook, WatchedModel
    from metrics_under_test.protocol import Image


class NoVerdict(Failed):
    """The case errors with this one line; raised from `pytest.fail`'s type, so pytest prints the
    line alone, and within hypothesis it ends the case like a stop (the control family's test)."""

    __module__ = "builtins"  # shown as `NoVerdict: ...`, as pytest shows its own `Failed: ...`

    def __init__(self, line: str) -> None:
        super().__init__(" ".join(line.split()), pytrace=False)


def raised(exc: BaseException) -> str:
    """`Type: message` of an exception, on one line; any DataError is a `DataError` (its kinds
    are the suite's own, its message says what happened)."""
    kind = "DataError" if isinstance(exc, DataError) else type(exc).__name__
    return " ".join(f"{kind}: {exc}".split())


@contextmanager
def data_errors_in_one_line() -> Iterator[None]:
    """A DataError in the block (a bad record or image, a metric that could not score one) is the
    case's NoVerdict: its message alone, without the traceback or the exception it was raised from."""
    try:
        yield
    except DataError as exc:
        raise NoVerdict(str(exc)) from None


Scoreable: TypeAlias = "Record | str | os.PathLike[str] | Image"
"""A record of the trajectory set, an image file's path, or an (H, W, 3) uint8 RGB array."""
Pair: TypeAlias = "tuple[Scoreable, Scoreable]"
T = TypeVar("T")
OFFLINE_HINT = "--metric=offline tries only the metrics whose files are here"


class HungOutcome(NoVerdict):
    """A case of a metric hung for the run, in one line naming it and the phase
    (banana_tests.scoring.metric_calls): an error wherever it is met, in the suite's cases and in yours."""

    __module__ = "builtins"  # shown as `HungOutcome: ...`, as pytest shows its own `Failed: ...`


def load_or_skip(
    name: str, named: bool, load: Callable[[], T], say: Callable[[str], None] | None = None
) -> T:
    """`load()`, or, when the metric's parameters are missing, a skip for a metric that only
    `offline` or `all` chose and a failure for one `named` (by the user or as a default metric):
    a gate whose metric never ran must not pass. A cache folder that refused the metric's files
    fails it, naming the folder, and so does a parameter file that is not the published one
    (naming the file and both sha256), and a metric that breaks the protocol (MetricError: a
    failed probe), in one line: its traceback is the suite's, not the user's.
    A metric that calls sys.exit stops the run (exit 2), as Ctrl-C does: pytest would otherwise
    report a SystemExit as one failed case and go on. In an xdist worker the reason is also
    `say`-ed, since the controller shows only "received keyboard-interrupt".
    A failure is a NoVerdict: the suite's cases error, never a verdict a baseline could list."""
    try:
        return load()
    except MetricHung as exc:
        raise HungOutcome(str(exc)) from None
    except MissingWeights as exc:
        if not named:
            pytest.skip(str(exc))
        failure = f"{name} is on trial but cannot load: {exc}; {OFFLINE_HINT}"
    except (UnwritableCache, NotPublished, MetricError) as exc:
        failure = str(exc)
    except SystemExit as exc:
        reason = f"{name} called sys.exit({exc.code!r}) while scoring; the run stops"
        if say is not None and os.environ.get("PYTEST_XDIST_WORKER"):
            say(f"banana-tests: {reason}")
        pytest.exit(reason, returncode=pytest.ExitCode.INTERRUPTED)
    raise NoVerdict(failure)  # outside the handler, so no chained exception is shown


class Scorer:
    """A selected metric: `name`, `lower_better`, `score_range` (the paper's Table 2 range, else
    pyiqa's), `normalise()`, `scores()` and `delta()`. Scores are raw, as the metric gives them."""

    def __init__(self, spec: MetricSpec, book: ScoreBook, named: bool) -> None:
        self.spec = spec
        self.book = book
        self.named = named

    def __repr__(self) -> str:
        return f"<Scorer {self.name} {self.score_range} {'lower' if self.lower_better else 'higher'} better>"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def lower_better(self) -> bool:
        return self.spec.lower_better

    @property
    def score_range(self) -> tuple[float, float]:
        """The typical range that normalisation maps to [0, 100]."""
        return self.spec.low, self.spec.high

    @property
    def scale(self) -> Scale:
        return self.spec.scale

    def normalise(self, score: float) -> float:
        """The README's Table 2 rule: `100·(s−lo)/(hi−lo)`, or `100·(hi−s)/(hi−lo)` when lower is
        better, so higher always means better quality. Not clipped, so a Δ keeps its sign."""
        return self.scale.normalise(score)

    @property
    def model(self) -> WatchedModel:
        """The loaded metric, built once per worker (the worker holds one model at a time: taking
        another metric's model drops this one, so use it and let it go). Calling it runs in the
        scoring thread, bounded as the suite's batches are; its other attributes are the metric's."""
        return self.guard(lambda: self.book.model(self.spec))

    def call(self, images: Sequence[Image]) -> list[float]:
        """One call of the model on (H, W, 3) uint8 arrays, its raw scores as it returns them: no
        score cache, no batching (what `model(images)` gives, with the suite's batch time limit,
        and its model dropped at once when it runs out of memory: a one-line MemoryError)."""
        arrays = [checked_array(image, i) for i, image in enumerate(images)]
        return [float(s) for s in self.guard(lambda: self.book.call(self.spec, arrays))]

    def guard(self, action: Callable[[], T]) -> T:
        """`action()` under the loading rule (see `load_or_skip`). A stop of the case
        (pytest-timeout's) while the metric was loading or scoring leaves it hung for the run:
        the stop is then told in the hung metric's one line, naming it and the phase."""
        hung_before = self.name in self.book.models.hung
        try:
            return load_or_skip(self.name, self.named, action, self.book.watch.say)
        except HungOutcome:
            raise
        except Failed:
            hung = self.book.models.hung.get(self.name)
            if hung_before or hung is None:
                raise
            raise HungOutcome(hung.line()) from None

    def score(self, item: Scoreable) -> float:
        """The raw score of one record, image file or RGB array."""
        return self.scores([item])[0]

    def scores(self, items: Sequence[Scoreable], upcoming: Sequence[Record] = ()) -> list[float]:
        """Raw scores, in order, of records, image files and RGB arrays. Files and records are
        checked and decoded as the suite does (8-bit RGB only) and cached by their bytes, arrays by
        their pixels; `upcoming` are records you will ask for later, scored in the same batches."""
        files: list[tuple[int, Record]] = []
        arrays: list[tuple[int, Image]] = []
        for i, item in enumerate(items):
            if isinstance(item, Record):
                files.append((i, item))
            elif isinstance(item, str | os.PathLike):
                files.append((i, file_record(item)))
            else:
                arrays.append((i, checked_array(item, i)))
        out: list[float] = [0.0] * len(items)

        def run() -> None:
            if files or upcoming:
                values = self.book.scores(self.spec, [r for _, r in files], upcoming)
                for (i, _), v in zip(files, values, strict=True):
                    out[i] = v
            if arrays:
                values = self.book.score_pixels(self.spec, [a for _, a in arrays])
                for (i, _), v in zip(arrays, values, strict=True):
                    out[i] = v

        self.guard(run)
        return out

    def delta(self, pairs: Sequence[Pair], upcoming: Sequence[Record] = ()) -> Gap:
        """Δ exactly as the shipped cases compute it: `pairs` holds one (reference, step) pair per
        run; the raw scores are averaged over the runs, then normalised, and
        Δ = n(step) − n(reference). The result's `detected` is the paper's verdict, Δ < 0."""
        if not pairs:
            raise ValueError("delta needs at least one (reference, step) pair")
        scores = self.scores(case_records(pairs), upcoming)  # errors name all
        return gap(self.scale, scores[: len(pairs)], scores[len(pairs) :])

    def remembered(self, name: str, measure: Callable[[], float]) -> tuple[float, bool]:
        """`measure()`, a figure of this metric (an invariance check's change), kept in the
        persistent score cache under the metric's identity (its code, parameters, versions,
        device) and `name`: a rerun builds no model for it, and a changed metric measures it
        again. `name` says what else the figure depends on (the data, the check's code).
        Returns the figure and whether it came from the cache."""
        return self.guard(lambda: self.book.figure(self.spec, name, measure))

    def cached(self, items: Sequence[Record | str | os.PathLike[str]]) -> list[bool]:
        """Whether each record's or file's score, once scored, came from the persistent cache."""
        records = [r if isinstance(r, Record) else file_record(r) for r in items]
        return self.book.cached(self.spec, records)


def file_record(path: str | os.PathLike[str]) -> Record:
    """An image file outside any trajectory set, as a record: scored and cached like one."""
    real = Path(os.path.realpath(path))
    return Record(real.stem, "", 0, 0, real, str(path))


def checked_array(image: Any, position: int) -> Image:
    """An (H, W, 3) uint8 array, as every metric's protocol takes, made contiguous (a shifted or
    cropped view is fine); else a TypeError saying what was given."""
    shape, dtype = getattr(image, "shape", None), getattr(image, "dtype", None)
    if shape is None or len(shape) != 3 or shape[2] != 3 or str(dtype) != "uint8":
        raise TypeError(
            f"item {position}: expected a Record, an image path or an (H, W, 3) uint8 RGB array, "
            f"got {type(image).__name__}" + (f" of shape {shape} and dtype {dtype}" if shape else "")
        )
    import numpy as np  # an array was given, so numpy is loaded already

    contiguous: Image = np.ascontiguousarray(image)
    return contiguous


PROBE_SIDE = min(min(image.height, image.width) for batch in PROBE for image in batch)
"""The smallest side of an image the metric scored before any check (the probe's)."""
SIZE_WORDS = re.compile(
    r"\b(?:sizes?|shapes?|dimensions?|small|smaller|large|larger|pixels?|px|resolution|height|width)\b"
    r"|\d\s*[x×]\s*\d",
    re.IGNORECASE,
)
MIN_SIDE_HINT = "a metric that needs larger images declares min_side (docs/metrics.md)"


def size_rejected(exc: BaseException, shape: tuple[int, int], min_side: int | None) -> bool:
    """Whether the size of an input of `shape` (height, width) is what `exc` rejected, as far as
    one can tell: see the module's docstring."""
    return min(shape) < max(PROBE_SIDE, (min_side or 0) + 1) or bool(SIZE_WORDS.search(str(exc)))


def cannot_check(
    metric: str,
    check: str,
    where: str,
    exc: Exception,
    shape: tuple[int, int],
    min_side: int | None,
    config: pytest.Config,
) -> NoReturn:
    """End the case of `metric`'s `check` (`gaussian_noise`, `batch-invariance`) after it raised
    `exc` on `where` (`the crop …`, `crops of 96 px`), whose images are of `shape`: an error for
    an environment's fault, else a failing verdict, each in one line."""
    at = "" if isinstance(exc, DataError) else raised_at(exc)  # a DataError names its own
    line = f"{metric} cannot be checked for {check} on {where}: it raised {raised(exc)}{at}"
    if environment_fault(exc):
        raise NoVerdict(f"{line}; a fault of its environment, not a verdict") from None
    hint = f"; {MIN_SIDE_HINT}" if size_rejected(exc, shape, min_side) else ""
    fail_verdict(f"{line}{hint}", f"cannot be checked on {where}: {raised(exc)}", config)
