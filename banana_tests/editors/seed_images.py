"""The seed images of a `generate` job, found by name in the files and folders given, and read
as the data-set reader reads an image: a regular file, within its pixel limit, as 8-bit RGB.

A seed's name (its file stem) becomes its folder, `images/<name>/`, so it must be a plain name:
`...png` would write beside `images/`. A 16-bit grayscale seed is scaled to 8 bits (PIL's
`convert("RGB")` clips it, turning a photograph white). PIL's own decompression-bomb limit
(`Image.MAX_IMAGE_PIXELS`) is left as the process has it: the limit here is checked on the header.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from PIL import Image
from PIL.ImageFile import ImageFile

from banana_tests.safe_files import NotReadable, read_regular, require_regular
from banana_tests.trajectories.images import DEFAULT_MAX_PIXELS, max_file_bytes
from banana_tests.trajectories.records import DataError

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".tif", ".tiff"})
SIXTEEN_BIT = frozenset({"I;16", "I;16B", "I;16L", "I;16N"})


def find_seed_images(items: Sequence[Path]) -> dict[str, Path]:
    """Seed images by name (file stem) from files and folders (their images, not recursive)."""
    found: dict[str, Path] = {}
    for item in map(Path, items):
        if item.is_dir():
            files = sorted(p for p in item.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not files:
                raise DataError(f"{item}: no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in this folder")
        elif item.exists():
            try:
                require_regular(item)
            except NotReadable as exc:
                raise DataError(f"{item}: cannot read this seed image: {exc}") from None
            files = [item]
        else:
            raise DataError(f"{item}: no such file or folder")
        for path in files:
            _check_name(path)
            if path.stem in found and found[path.stem] != path:
                raise DataError(f"two seed images named {path.stem!r}: {found[path.stem]} and {path}")
            found[path.stem] = path
    if not found:
        raise DataError("no seed images given")
    return found


def _check_name(path: Path) -> None:
    """The stem names the seed's folder: no `.`/`..`, hidden name, separator or control character."""
    stem = path.stem
    if not stem or stem.startswith(".") or "\\" in stem or any(ord(c) < 32 or ord(c) == 127 for c in stem):
        raise DataError(
            f"{path}: seed image name {stem!r} is not a plain file name (it names the folder "
            "images/<name>/ of its runs): rename the file"
        )


def open_image(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """The image at `path` as 8-bit RGB, or a DataError naming the file: not a regular file, over
    the data-set reader's byte or pixel limit, undecodable, or of a mode with no 8-bit reading."""
    with _opened(path, max_pixels) as image:
        return _eight_bit_rgb(path, image)


def check_image(path: Path, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    """What `open_image` refuses from the file and its header (not its pixels, left to decode when
    its chain starts): every editor's seeds are checked so before any step is made."""
    with _opened(path, max_pixels) as image:
        _check_mode(path, image)


@contextmanager
def _opened(path: Path, max_pixels: int) -> Iterator[ImageFile]:
    """The file read within the byte limit and opened by PIL, its size checked on the header; what
    goes wrong decoding it in the block is one line naming the file too."""
    try:
        data = read_regular(path, max_file_bytes(max_pixels))
    except NotReadable as exc:
        raise DataError(f"{path}: cannot read this image: {exc}") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise DataError(f"{path}: {width}x{height} is over the {max_pixels:,}-pixel limit")
                yield image
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise DataError(f"{path}: over the {max_pixels:,}-pixel limit ({exc})") from None
    except (OSError, SyntaxError, ValueError) as exc:
        raise DataError(f"{path}: cannot read this image ({exc})") from exc


def _eight_bit_rgb(path: Path, image: ImageFile) -> Image.Image:
    """16-bit grayscale scaled to 8 bits, other modes through PIL's conversion; 32-bit integer and
    float images refused (their range is not known)."""
    if _sixteen_bit(image):
        import numpy as np

        wide = np.asarray(image, dtype=np.uint32)
        return Image.fromarray(((wide * 255 + 32767) // 65535).astype(np.uint8), mode="L").convert("RGB")
    _check_mode(path, image)
    return image.convert("RGB")


def _check_mode(path: Path, image: ImageFile) -> None:
    """32-bit integer and floating-point images have no known range: refused."""
    if image.mode in ("I", "F") and not _sixteen_bit(image):
        kind = "32-bit integer" if image.mode == "I" else "floating-point"
        raise DataError(f"{path}: a {kind} image (mode {image.mode}); convert it to 8-bit RGB first")


def _sixteen_bit(image: ImageFile) -> bool:
    """A 16-bit grayscale image, as PIL opens one: mode I;16 (or I, its tile read as I;16)."""
    if image.mode in SIXTEEN_BIT:
        return True
    args = image.tile[0].args if image.mode == "I" and image.tile else None
    rawmode = args[0] if isinstance(args, tuple) and args else args
    return isinstance(rawmode, str) and rawmode.startswith("I;16")
