"""Decoding trajectory images: checked, RGB uint8, each decoded once per worker.

Every check that needs no pixels (a regular file within the byte limit, the file's sha256 against
the metadata, the pixel limit, the mode and bit depth) is `check`, and a cached score must pass it
too: the cache knows scores, not whether today's file and options allow them. It reads the file's
header with PIL; numpy is imported on the first decode, so a run whose scores are all cached skips it.
A data-set entry is untrusted: it is read only as a regular file within a byte limit
(banana_tests.safe_files), so a FIFO, /dev/zero or a sparse 40 GB file is one DataError.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from banana_tests.safe_files import NotReadable, TooLarge, open_regular, read_regular
from banana_tests.trajectories.records import DataError, Record

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from PIL.ImageFile import ImageFile

DEFAULT_MAX_PIXELS = 64_000_000  # above this, refuse to decode (decompression bombs)
HEADROOM_BYTES = 16 * 2**20  # a file's header, metadata and compression overhead beyond its pixels


def max_file_bytes(max_pixels: int) -> int:
    """The largest image file read: an 8-bit RGB image at the pixel limit fits even stored
    uncompressed (3 bytes a pixel), with room for its header and metadata: 208,777,216 bytes by default."""
    return 3 * max_pixels + HEADROOM_BYTES


def read_entry(record: Record, max_bytes: int) -> bytes:
    """The bytes of the record's file once it shows itself a regular file of at most `max_bytes`
    (banana_tests.safe_files), or a DataError naming the record."""
    try:
        return read_regular(record.path, max_bytes)
    except NotReadable as exc:
        raise _unreadable(record, exc) from None  # the message says it all


def header_pixels(record: Record, max_pixels: int = DEFAULT_MAX_PIXELS) -> int:
    """The image's pixels from its header alone, after the file checks `read_entry` makes."""
    from PIL import Image, UnidentifiedImageError

    try:
        with (
            open_regular(record.path, max_file_bytes(max_pixels)) as handle,
            own_pixel_limit(),
            Image.open(handle) as image,
        ):
            width, height = image.size
    except NotReadable as exc:
        raise _unreadable(record, exc) from None  # the message says it all
    except UnidentifiedImageError:  # PIL's own message names a file descriptor, not the file
        raise DataError(f"{record.named}: cannot read the image's size: no format PIL reads") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{record.named}: cannot read the image's size: {exc}") from exc
    return width * height


@contextlib.contextmanager
def own_pixel_limit() -> Iterator[None]:
    """PIL's decompression-bomb check off for one open, whose caller checks the header against its
    own limit (`--max-pixels`, above or below PIL's) before any pixel is decoded; then
    `PIL.Image.MAX_IMAGE_PIXELS` as the process had it: the suite runs inside another project's
    process, whose own image reads keep their guard."""
    from PIL import Image

    before = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        yield
    finally:
        Image.MAX_IMAGE_PIXELS = before


def _unreadable(record: Record, why: NotReadable) -> DataError:
    limit = " (3 bytes a pixel of --max-pixels, plus 16 MiB)" if isinstance(why, TooLarge) else ""
    return DataError(f"{record.named}: cannot read image: {why}{limit}")


def check(record: Record, max_pixels: int = DEFAULT_MAX_PIXELS) -> str:
    """sha256 of the record's file once it passes every check short of decoding its pixels."""
    with _opened(record, max_pixels) as (_, digest):
        return digest


def decode(record: Record, max_pixels: int = DEFAULT_MAX_PIXELS) -> tuple[NDArray[np.uint8], str]:
    """The record's image as (H, W, 3) uint8 and the sha256 of the bytes it was decoded from,
    or a DataError naming the record and file."""
    import numpy as np

    with _opened(record, max_pixels) as (im, digest):
        im.load()
        return np.asarray(im, dtype=np.uint8), digest


@contextlib.contextmanager
def _opened(record: Record, max_pixels: int) -> Iterator[tuple[ImageFile, str]]:
    """The checked image, header read and pixels not yet decoded, with its file's sha256."""
    from PIL import Image, UnidentifiedImageError

    where = record.named
    data = read_entry(record, max_file_bytes(max_pixels))
    if not data:
        raise DataError(f"{where}: image file is empty (0 bytes)")
    digest = hashlib.sha256(data).hexdigest()
    if record.sha256 and digest != record.sha256:
        raise DataError(f"{where}: sha256 does not match the metadata; the file changed or is corrupt")
    try:
        with own_pixel_limit(), Image.open(io.BytesIO(data)) as im:
            w, h = im.size
            if w * h > max_pixels:
                raise DataError(f"{where}: {w}x{h} is over the {max_pixels:,}-pixel limit")
            mode = _mode(im)
            if mode != "RGB":
                raise DataError(f"{where}: mode {mode}, expected 8-bit RGB; convert it to 8-bit RGB first")
            yield im, digest
    except DataError:
        raise
    except UnidentifiedImageError as exc:
        raise DataError(  # PIL's own message names a BytesIO object, not the file
            f"{where}: unreadable or truncated image: cannot identify image file {record.path.name} "
            f"(no format PIL reads starts with {data[:16]!r})"
        ) from exc
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        raise DataError(f"{where}: unreadable or truncated image: {exc}") from exc


def _mode(im: ImageFile) -> str:
    """PIL's mode, with the bit depth when a file stores more than 8 bits per sample: PIL opens a
    16-bit RGB PNG, TIFF or PPM as mode RGB and silently keeps only the high byte."""
    if im.mode != "RGB" or not im.tile:
        return im.mode
    tile = im.tile[0]
    args = tile.args if isinstance(tile.args, tuple) else (tile.args,)
    rawmode = args[0] if args and isinstance(args[0], str) else ""
    if ";16" in rawmode:  # PNG, TIFF
        return f"RGB 16-bit ({rawmode})"
    if tile.codec_name == "ppm" and len(args) > 1 and isinstance(args[1], int) and args[1] > 255:
        return f"RGB 16-bit (maxval {args[1]})"
    return "RGB"


class ImageStore:
    """Decoded images, kept up to a byte budget so memory stays flat as data sets grow, and the
    outcome of each record's checks, so a cached score is checked once per worker."""

    def __init__(self, budget_bytes: int = 512 * 2**20, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        self._budget = budget_bytes
        self.max_pixels = max_pixels
        self._held: OrderedDict[Path, NDArray[np.uint8]] = OrderedDict()
        self._checked: dict[Record, str | DataError] = {}
        self._bytes = 0
        self.decodes = 0

    def check(self, record: Record) -> str:
        """The record's file sha256 after `check`; raises its DataError."""
        outcome = self._checked.get(record)
        if outcome is None:
            try:
                outcome = check(record, self.max_pixels)
            except DataError as exc:
                outcome = exc
            self._checked[record] = outcome
        if isinstance(outcome, DataError):
            raise outcome
        return outcome

    def digest(self, record: Record) -> str | None:
        """sha256 of the bytes this record's image was last checked or decoded from."""
        outcome = self._checked.get(record)
        return outcome if isinstance(outcome, str) else None

    def get(self, record: Record) -> NDArray[np.uint8]:
        img = self._held.get(record.path)
        if img is not None:
            self._held.move_to_end(record.path)
            return img
        img, self._checked[record] = decode(record, self.max_pixels)
        self.decodes += 1
        self._held[record.path] = img
        self._bytes += img.nbytes
        while self._bytes > self._budget and len(self._held) > 1:
            _, old = self._held.popitem(last=False)
            self._bytes -= old.nbytes
        return img
