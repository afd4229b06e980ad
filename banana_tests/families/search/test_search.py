"""The worst escape: how degraded can an image get and still score as well as its clean source?

Under `--search=N` each selected metric gets one case, `test_no_worst_escape[<metric>]`, in
which hypothesis draws N degradations (banana_tests.editors.degradation: strengths and step counts
of the replica emulator) of crops of the clean seed images, scores clean and degraded with the
metric's `Scorer` (batched and cached as every family), and targets the most degraded image the
metric still rates at least as well as the clean one (banana_tests.families.search). An escape,
plainly visible by the documented PSNR rule, fails the case; hypothesis shrinks it, and the case
names the worst escape seen and writes its PNG pair. Beside the score cache, hypothesis's example
database keeps what it found and `replay/<metric>.json` the worst escape, which the next run
tries first, as an explicit example: a known escape fails the case at once. The search folder's
files are data: a replay file the search could not have written is not replayed, an example
database with an entry hypothesis could not have written is not used, and a folder that refuses
the files loses them, not the verdict (one SearchFileWarning each).

Written on the public fixtures; collected only under `--search` (banana_tests.session.ownership).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import reprlib
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _pytest.outcomes import Failed

from banana_tests.distortions import CROP, Crop, clean_images, write_lossless
from banana_tests.families.search import FIXTURE as SEARCH_FIXTURE
from banana_tests.families.search import SearchLog, SearchSettings, Seen
from banana_tests.safe_files import NotReadable, read_regular, require_regular, write_atomic
from banana_tests.scoring.returned_scores import environment_fault
from banana_tests.session.ownership import STATE
from banana_tests.session.scorer import NoVerdict, Scorer
from banana_tests.session.scorer import raised as one_line
from banana_tests.verdicts.record import figure_properties
from banana_tests.verdicts.verdict import fail_verdict
from metrics_under_test.protocol import raised_at

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from banana_tests.editors.degradation import Degradation

SEED = 20261204
"""The search's seed when `--hypothesis-seed` is not given: the same draws on every run."""
FOLDER = "search"
"""Beside the score cache: `hypothesis/<metric>` holds the example database, `replay/<metric>.json`
the worst escape, `pairs/<metric>` the PNGs (`Search.files`)."""
REPLAY_BYTES = 64 * 1024
"""The largest replay file read: the search writes one crop and one degradation, about 350 bytes."""
EXAMPLE_BYTES = 64 * 1024
"""The largest entry of the example database used: hypothesis stores the choices of one example
(a crop and a degradation), under 1 KiB."""


class SearchFileWarning(UserWarning):
    """A file of the search folder was not used: a replay file the search could not have written,
    or a folder that refuses the PNG pair and the replay file. The search and its verdict go on."""


@dataclass(frozen=True)
class SearchFiles:
    """One metric's files in the search folder (no database nor replay file under `--no-cache`)."""

    database: Path | None
    replay: Path | None
    pairs: Path


@dataclass(frozen=True)
class Search:
    """A run's search: examples per metric, hypothesis's seed, and its folder, which is `kept`
    beside the score cache (else pytest's temporary folder, for the PNGs alone: nothing replayed)."""

    examples: int
    seed: int | str  # `--hypothesis-seed` takes any text, as hypothesis's own tests do
    folder: Path
    kept: bool

    def files(self, metric: str) -> SearchFiles:
        """Where `metric`'s files go: the one place a metric's name becomes a path."""
        name = folder_name(metric)
        return SearchFiles(
            self.folder / "hypothesis" / name if self.kept else None,
            self.folder / "replay" / f"{name}.json" if self.kept else None,
            self.folder / "pairs" / name,
        )


class EscapeFound(AssertionError):
    """An example escaped: the failure hypothesis shrinks."""


class Stopped(BaseException):
    """Raised through hypothesis, which would take a `Failed` (pytest-timeout's, a metric that
    cannot load) or a `SystemExit` for a failing example and run the next one; also once the
    shrinking budget is spent, which keeps the escape shrunk so far (and in the database)."""


def folder_name(metric: str) -> str:
    """A metric's name as a folder (a `module:callable` target holds ':' and '.')."""
    return re.sub(r"[^\w.-]", "_", metric)


@pytest.fixture(name=SEARCH_FIXTURE)
def banana_search(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Search:
    """The run's `--search` settings, with its folders; skips the search without `--search` (a
    user's module that imports the test is collected in every run)."""
    settings = pytestconfig.stash[STATE].settings
    examples = SearchSettings.of(settings).examples
    if examples is None:
        pytest.skip("the worst-escape search runs under --search=N")
    folder = settings.cache_dir / FOLDER if settings.cache_dir else tmp_path_factory.mktemp(FOLDER)
    given = pytestconfig.getoption("hypothesis_seed", None)
    seed = SEED if given is None else int(given) if str(given).isdigit() else str(given)
    return Search(examples, seed, folder, kept=settings.cache_dir is not None)


def crop_sides(side: int) -> tuple[int, int]:
    """The lengths a crop's side is drawn from, on an image side of `side` px: CROP, or all of it."""
    return min(CROP[0], side), min(CROP[1], side)


def crops() -> SearchStrategy[Crop]:
    """A crop of a clean seed image, CROP px a side (shrinks to the first image's top-left corner)."""
    from hypothesis import strategies as st

    images = clean_images()

    @st.composite
    def crop(draw: st.DrawFn) -> Crop:
        name = draw(st.sampled_from(sorted(images)))
        height, width = images[name].shape[:2]
        h, w = (draw(st.integers(*crop_sides(side))) for side in (height, width))
        return Crop(name, draw(st.integers(0, height - h)), draw(st.integers(0, width - w)), h, w)

    return crop()


def crop_from_data(values: object) -> Crop:
    """A crop read back from data (a replay file), checked as `crops` draws one: a seed image of
    the set and a box within it, of `crop_sides`; a ValueError names the first field that is not."""
    from banana_tests.editors.degradation import check_number

    if not isinstance(values, dict):
        raise ValueError(f"crop is {type(values).__name__}, not an object")
    fields = [f.name for f in dataclasses.fields(Crop)]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"crop.{unknown[0]} is not a field of a crop")
    missing = [name for name in fields if name not in values]
    if missing:
        raise ValueError(f"crop.{missing[0]} is missing")
    images = clean_images()
    name = values["seed_image"]
    if not isinstance(name, str) or name not in images:
        raise ValueError(
            f"crop.seed_image = {reprlib.repr(name)} is not one of the seed images {sorted(images)}"
        )
    height, width = images[name].shape[:2]
    check_number("crop.height", values["height"], crop_sides(height), whole=True)
    check_number("crop.width", values["width"], crop_sides(width), whole=True)
    check_number("crop.top", values["top"], (0, height - values["height"]), whole=True)
    check_number("crop.left", values["left"], (0, width - values["width"]), whole=True)
    return Crop(name, values["top"], values["left"], values["height"], values["width"])


def search(scorer: Scorer, chosen: Search, log: SearchLog) -> None:
    """Run hypothesis: N examples (`chosen.examples`) that only look, targeting the worst escape;
    after them, the first escape ends the search and is shrunk for at most N more examples
    (EscapeFound); a replayed escape ends it at once. Raises what stopped the search (a timeout,
    a metric that cannot load) instead. The budget counts examples, not seconds, so a seed gives
    the same escape on a fast machine and a slow one. At most 2N examples are drawn: when none
    after the first N escapes, the worst of the N stands, unshrunk."""
    from hypothesis import HealthCheck, Phase, example, given, seed, settings, target
    from hypothesis.database import DirectoryBasedExampleDatabase

    from banana_tests.editors.degradation import degradations
    from banana_tests.scoring.oracle import change

    stop: list[BaseException] = []
    files = chosen.files(scorer.name)
    usable = usable_database(files.database)
    database = None if usable is None else DirectoryBasedExampleDatabase(usable)
    known = replayed(files.replay)
    raised: list[int] = []  # the example whose escape ended the search: shrinking follows

    def scored(crop: Crop, degradation: Degradation) -> None:
        if raised and log.examples - raised[0] >= chosen.examples:
            raise Stopped  # as many examples shrinking as searching: the escape so far stands
        try:  # all the example's work: a timeout strikes wherever the time goes
            clean = crop.pixels
            degraded = degradation.apply(clean)
            norm_clean, norm_degraded = map(scorer.normalise, scorer.scores([clean, degraded]))
            moved = change(clean, degraded)
        except (Failed, SystemExit) as exc:
            stop.append(exc)
            raise Stopped from exc
        except Exception as exc:
            if not environment_fault(exc):
                raise  # a failing example, as hypothesis reports it
            stop.append(
                NoVerdict(
                    f"{scorer.name} cannot be searched on the crop {crop!r}: it raised "
                    f"{one_line(exc)}{raised_at(exc)}; a fault of its environment, not a verdict"
                )
            )
            raise Stopped from exc
        seen = Seen(crop, degradation, moved.psnr, moved.ssim, norm_clean, norm_degraded)
        log.add(seen)
        target(seen.objective, label="how degraded, past the metric")
        looked = log.examples > chosen.examples  # the first N examples search, whatever they find
        if seen.escaped and (looked or raised or (known is not None and log.examples == 1)):
            raised[:] = raised or [log.examples]
            log.shrunk = seen  # hypothesis ends on the example it shrank to
            raise EscapeFound(seen.describe())

    test = given(crop=crops(), degradation=degradations())(scored)
    if known is not None:
        test = example(crop=known[0], degradation=known[1])(test)
    test = seed(chosen.seed)(test)
    # settings last: @seed turns the database off, and a run should both replay and be seeded;
    # no `explain` phase, which varies a shrunk escape's arguments at the cost of a score each
    test = settings(
        max_examples=2 * chosen.examples,
        deadline=None,
        database=database,
        phases=tuple(p for p in Phase if p is not Phase.explain),
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )(test)
    try:
        with source_blind_draws():
            test()
    except Stopped:
        if stop:
            raise stop[0] from None
        raise EscapeFound from None


@contextmanager
def source_blind_draws() -> Iterator[None]:
    """Hypothesis mixes into its draws the literals of every loaded module outside site-packages
    (its "local constants"): the same seed then searched other examples in a checkout than from a
    wheel, after a refactor that moved literals between modules, and beside a user's conftest. The
    search's examples come from its seed and the metric's scores alone: the pool is empty while it
    runs (hypothesis's cache of it cleared on both sides). A hypothesis without the pool has
    nothing to hide; tests/test_search.py fails if one renames it."""
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    local = getattr(providers, "_get_local_constants", None)
    if local is None:
        yield
        return
    providers._get_local_constants = Constants
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = local
        providers.CONSTANTS_CACHE.cache.clear()


def replayed(path: Path | None) -> tuple[Crop, Degradation] | None:
    """The worst escape a run of this metric wrote, to try first; None without one. The file is
    data: one the search could not have written (not a regular file of at most REPLAY_BYTES, not
    JSON, a field missing, unknown, of another type or outside the search's ranges) is not
    replayed, with one warning naming it and the field, and the search runs as without it."""
    from banana_tests.editors.degradation import Degradation

    if path is None:
        return None
    try:
        try:
            data = read_regular(path, REPLAY_BYTES)
        except NotReadable as exc:
            if isinstance(exc.__cause__, FileNotFoundError | NotADirectoryError):
                return None  # no replay file: nothing escaped yet
            raise
        known = json.loads(data)
        if not isinstance(known, dict):
            raise ValueError(f"the file holds {type(known).__name__}, not an object")
        unknown = sorted(set(known) - {"crop", "degradation"})
        if unknown:
            raise ValueError(f"{reprlib.repr(unknown[0])} is not a field of a replay file")
        return crop_from_data(known.get("crop")), Degradation.from_data(known.get("degradation"))
    except (OSError, ValueError, RecursionError) as exc:  # JSON nested too deep: RecursionError
        why = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else exc
        if isinstance(exc, json.JSONDecodeError | UnicodeDecodeError | RecursionError):
            why = f"not JSON ({why})" if str(exc) else "not JSON (nested too deep)"
        warnings.warn(
            f"replay file {path} not replayed: {why}; the search runs without it (its next escape "
            "replaces the file)",
            SearchFileWarning,
            stacklevel=2,
        )
        return None


def usable_database(folder: Path | None) -> Path | None:
    """The example database's folder, or None when it holds an entry hypothesis could not have
    written: hypothesis reads every file of a test's folder whole, so a FIFO there blocked the
    search until `--timeout` and a device or a huge file filled the memory. Every entry is checked
    as data first (safe_files: stat only, nothing opened): in each folder, regular files of at
    most EXAMPLE_BYTES. A bad one gives one warning naming it, and the search runs without the
    database (the replay file still counts)."""
    if folder is None:
        return None
    try:
        keys = [folder / name for name in os.listdir(folder)] if folder.is_dir() else []
        for key in sorted(keys):
            if key.is_dir():  # hypothesis reads only a key's folder
                for entry in sorted(key / name for name in os.listdir(key)):
                    try:
                        require_regular(entry, EXAMPLE_BYTES)
                    except NotReadable as exc:
                        raise NotReadable(f"{entry}: {exc}") from exc
    except (OSError, NotReadable) as exc:
        why = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else exc
        warnings.warn(
            f"example database {folder} not used: {why}; the search runs without it",
            SearchFileWarning,
            stacklevel=2,
        )
        return None
    return folder


def remember(log: SearchLog, path: Path | None) -> None:
    """Keep the worst escape for the next run to try first."""
    escape = log.escape
    if path is None or escape is None:
        return
    from banana_tests.editors.degradation import Degradation

    crop, drawn = escape.crop, escape.degradation
    assert isinstance(crop, Crop) and isinstance(drawn, Degradation)
    text = json.dumps({"crop": asdict(crop), "degradation": asdict(drawn)}, indent=1)
    write_atomic(path, text.encode("utf-8"))


def write_pair(log: SearchLog, folder: Path) -> None:
    """The shown image and its clean source as PNGs, named by what was drawn (kept across runs)."""
    from banana_tests.editors.degradation import Degradation

    shown = log.shown
    if shown is None:
        return
    crop, drawn = shown.crop, shown.degradation
    assert isinstance(crop, Crop) and isinstance(drawn, Degradation)
    name = hashlib.sha256(f"{crop!r}|{drawn}".encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    clean = crop.pixels
    kind = "escaped" if log.escape is not None else "detected"
    degraded = drawn.apply(clean)
    written = (
        write_lossless(folder / f"{name}-clean.png", clean),
        write_lossless(folder / f"{name}-{kind}.png", degraded),
    )
    log.pair = (str(written[0]), str(written[1]))


def keep(log: SearchLog, chosen: Search, metric: str) -> None:
    """Write the PNG pair and the replay file. A folder that refuses them (read-only, not a
    folder, full) loses them, not the verdict: one warning naming it, as the score cache gives."""
    files = chosen.files(metric)
    refused: list[tuple[str, OSError]] = []
    for what, write_one in (
        ("PNG pair", lambda: write_pair(log, files.pairs)),
        ("replay file", lambda: remember(log, files.replay)),
    ):
        try:
            write_one()
        except OSError as exc:
            refused.append((what, exc))
    if refused:
        first = refused[0][1]
        why = f"{first.strerror}: {first.filename}" if first.strerror else f"{type(first).__name__}: {first}"
        lost = " and ".join(what for what, _ in refused)
        warnings.warn(
            f"search folder {chosen.folder} cannot be written ({why}); {metric}'s verdict stands, "
            f"without its {lost}",
            SearchFileWarning,
            stacklevel=2,
        )


def test_no_worst_escape(
    request: pytest.FixtureRequest, pytestconfig: pytest.Config, banana_metric: Scorer, banana_search: Search
) -> None:
    """Its identity (the metric) is recorded at collection (session.reporter); its figures here."""
    log = SearchLog()
    start = time.perf_counter()
    try:
        search(banana_metric, banana_search, log)
    except EscapeFound:
        pass
    finally:
        log.seconds = time.perf_counter() - start
    keep(log, banana_search, banana_metric.name)
    request.node.user_properties.extend(figure_properties(log.properties()))
    if log.escape is not None:
        fail_verdict(log.line(banana_metric.name), f"escaped at PSNR {log.escape.psnr:.2f} dB", pytestconfig)
