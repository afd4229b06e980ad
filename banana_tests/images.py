"""Decoding trajectory images: checked, RGB uint8, each decoded once per worker.

numpy and PIL are imported on the first decode, so a run whose scores are all cached skips them.
"""

from __future__ import annotations

import hashlib
import io
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from banana_tests.trajectories import DataError, Record

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

DEFAULT_MAX_PIXELS = 64_000_000  # above this, refuse to decode (decompression bombs)


def decode(record: Record, max_pixels: int = DEFAULT_MAX_PIXELS) -> NDArray[np.uint8]:
    """The record's image as (H, W, 3) uint8, or a DataError naming the record and file."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    where = f"{record.source} ({record.path})"
    try:
        data = record.path.read_bytes()
    except OSError as exc:
        raise DataError(f"{where}: cannot read image: {exc.strerror or exc}") from exc
    if not data:
        raise DataError(f"{where}: image file is empty (0 bytes)")
    if record.sha256 and hashlib.sha256(data).hexdigest() != record.sha256:
        raise DataError(f"{where}: sha256 does not match the metadata; the file changed or is corrupt")
    try:
        with Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            if w * h > max_pixels:
                raise DataError(f"{where}: {w}x{h} is over the {max_pixels:,}-pixel limit")
            if im.mode != "RGB":
                raise DataError(
                    f"{where}: mode {im.mode}, expected 8-bit RGB; convert the image to RGB first"
                )
            im.load()
            return np.asarray(im, dtype=np.uint8)
    except DataError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise DataError(f"{where}: unreadable or truncated image: {exc}") from exc


class ImageStore:
    """Decoded images, kept up to a byte budget so memory stays flat as data sets grow."""

    def __init__(self, budget_bytes: int = 512 * 2**20, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        self._budget = budget_bytes
        self._max_pixels = max_pixels
        self._held: OrderedDict[Path, NDArray[np.uint8]] = OrderedDict()
        self._bytes = 0
        self.decodes = 0

    def get(self, record: Record) -> NDArray[np.uint8]:
        img = self._held.get(record.path)
        if img is not None:
            self._held.move_to_end(record.path)
            return img
        img = decode(record, self._max_pixels)
        self.decodes += 1
        self._held[record.path] = img
        self._bytes += img.nbytes
        while self._bytes > self._budget and len(self._held) > 1:
            _, old = self._held.popitem(last=False)
            self._bytes -= old.nbytes
        return img
