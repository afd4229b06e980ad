"""The worst escape: how degraded can an image get and still score as well as its clean source?

Under `--search=N` each selected metric gets one case, `test_no_worst_escape[<metric>]`, in
which hypothesis draws N degradations (banana_tests.editors.degradation: strengths and step counts
of the replica emulator) of crops of the clean seed images, scores clean and degraded with the
metric's `Scorer` (batched and cached as every family), and targets the most degraded image the
metric still rates at least as well as the clean one (banana_tests.verdicts.escape). An escape,
plainly visible by the documented PSNR rule, fails the case; hypothesis shrinks it, and the case
names the worst escape seen and writes its PNG pair. Beside the score cache, hypothesis's example
database keeps what it found and `replay/<metric>.json` the worst escape, which the next run
tries first, as an explicit example: a known escape fails the case at once.

Written on the public fixtures; collected only under `--search` (banana_tests.plugin).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from _pytest.outcomes import Failed

from banana_tests.atomic import write_atomic
from banana_tests.session.ownership import STATE
from banana_tests.session.scorer import Scorer
from banana_tests.test_control import CROP, Crop, clean_images
from banana_tests.test_invariance import write
from banana_tests.verdicts.escape import SEARCH_FIXTURE, SearchLog, Seen
from banana_tests.verdicts.record import figure_properties
from banana_tests.verdicts.verdict import fail_verdict

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from banana_tests.editors.degradation import Degradation

SEED = 20261204
"""The search's seed when `--hypothesis-seed` is not given: the same draws on every run."""
FOLDER = "search"
"""Beside the score cache: `hypothesis/<metric>` holds the example database, `replay/<metric>.json`
the worst escape, `pairs/<metric>` the PNGs."""


@dataclass(frozen=True)
class Search:
    """A run's search: examples per metric, hypothesis's seed, where its database and PNGs go
    (no database under `--no-cache`: nothing is replayed)."""

    examples: int
    seed: int | str  # `--hypothesis-seed` takes any text, as hypothesis's own tests do
    database: Path | None
    replay: Path | None
    pairs: Path


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
    if settings.search is None:
        pytest.skip("the worst-escape search runs under --search=N")
    base = settings.cache_dir / FOLDER if settings.cache_dir else tmp_path_factory.mktemp(FOLDER)
    given = pytestconfig.getoption("hypothesis_seed", None)
    return Search(
        settings.search,
        SEED if given is None else int(given) if str(given).isdigit() else str(given),
        base / "hypothesis" if settings.cache_dir else None,
        base / "replay" if settings.cache_dir else None,
        base / "pairs",
    )


def crops() -> SearchStrategy[Crop]:
    """A crop of a clean seed image, CROP px a side (shrinks to the first image's top-left corner)."""
    from hypothesis import strategies as st

    images = clean_images()

    @st.composite
    def crop(draw: st.DrawFn) -> Crop:
        name = draw(st.sampled_from(sorted(images)))
        height, width = images[name].shape[:2]
        h, w = (draw(st.integers(min(CROP[0], side), min(CROP[1], side))) for side in (height, width))
        return Crop(name, draw(st.integers(0, height - h)), draw(st.integers(0, width - w)), h, w)

    return crop()


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
    database = None
    if chosen.database is not None:
        database = DirectoryBasedExampleDatabase(chosen.database / folder_name(scorer.name))

    known = replayed(chosen.replay, scorer.name)
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
        test()
    except Stopped:
        if stop:
            raise stop[0] from None
        raise EscapeFound from None


def replay_file(folder: Path, metric: str) -> Path:
    return folder / f"{folder_name(metric)}.json"


def replayed(folder: Path | None, metric: str) -> tuple[Crop, Degradation] | None:
    """The worst escape a run of this metric wrote, to try first; None without one, and a
    warning for a file that does not read (a later escape rewrites it)."""
    from banana_tests.editors.degradation import Degradation

    path = None if folder is None else replay_file(folder, metric)
    if path is None or not path.is_file():
        return None
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
        crop, drawn = Crop(**known["crop"]), Degradation(**known["degradation"])
        if crop.pixels.shape[:2] != (crop.height, crop.width):
            raise ValueError(f"the box {crop!r} is not inside {crop.seed_image}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"{path}: not replayed ({type(exc).__name__}: {exc})", stacklevel=2)
        return None
    return crop, drawn


def remember(log: SearchLog, folder: Path | None, metric: str) -> None:
    """Keep the worst escape for the next run to try first."""
    escape = log.escape
    if folder is None or escape is None:
        return
    from banana_tests.editors.degradation import Degradation

    crop, drawn = escape.crop, escape.degradation
    assert isinstance(crop, Crop) and isinstance(drawn, Degradation)
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"crop": asdict(crop), "degradation": asdict(drawn)}, indent=1)
    write_atomic(replay_file(folder, metric), text.encode("utf-8"))


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
    written = write(folder / f"{name}-clean.png", clean), write(folder / f"{name}-{kind}.png", degraded)
    log.pair = (str(written[0]), str(written[1]))


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
    write_pair(log, banana_search.pairs / folder_name(banana_metric.name))
    remember(log, banana_search.replay, banana_metric.name)
    request.node.user_properties.extend(figure_properties(log.properties()))
    if log.escape is not None:
        fail_verdict(log.line(banana_metric.name), f"escaped at PSNR {log.escape.psnr:.2f} dB", pytestconfig)
