"""Merging score caches: one SQLite file per machine or task, joined into one before the verdict
pass. Scores are keyed by image sha256 and metric identity, so the same key must carry the same
score; a key with two different scores is a conflict and nothing is written, and so is a source
holding a value that is no score (text, or beyond the score bound). The file-hash memo
(paths and inodes of one machine) is not copied: the merged cache rebuilds its own. The
loaded-libraries memo beside each cache is merged too, so the verdict pass on the result does not
look at its metrics again (banana_tests.scoring.loaded_libraries)."""

from __future__ import annotations

import contextlib
import errno
import sqlite3
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from banana_tests.safe_files import exclusive_lock
from banana_tests.scoring.cache import (
    BUSY_MS,
    FILE,
    SCHEMA,
    CacheWarning,
    ScoreCache,
    metric_name,
    open_lock,
    storable,
    unstorable,
)
from banana_tests.scoring.loaded_libraries import MEMO, Memo, MemoError, merged_memo, read_memo, write_memo
from metrics_under_test.score_value import SCORE_BOUND


class MergeError(Exception):
    """A source that is no score cache, or a cache that cannot be written: nothing is written."""


class BadEntry(MergeError):
    """A source holding a value that is no score: nothing is written."""


class MergeConflict(MergeError):
    """The same (image, metric identity) with two different scores: nothing is written."""


@dataclass(frozen=True)
class Merged:
    into: Path
    added: int  # scores new to `into`
    known: int  # scores `into` already held with the same value


def cache_file(path: Path) -> Path:
    """A cache folder (as --cache-dir names it) means its scores.sqlite; a file is itself."""
    return path / FILE if path.is_dir() else path


def merge(sources: Sequence[Path], into: Path) -> Merged:
    """Copy every score of `sources` (cache folders or files) into the cache folder `into`
    (created if missing), in one transaction: a conflict or an unreadable source leaves `into`
    as it was, and a folder it made is gone. Running it again adds nothing. The cache's open
    lock is held throughout, so a merge deletes only what it made itself."""
    files = [cache_file(s) for s in sources]
    for f in files:
        if not f.is_file():
            raise MergeError(f"{f}: no such score cache")
    with _locked(into) as made:
        return _merge_held(files, into, made)


@contextlib.contextmanager
def _locked(into: Path) -> Iterator[list[Path]]:
    """`into`'s open lock held; yields the folders this call made for `into` (outermost first). A
    folder removed while this call waited for the lock (a failing merge that made it) is made again."""
    with contextlib.ExitStack() as stack:
        while True:
            made = _make(into)
            try:
                stack.enter_context(exclusive_lock(open_lock(into)))
                break
            except FileNotFoundError:
                if into.is_dir():
                    raise
        yield made


def _make(into: Path) -> list[Path]:
    missing = [p for p in (into, *into.parents) if not p.exists()][::-1]
    try:
        if into.exists() and not into.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(into))
        into.parent.mkdir(parents=True, exist_ok=True)
        into.mkdir()
    except FileExistsError:
        return missing[:-1]  # another merge made `into` itself, just now
    except OSError as exc:
        raise MergeError(f"{into}: {exc.strerror or exc}; nothing was merged") from exc
    return missing


def _merge_held(files: Sequence[Path], into: Path, made: list[Path]) -> Merged:
    """`merge` under the open lock: a failure removes the files this merge created, only those, and
    the folders it `made` (the lock file too, while still held: a waiter opens it anew)."""
    target, memo_file = into / FILE, into / MEMO
    created = [p for p in (target, memo_file) if not p.exists()]
    try:
        try:
            memos = [read_memo(f.parent / MEMO) for f in [target, *files]]
        except MemoError as exc:
            raise MergeError(f"{exc}; nothing was merged") from exc
        return _merge(files, target, merged_memo(memos))
    except BaseException:
        if target in created:
            for path in [*created, Path(f"{target}-wal"), Path(f"{target}-shm")]:
                path.unlink(missing_ok=True)
        if into in made:
            open_lock(into).unlink(missing_ok=True)
            for folder in reversed(made):
                with contextlib.suppress(OSError):  # not empty: a file of another's is in it
                    folder.rmdir()
        raise


def _merge(files: Sequence[Path], target: Path, memo: Memo) -> Merged:
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # a cache set aside or off is an error here
        try:
            ScoreCache(target.parent, held=True).close()  # created, checked or migrated as a run would
        except CacheWarning as exc:
            raise MergeError(str(exc)) from exc
    db = sqlite3.connect(target.resolve().as_uri(), timeout=BUSY_MS / 1000, isolation_level=None, uri=True)
    db.create_function("storable", 2, storable, deterministic=True)
    try:
        for i, f in enumerate(files):
            _attach(db, f"src{i}", f)
            _refuse_bad_entry(db, f"src{i}", f)
        db.execute(
            "CREATE TEMP TABLE origin (image TEXT, metric TEXT, file TEXT, PRIMARY KEY (image, metric))"
        )
        db.execute("BEGIN IMMEDIATE")
        before = db.execute("SELECT COUNT(*) FROM main.scores").fetchone()[0]
        known = 0
        for i, f in enumerate(files):
            src = f"src{i}"
            _refuse_conflict(db, src, f, target)
            known += db.execute(
                f"SELECT COUNT(*) FROM {src}.scores s JOIN main.scores m USING (image, metric)"
            ).fetchone()[0]
            db.execute(
                f"INSERT OR IGNORE INTO temp.origin SELECT image, metric, ? FROM {src}.scores", (str(f),)
            )
            db.execute(f"INSERT OR IGNORE INTO main.identities SELECT * FROM {src}.identities")
            db.execute(f"INSERT OR IGNORE INTO main.scores SELECT * FROM {src}.scores")
        added = db.execute("SELECT COUNT(*) FROM main.scores").fetchone()[0] - before
        if memo:  # before the scores: an answer more is harmless, a merged cache without it looks again
            try:
                write_memo(target.parent / MEMO, memo)
            except OSError as exc:
                raise MergeError(f"{target.parent / MEMO}: {exc}") from exc
        db.execute("COMMIT")
        return Merged(target.parent, added, known)
    except sqlite3.DatabaseError as exc:
        raise MergeError(f"{target}: {exc}") from exc
    finally:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.close()


def _attach(db: sqlite3.Connection, src: str, file: Path) -> None:
    """Attach a source read-only as `src`, checked to be a score cache of this version."""
    try:
        db.execute(f"ATTACH DATABASE ? AS {src}", (f"{file.resolve().as_uri()}?mode=ro",))
        tables = dict(
            db.execute(f"SELECT name, sql FROM {src}.sqlite_master WHERE type = 'table'").fetchall()
        )
    except sqlite3.DatabaseError as exc:
        raise MergeError(f"{file}: not a score cache ({exc})") from exc
    for name in ("scores", "identities"):
        if tables.get(name) != SCHEMA[name]:
            raise MergeError(
                f"{file}: not a score cache of this version (table {name!r} differs or is missing)"
            )


def _refuse_bad_entry(db: sqlite3.Connection, src: str, file: Path) -> None:
    """Refuse a source holding a value that is no score (`storable`, asked only of the values
    that are not plainly one, so a large source is checked at SQLite's speed)."""
    row = db.execute(
        f"SELECT image, metric, score, COUNT(*) OVER () FROM {src}.scores "
        "WHERE NOT (typeof(score) = 'real' AND abs(score) <= ?) AND NOT storable(metric, score) LIMIT 1",
        (SCORE_BOUND,),
    ).fetchone()
    if row is None:
        return
    image, metric, value, count = row
    more = f" (and {count - 1} more such)" if count > 1 else ""
    raise BadEntry(
        f"{file}: image {image}, metric {metric_name(db, metric, src)!r} (identity {metric}) holds "
        f"{unstorable(value)}, no score{more}; nothing was merged"
    )


def _refuse_conflict(db: sqlite3.Connection, src: str, file: Path, target: Path) -> None:
    row = db.execute(
        f"SELECT s.image, s.metric, s.score, m.score, o.file FROM {src}.scores s "
        "JOIN main.scores m USING (image, metric) "
        "LEFT JOIN temp.origin o USING (image, metric) WHERE s.score != m.score LIMIT 1"
    ).fetchone()
    if row is None:
        return
    image, metric, theirs, ours, origin = row
    raise MergeConflict(
        f"conflict for image {image}, metric {metric_name(db, metric, src)!r} (identity {metric}): "
        f"{ours!r} in {origin or target}, "
        f"{theirs!r} in {file}; nothing was merged"
    )
