"""A file's sha256, the identity of the parameter and source files a metric's cache key names
and of the images the score cache holds: content, never size and mtime (`cp -p` keeps those)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """The file's sha256, read in blocks (a weight file may be large)."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
