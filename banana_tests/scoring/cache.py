"""The persistent score cache: a rerun scores nothing it has scored before.

One SQLite file in WAL mode, shared by every xdist worker: short transactions, a busy timeout
and INSERT OR REPLACE make concurrent writers safe. A score is keyed by the sha256 of the image
file's bytes and the metric's identity (name, backend and its version, the suite's own code on
the scoring path, parameter file hashes, device, precision; for a custom metric, every file of the
user's own code it runs, the version of every installed library that code imports or those
libraries require, and the data files it declares), so any change to
what produces a score misses. A file that fails its integrity or schema check is moved aside
and rebuilt, never read. A folder that cannot hold the file (read-only, or not a folder) turns
the cache off with one warning: scores are computed. A stored value that is no score (`storable`:
text, or beyond the score bound, from a file edited by hand or merged by an older version) is
dropped when read, with one warning, and scored again.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import sqlite3
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from banana_tests.safe_files import NotReadable, exclusive_lock, require_regular
from banana_tests.scoring.oracle import ORACLE_KEY
from metrics_under_test.file_hash import file_sha256
from metrics_under_test.score_value import SCORE_BOUND, in_bound, short
from metrics_under_test.spec import Backend, MetricSpec

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


INFINITE = frozenset({f"{ORACLE_KEY}/psnr"})
"""The figures that may be +inf: the oracle's PSNR of a step identical to its reference."""


class CacheWarning(UserWarning):
    """The cache was set aside or turned off for this run, or some of its values were dropped;
    scores are computed instead."""


def storable(metric: str, value: object) -> bool:
    """Whether `value`, stored under `metric` (an identity key or a figure's name), is one the
    cache keeps and serves: a float within the score bound (metrics_under_test.score_value), or
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


def identity(
    spec: MetricSpec, device: str, weight_hash: Callable[[Path], str] = file_sha256
) -> dict[str, object]:
    """What produces a metric's scores; a change to any part is a cache miss. Every metric's
    holds the suite's own code on its scoring path (`suite_code`). A custom metric's part is all
    the code of its own it runs, the installed distributions (name and version) that code imports
    with every distribution they require, and the files it declares (`own_code`); a VLM's, the
    libraries that run the model and the hub commit its files come from. The device is its kind
    (`cuda`, not `cuda:1`), so xdist workers on different GPUs share their scores."""
    from importlib import metadata

    from banana_tests.scoring.suite_code import code_hashes

    description: dict[str, object] = {"name": spec.name, "backend": spec.backend}
    description["suite"] = code_hashes(spec.backend)
    if spec.backend is Backend.CUSTOM:
        from metrics_under_test import custom, own_code

        description["version"] = custom.version(spec)
        description["precision"] = custom.precision(spec)
        description["sources"] = custom.sources(spec)
        description["libraries"] = custom.libraries(spec)
        description["files"] = own_code.declared_files(spec.files, weight_hash)
    elif spec.backend is Backend.VLM:  # the libraries that run the model (its adapters: "suite")
        from metrics_under_test.vlm import adapters

        libraries = "; ".join(f"{n} {metadata.version(n)}" for n in ("transformers", "torch", "pyiqa"))
        description["version"] = f"vlm; {libraries}"
        description["revision"] = adapters.revision(spec)  # the hub commit its files come from
        description["precision"] = "model default"
    else:
        description["version"] = (
            f"{spec.backend} {metadata.version(spec.backend.value)}; torch {metadata.version('torch')}"
        )
        description["precision"] = "float32"
    description["weights"] = {w.file: weight_hash(w.path) for w in spec.weights if w.path.exists()}
    description["device"] = device.partition(":")[0]  # cuda:1 scores as cuda:0 does
    return description


def identity_key(description: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()
