"""Path options take local paths: a URL given to one is refused, naming the option.

Taken as a path, `s3://bucket/y` is the local folder `./s3:/bucket/y`: `cache merge --into`
wrote one and exited 0. Every option that names a local file or folder, of pytest and
of every `banana-tests` command, goes through `refuse_url` or `local_path`.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
"""`scheme://...`; two letters or more, so a Windows drive (`C:/`) stays a path."""
WHY = "a local path is needed (copy the files here first, or mount the storage)"


def refuse_url(option: str, value: str | Path | None, why: str = WHY) -> None:
    """ValueError naming `option` when `value` is a URL."""
    if value is not None and URL.match(str(value)):
        raise ValueError(f"{option}={value}: a URL is not supported; {why}")


def local_path(text: str) -> Path:
    """An argparse `type` for a path argument: argparse names the option in the error."""
    if URL.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a URL; {WHY}")
    return Path(text)
