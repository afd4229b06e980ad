"""The persistent score cache: a rerun scores nothing it has scored before, and caches from several
machines or tasks are merged into one before the verdict pass.

One SQLite file in WAL mode, shared by every xdist worker: short transactions, a busy timeout
and INSERT OR REPLACE make concurrent writers safe. A score is keyed by the sha256 of the image
file's bytes and the metric's identity (banana_tests.scoring.score_identity), so any change to
what produces a score misses. A file that fails its integrity or schema check is moved aside
and rebuilt, never read. A folder that cannot hold the file (read-only, or not a folder) turns
the cache off with one warning: scores are computed. A stored value that is no score (`storable`:
text, or beyond the score bound, from a file edited by hand or merged by an older version) is
dropped when read, with one warning, and scored again.

Merging (`merge`): the same key must carry the same score; a key with two different scores is a
conflict and nothing is written, and so is a source holding a value that is no score. The
file-hash memo (paths and inodes of one machine) is not copied: the merged cache rebuilds its
own. The loaded-libraries memo beside each cache is merged too, so the verdict pass on the result
does not look at its metrics again.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sqlite3
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from banana_tests.safe_files import NotReadable, exclusive_lock, require_regular
from banana_tests.scoring.score_identity import MEMO, Memo, MemoError, merged_memo, read_memo, write_memo
from metrics_under_test.own_code import file_sha256
from metrics_under_test.protocol import SCORE_BOUND, in_bound, short

FILE = "scores.sqlite"
SCHEMA = {
    "scores": "CREATE TABLE scores (image TEXT NOT NULL, metric TEXT NOT NULL, score REAL NOT NULL, "
    "PRIMARY KEY (image, metric)) WITHOUT ROWID",
    "file_hashes": "CREATE TABLE file_hashes (path TEXT PRIMARY KEY, size INTEGER NOT NULL, "
    "mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, inode INTEGER NOT NULL, sha256 TEXT NOT NULL)",
    "identities": "CREATE TABLE identities (metric TEXT PRIMARY KEY, description TEXT NOT NULL)",
}
FORMER_MEMOS = {
    "file_hashes": frozenset(
        {
            "CREATE TABLE file_hashes (path TEXT PRIMARY KEY, size INTEGER NOT NULL, "
            "mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL)",
        }
    ),
}
"""Earlier versions' tables that only memoise (no score lives there), by their CREATE statement:
found in a cache, such a table is rebuilt empty and every score is kept."""
BUSY_MS = 60_000
_CHUNK = 500  # SQLite's bound-parameter limit is 999 on old builds


ORACLE_KEY = "oracle-v3"
"""The cache's name for the degradation oracle's figures (banana_tests.scoring.oracle): a new formula
there gets a new one here, so that no figure of the old formula is read."""
INFINITE = frozenset({f"{ORACLE_KEY}/psnr"})
"""The figures that may be +inf: the oracle's PSNR of a step identical to its reference."""


class CacheWarning(UserWarning):
    """The cache was set aside or turned off for this run, or some of its values were dropped;
    scores are computed instead."""


def storable(metric: str, value: object) -> bool:
    """Whether `value`, stored under `metric` (an identity key or a figure's name), is one the
    cache keeps and serves: a float within the score bound (metrics_under_test.protocol), or
    +inf for the figures in INFINITE."""
    return isinstance(value, float) and (in_bound(value) or (value == math.inf and metric in INFINITE))


def unstorable(value: object) -> str:
    """What a stored value that is no score is, for a message."""
    if isinstance(value, str):
        return f"{short(value)}, text"
    if isinstance(value, bytes):
        return f"{len(value)} bytes, not a number"
    if isinstance(value, float) and math.isfinite(value):
        return f"{value!r}, beyond ±{SCORE_BOUND:g}"
    return f"{value!r}, not a finite number"


def metric_name(db: sqlite3.Connection, metric: str, schema: str = "main") -> str:
    """The metric's name in an identity's description (the figure's own name for a figure)."""
    found = db.execute(f"SELECT description FROM {schema}.identities WHERE metric = ?", (metric,)).fetchone()
    try:
        return str(json.loads(found[0]).get("name", metric)) if found else metric
    except (ValueError, AttributeError):
        return "?"


def open_lock(directory: Path) -> Path:
    """The lock a cache is opened (created, checked, set aside) under: `cache merge` holds it throughout."""
    return (Path(directory) / FILE).with_suffix(".lock")


class ScoreCache:
    """Scores by (image hash, metric identity), in `directory/scores.sqlite`. `held`: the caller
    holds `open_lock(directory)` already (`cache merge`)."""

    def __init__(self, directory: Path, *, held: bool = False) -> None:
        self.path = Path(directory) / FILE
        self.set_aside: Path | None = None
        self._held = held
        self._db: sqlite3.Connection | None = self._open()

    def get(self, metric: str, images: Iterable[str]) -> dict[str, float]:
        """The cached scores among `images` (sha256 hex) for the metric identity `metric`; a
        stored value that is no score is dropped (`drop`), so the caller scores its image again."""
        wanted = list(dict.fromkeys(images))
        found: dict[str, float] = {}
        bad: list[tuple[str, object]] = []
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._run(
                f"SELECT image, score FROM scores WHERE metric = ? AND image IN ({marks})", (metric, *chunk)
            )
            for image, score in rows:
                if storable(metric, score):
                    found[str(image)] = score
                else:
                    bad.append((str(image), score))
        if bad:
            self.drop(metric, bad)
        return found

    def drop(self, metric: str, bad: list[tuple[str, object]]) -> None:
        """Delete stored values that are no score, with one warning naming the first."""
        name = "?"
        if self._db is not None:
            with self._guard(), self._db:
                name = metric_name(self._db, metric)
                self._db.executemany(
                    "DELETE FROM scores WHERE metric = ? AND image = ?", ((metric, image) for image, _ in bad)
                )
        image, value = bad[0]
        more = f" and {len(bad) - 1} more" if len(bad) > 1 else ""
        warnings.warn(
            f"score cache {self.path}: metric {name!r} (identity {metric}) stored {unstorable(value)}, "
            f"for image {image}{more}; dropped, scored again",
            CacheWarning,
            stacklevel=3,
        )

    def put(self, metric: str, scores: Mapping[str, float], description: Mapping[str, object]) -> None:
        """Store scores (a value that is not `storable` is left out: computed again next time);
        one short transaction, so concurrent workers wait milliseconds."""
        scores = {image: score for image, score in scores.items() if storable(metric, score)}
        if self._db is None or not scores:
            return
        with self._guard(), self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO identities VALUES (?, ?)",
                (metric, json.dumps(description, sort_keys=True)),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO scores VALUES (?, ?, ?)",
                ((image, metric, score) for image, score in scores.items()),
            )

    def file_hash(self, path: Path) -> str:
        """sha256 of a (large) parameter file, remembered across runs by path, size, mtime, ctime
        and inode: re-read unless all five agree. A file rewritten in place with its mtime put
        back (`cp -p`, `rsync -a`, `tar` keep mtimes) has a new ctime, which no user tool can set."""
        real = path.resolve()
        st = real.stat()
        stamp = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        rows = self._run(
            "SELECT sha256 FROM file_hashes WHERE path = ? AND size = ? AND mtime_ns = ? AND ctime_ns = ? "
            "AND inode = ?",
            (str(real), *stamp),
        )
        if rows:
            return str(rows[0][0])
        digest = file_sha256(real)
        if self._db is not None:
            with self._guard(), self._db:
                row = (str(real), *stamp, digest)
                self._db.execute("INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?, ?, ?)", row)
        return digest

    def close(self) -> None:
        """The WAL folded into the file first, so a copy of scores.sqlite alone holds every score
        (`cache merge` of a copy, a CI artifact); a checkpoint other processes block is left to them."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
            self._db = None

    def _run(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        if self._db is None:
            return []
        with self._guard():
            return self._db.execute(sql, params).fetchall()
        return []  # the guard turned the cache off

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        """A database error mid-run turns the cache off for this process: never trust it."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            warnings.warn(f"score cache {self.path}: {exc}; scoring without it", CacheWarning, stacklevel=3)
            self.close()

    def _open(self) -> sqlite3.Connection | None:
        """The checked database, or None after one warning saying why the cache is off."""
        folder = self.path.parent
        try:
            if folder.exists() and not folder.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(folder))
            folder.mkdir(parents=True, exist_ok=True)
            with contextlib.nullcontext() if self._held else exclusive_lock(open_lock(folder)):
                if self.path.exists():
                    require_regular(self.path)  # sqlite opens a path: a FIFO there would block it
                try:
                    return self._connect()
                except sqlite3.OperationalError:
                    raise  # cannot open or write (permissions, disk): not a damaged file
                except sqlite3.DatabaseError as exc:
                    self.set_aside = self._set_aside(exc)
                return self._connect()
        except (OSError, sqlite3.Error, NotReadable) as exc:
            why = f"{exc.strerror}: {exc.filename}" if isinstance(exc, OSError) and exc.strerror else exc
            message = f"score cache {self.path} cannot be used ({why}); scoring without it"
            warnings.warn(message, CacheWarning, stacklevel=3)
            return None

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=BUSY_MS / 1000, isolation_level=None)
        try:
            db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
            check = db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            tables = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
            if not tables:
                with db:
                    for sql in SCHEMA.values():
                        db.execute(sql)
            elif tables != SCHEMA:
                _migrate(db, tables)
            db.isolation_level = "DEFERRED"  # `with db:` now opens and commits one transaction
            return db
        except BaseException:
            db.close()
            raise

    def _set_aside(self, exc: sqlite3.DatabaseError) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{os.getpid()}")
        for suffix in ("", "-wal", "-shm"):
            part = Path(f"{self.path}{suffix}")
            if part.exists():
                os.replace(part, f"{aside}{suffix}")
        warnings.warn(
            f"score cache {self.path} is unreadable ({exc}); moved it to {aside.name} and started afresh",
            CacheWarning,
            stacklevel=3,
        )
        return aside


def _migrate(db: sqlite3.Connection, tables: Mapping[str, str]) -> None:
    """Rebuild the memo tables of an earlier version (FORMER_MEMOS), keeping the scores; any
    other difference from SCHEMA is a damaged file."""
    outdated = [name for name, sql in tables.items() if sql in FORMER_MEMOS.get(name, ())]
    if {**tables, **{name: SCHEMA[name] for name in outdated}} != SCHEMA:
        raise sqlite3.DatabaseError(f"unexpected schema: tables {sorted(tables)}")
    with db:  # one transaction: a crash midway leaves the old table
        db.execute("BEGIN IMMEDIATE")
        for name in outdated:
            db.execute(f"DROP TABLE {name}")
            db.execute(SCHEMA[name])


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
