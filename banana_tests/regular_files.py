"""Reading a file that untrusted data names (a data-set entry, a JUnit property): a regular file
only, never past a limit. `os.stat` decides before any open, since opening a FIFO blocks forever and
a device may act on the open; the open cannot block (O_NONBLOCK), `fstat` checks again after it (the
entry may be swapped in between), and the read stops one byte past the limit (the file may grow)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


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
