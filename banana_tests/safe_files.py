"""Files as the suite reads and writes them, one way for the whole package.

Reading a file that untrusted data names (a data-set entry, a JUnit property): a regular file
only, never past a limit. `os.stat` decides before any open, since opening a FIFO blocks forever and
a device may act on the open; the open cannot block (O_NONBLOCK), `fstat` checks again after it (the
entry may be swapped in between), and the read stops one byte past the limit (the file may grow).

Writing loss-free: a reader (or a resumed run) never sees half a file, at most a torn last line of
an appended one; and one writer at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from filelock import FileLock, Timeout


class NotReadable(ValueError):
    """Why a file was not read, without its name: the caller names the record or property."""


class TooLarge(NotReadable):
    """Over the caller's byte limit: the caller may say where its limit comes from."""


def read_regular(path: Path | str, max_bytes: int) -> bytes:
    """The file's bytes, or NotReadable: not a regular file, over `max_bytes`, or an OSError."""
    with open_regular(path, max_bytes) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise NotReadable(exc.strerror or str(exc)) from exc
    if len(data) > max_bytes:
        raise TooLarge(f"over the {max_bytes:,}-byte limit (it grew while read)")
    return data


def require_regular(path: Path | str, max_bytes: int | None = None) -> None:
    """NotReadable unless stat shows a regular file of at most `max_bytes` (None: of any size, a
    table the caller streams), without opening it: for a file another library then reads."""
    try:
        _check(os.stat(path), max_bytes)
    except OSError as exc:
        raise NotReadable(exc.strerror or str(exc)) from exc


@contextlib.contextmanager
def open_regular(path: Path | str, max_bytes: int) -> Iterator[BinaryIO]:
    """The file open for reading once stat shows a regular file of at most `max_bytes`; else
    NotReadable (an OSError opening it too)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        _check(os.stat(path), max_bytes)
        handle = os.fdopen(os.open(path, flags), "rb")
    except OSError as exc:
        raise NotReadable(exc.strerror or str(exc)) from exc
    with handle:
        _check(os.fstat(handle.fileno()), max_bytes)
        yield handle


def _check(status: os.stat_result, max_bytes: int | None) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise NotReadable(f"not a regular file but {_kind(status.st_mode)}")
    if max_bytes is not None and status.st_size > max_bytes:
        raise TooLarge(f"{status.st_size:,} bytes, over the {max_bytes:,}-byte limit")


def _kind(mode: int) -> str:
    kinds = {
        stat.S_ISDIR: "a folder",
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
    }
    return next((name for test, name in kinds.items() if test(mode)), f"file type {stat.S_IFMT(mode):o}")


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in `folder` survive a power cut: the entry lives in the folder."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary sibling, fsync, `os.replace` over `path`, then fsync the folder.

    The sibling is created with mode 0666 less the umask, as `open` would make `path` (not
    mkstemp's 0600), so the files of a shared data set stay readable by the group.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def append_json_line(fd: int, row: Mapping[str, Any], path: Path) -> None:
    """`row` as one JSON line, in one `write` to `fd` (opened on `path` with O_APPEND), then fsync:
    after a kill the line is either all there or a torn last line, which the resuming reader trims."""
    line = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
    written = os.write(fd, line)
    if written != len(line):
        raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
    os.fsync(fd)


@contextlib.contextmanager
def exclusive_lock(path: Path, *, busy: Exception | None = None, remove: bool = False) -> Iterator[None]:
    """One process at a time (xdist workers, or two commands) while `path`, a lock file of its own,
    is held. The kernel drops the lock when its process dies, even by SIGKILL.

    With `busy`, a lock held elsewhere raises `busy` at once instead of waiting: a second command
    is refused, not queued. With `remove`, the lock file goes when the block ends, while still held,
    so it is never left beside the file it guards.
    """
    lock = FileLock(path, timeout=-1 if busy is None else 0)
    try:
        lock.acquire()
    except Timeout as exc:  # only with `busy`: without it the lock waits
        raise busy or exc from exc
    try:
        yield
    finally:
        if remove:
            path.unlink(missing_ok=True)
        lock.release()
