"""Every file pyiqa's downloader hands a metric, checked first, whoever built the metric: the
suite's pyiqa metrics and a user's metric that calls `pyiqa.create_metric` inside.

pyiqa's arch modules import `load_file_from_url` by name, most of them lazily, when a metric is
created; `guard` wraps it in every pyiqa module loaded so far and at its source, so those imported
later take the wrapper. The wrapper refuses a file whose name has a published sha256 it does not
match (NotPublished: pyiqa would unpickle it), warns once about a file whose name has none (not
checked), and turns a download that cannot happen into MissingWeights naming the file, its URL and
how to provide it, instead of a bare `URLError` that names nothing.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from metrics_under_test.published_weights import PUBLISHED, refusal
from metrics_under_test.weights import (
    REFUSED,
    UNPUBLISHED,
    MissingWeights,
    NotPublished,
    UnwritableCache,
    how_to_provide,
    offline,
)

SOURCE = "pyiqa.utils.download_util"


class UncheckedWeights(UserWarning):
    """pyiqa loads a parameter file whose name has no published sha256 in banana-tests' table."""


def guard() -> None:
    """Wrap pyiqa's `load_file_from_url` in every loaded pyiqa module that holds it; nothing
    before pyiqa is imported (a later call, once it is, does it)."""
    source = sys.modules.get(SOURCE)
    if source is None:
        return
    current = source.load_file_from_url
    original = getattr(current, "__wrapped__", current)
    checked = current if original is not current else _checked(original, source)
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "pyiqa" and getattr(module, "load_file_from_url", None) is original:
            vars(module)["load_file_from_url"] = checked


def _checked(original: Callable[..., str], source: Any) -> Callable[..., str]:
    @functools.wraps(original)
    def load_file_from_url(
        url: str, model_dir: str | None = None, progress: bool = True, file_name: str | None = None
    ) -> str:
        name = file_name or os.path.basename(urlparse(url).path)
        path = Path(os.path.abspath(model_dir or source.DEFAULT_CACHE_DIR)) / name
        if path in UNPUBLISHED:
            raise NotPublished(UNPUBLISHED[path])
        if path in REFUSED and not os.path.lexists(path):
            raise UnwritableCache(REFUSED[path])
        if not os.path.lexists(path) and offline():
            raise MissingWeights(f"pyiqa needs {name} ({url}) offline; {how_to_provide()}")
        try:
            found = original(url, model_dir, progress, file_name)
        except OSError as exc:  # URLError, a refused connection, an unknown host, a timeout
            raise MissingWeights(f"pyiqa cannot fetch {name} ({url}): {exc}; {how_to_provide()}") from exc
        why = refusal(Path(found))
        if why is not None:
            raise NotPublished(why)
        if name not in PUBLISHED:
            warnings.warn(
                f"pyiqa loads {found}, whose name has no published sha256 in banana-tests' table "
                "(metrics_under_test/published_weights.py): it is not checked",
                UncheckedWeights,
                stacklevel=2,
            )
        return found

    return load_file_from_url
