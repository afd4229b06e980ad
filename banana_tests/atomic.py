"""Loss-free file writes: a reader (or a resumed run) never sees half a file, at most a torn last
line of an appended one; and one writer at a time."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout


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
