"""`generate.json`, the settings that decide a set's pixels: written with the set's first step,
then the one set of settings every later step must be made with."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from banana_tests.safe_files import NotReadable, read_regular, write_atomic
from banana_tests.trajectories.records import METADATA, DataError

SETTINGS = "generate.json"
MAX_SETTINGS_BYTES = 2**20  # a few hundred bytes written
MAX_METADATA_BYTES = 2**30  # a few hundred bytes a step: millions of steps


class SettingsMismatch(DataError):
    """The output folder was made with other settings; mixing them would corrupt the set."""


def check_settings(out: Path, settings: dict[str, Any], log: Callable[[str], None]) -> None:
    """Refuse other settings once a step is recorded; before that (a first attempt that failed
    before its first step) nothing depends on them, so the new ones replace them."""
    path = out / SETTINGS
    recorded = _has_records(out / METADATA)
    if not path.exists():
        if recorded:
            raise SettingsMismatch(
                f"{out} holds a {METADATA} but no {SETTINGS}: it was not made by `banana-tests generate`;"
                " choose a new --out folder"
            )
        _write_settings(path, settings)
        return
    if not recorded:
        if _read(path, MAX_SETTINGS_BYTES) != _settings_bytes(settings):
            log(f"{out}: no step was made with the settings in {SETTINGS}; this command's replace them")
            _write_settings(path, settings)
        return
    try:
        old = json.loads(_read(path, MAX_SETTINGS_BYTES).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not JSON ({exc}); restore it or choose a new --out folder") from exc
    if old != settings:
        old = old if isinstance(old, dict) else {}
        diffs = "".join(
            f"\n  {key}: folder has {old.get(key)!r}, this command asks for {settings.get(key)!r}"
            for key in sorted(set(old) | set(settings))
            if old.get(key) != settings.get(key)
        )
        raise SettingsMismatch(
            f"{out} was generated with other settings ({path}); refusing to mix them into one set:{diffs}"
            "\nrerun with the folder's settings to continue it, or choose a new --out folder"
        )


def _settings_bytes(settings: dict[str, Any]) -> bytes:
    return (json.dumps(settings, indent=2) + "\n").encode("utf-8")


def _write_settings(path: Path, settings: dict[str, Any]) -> None:
    write_atomic(path, _settings_bytes(settings))


def _has_records(meta: Path) -> bool:
    """Whether `meta` holds a complete line (a torn last line is no record: it is trimmed)."""
    if not meta.exists():
        return False
    data = _read(meta, MAX_METADATA_BYTES)
    return bool(data[: data.rfind(b"\n") + 1].strip())


def _read(path: Path, limit: int) -> bytes:
    """A file of the set through the regular-file reader: a FIFO or device there is refused."""
    try:
        return read_regular(path, limit)
    except NotReadable as exc:
        raise DataError(f"{path}: {exc}; choose a new --out folder") from exc
