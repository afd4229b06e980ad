"""pyiqa as a metric backend. Imported only when a pyiqa metric is first scored.

pyiqa is under a non-commercial licence (see the README) and comes with the `pyiqa` extra; this
adapter is the only module that imports it, so other backends work without it.
"""

from __future__ import annotations

import socket
import urllib.error
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from metrics_under_test.protocol import Image, MetricError
from metrics_under_test.spec import MetricSpec
from metrics_under_test.weights import (
    MissingWeights,
    check_published,
    check_staged,
    how_to_provide,
    offline,
    pyiqa_cache_dir,
)

_NAMING_LOCALS = ("filename", "url", "repo_id", "pretrained_model_name_or_path")


def check_weights(spec: MetricSpec) -> None:
    """Fail fast, before importing pyiqa: when a known file in its cache is not the published
    release (NotPublished, hashed each run), when it is missing because the mirror's copy was not
    the published one or the cache folder refused it (an error naming the file or the folder), or
    when it is missing offline."""
    check_published(spec.name, (w.path for w in spec.weights))
    missing = spec.missing_weights()
    check_staged(spec.name, (w.path for w in missing))
    if missing and offline():
        files = ", ".join(f"{w.file} ({w.url})" for w in missing)
        raise MissingWeights(f"{spec.name}: missing parameter file(s) {files}; {how_to_provide()}")


# Metrics scored one image per call. BRISQUE adds up its float32 SVM terms in another order for a
# batch (gemm) than for one image (gemv), so a score moved with the other images of its batch, and
# a snapshot drifted with the selection. ILNIQE resizes every image to 524 px: a batch holds
# gigabytes and runs slower than one by one (figures in docs/research/speed.md). pyiqa's Q-Align asserts a
# batch of one.
ONE_AT_A_TIME = frozenset({"brisque", "ilniqe", "qalign"})
# Metrics whose buffers a heap that keeps freed memory fragments instead of reusing: ILNIQE's
# float64 planes at 524 px come in sizes that grow through each call, so with the suite's 256 MiB
# mmap threshold no freed buffer fitted the next, larger one and its peak grew several times over
# the untuned one (docs/research/speed.md).
HEAP_FRAGMENTING = frozenset({"ilniqe"})
# Modules pyiqa's models import without pyiqa declaring them, and the extra that installs each.
UNDECLARED_IMPORTS = {
    "pkg_resources": "pyiqa",  # openai-clip, imported by most of pyiqa's networks: setuptools<81
    "icecream": "vlm",  # mPLUG-Owl2 (qalign)
}


class PyiqaMetric:
    """A pyiqa NR metric behind the suite's protocol: batches grouped by image size, each handed
    to pyiqa as one contiguous (B, C, H, W) float tensor in [0, 1], the layout its metrics assume."""

    def __init__(
        self, spec: MetricSpec, device: str, create_metric: Callable[..., Any] | None = None
    ) -> None:
        """`create_metric` replaces `pyiqa.create_metric` (the tests' synthetic-parameter mode,
        `metrics_under_test.synthetic`, which needs no files: then none are checked)."""
        if create_metric is None:
            check_weights(spec)
        import pyiqa
        import torch
        from pyiqa.utils import download_util

        from metrics_under_test.weights import guard

        # pyiqa fixes its cache folder when it is first imported. The suite staged and checked the
        # files in the folder $TORCH_HOME names now, so pyiqa must read that one: a process that
        # imported pyiqa under another TORCH_HOME (an earlier test, a user's conftest) would
        # otherwise try a download of a file that is in place.
        download_util.DEFAULT_CACHE_DIR = str(pyiqa_cache_dir())
        guard()  # every file pyiqa opens is checked first, the ones check_weights cannot name too

        self.name = spec.name
        self.reuses_freed_memory = spec.name not in HEAP_FRAGMENTING  # see process_tuning
        self.lower_better = spec.lower_better
        self.score_range = (spec.low, spec.high)
        self._torch = torch
        self.device = device
        try:
            self._model = (create_metric or pyiqa.create_metric)(spec.name, device=torch.device(device))
        except ModuleNotFoundError as exc:
            if exc.name not in UNDECLARED_IMPORTS:
                raise
            raise missing_extra(spec.name, exc.name) from exc
        except Exception as exc:
            what = _unreachable_download(exc)
            if what is None:
                raise
            raise MissingWeights(f"{spec.name}: cannot fetch {what} ({exc}); {how_to_provide()}") from exc

    def __call__(self, images: Sequence[Image]) -> list[float]:
        torch = self._torch
        scores: list[float] = [0.0] * len(images)
        by_shape: dict[tuple[int, ...], list[int]] = {}
        for i, img in enumerate(images):
            key = (i,) if self.name in ONE_AT_A_TIME else img.shape
            by_shape.setdefault(key, []).append(i)
        with torch.inference_mode():
            for positions in by_shape.values():
                batch = torch.from_numpy(np.stack([images[i] for i in positions])).permute(0, 3, 1, 2)
                # A contiguous NCHW copy: pyiqa reshapes with .view (ILNIQE's MATLAB-style resize),
                # which raised on the permuted channels-last batch whenever it held 2+ images.
                batch = batch.to(torch.float32, memory_format=torch.contiguous_format).div_(255.0)
                out = self._model(batch).reshape(-1).tolist()
                for i, s in zip(positions, out, strict=True):
                    scores[i] = float(s)
        return scores


def missing_extra(metric: str, module: str) -> MetricError:
    """The error for a model import pyiqa does not declare (UNDECLARED_IMPORTS), naming the extra
    that installs it."""
    return MetricError(
        f"{metric}: pyiqa's model imports {module}, which is not installed: "
        f"pip install 'banana-tests[{UNDECLARED_IMPORTS[module]}]'"
    )


def _unreachable_download(exc: BaseException) -> str | None:
    """If `exc` comes from a download that cannot happen, name what was being fetched."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    network = (urllib.error.URLError, socket.gaierror, ConnectionError, TimeoutError)
    hub_offline = ("offline", "LocalEntryNotFound", "couldn't connect", "connection")
    if not any(
        isinstance(e, network) or any(h.lower() in f"{type(e).__name__} {e}".lower() for h in hub_offline)
        for e in chain
    ):
        return None
    return _named_file(chain[0].__traceback__) or str(chain[-1])


def _named_file(tb: TracebackType | None) -> str | None:
    """The innermost file name, URL or hub repo in the failing frames' locals."""
    found = None
    while tb is not None:
        local = tb.tb_frame.f_locals
        for key in _NAMING_LOCALS:
            if isinstance(local.get(key), str):
                found = (
                    local[key]
                    if key != "filename"
                    else f"{local[key]} ({local.get('url', local.get('repo_id', ''))})"
                )
                break
        tb = tb.tb_next
    return found
