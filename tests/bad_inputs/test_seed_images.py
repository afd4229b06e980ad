"""Bad seed images at `generate`, one row each: the exit code, the one line naming the file, and
what was written (nothing, on an error). A seed is read as the data-set reader reads an image: a
regular file within its pixel limit, as 8-bit RGB; its name must be a plain file name, since it
names the folder its runs are written to. PIL's own limit, `Image.MAX_IMAGE_PIXELS`, is left as
the process had it.
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana_tests.cli import main
from tests.conftest import noisy_image

Arrange = Callable[[Path], Path]  # makes the seed under the folder given, returns its path


@dataclass(frozen=True)
class Row:
    id: str
    seed: Arrange
    code: int
    says: str  # a regex the message must match; {seed} stands for the seed's path
    check: Callable[[Path], bool] = lambda out: True


def png_header(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims `width` x `height` (8-bit RGB) over a few bytes of pixels: what a
    decompression bomb shows before its pixels are decoded."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)
    return path


def gray16(folder: Path) -> Path:
    """A 16-bit grayscale photograph-like ramp, values 0-65535 (mid-gray on average)."""
    ramp = np.linspace(0, 65535, 48 * 64).reshape(48, 64).astype(np.uint16)
    path = folder / "gray16.png"
    Image.fromarray(ramp).save(path)
    assert Image.open(path).mode.startswith("I;16")
    return path


def not_white(out: Path) -> bool:
    """Step 1 of the 16-bit seed keeps its ramp: dark at the top, light at the bottom, mean mid-gray."""
    step = np.asarray(Image.open(out / "images/gray16/run0/step001.png").convert("L"), dtype=float)
    ends = step[:4].mean() < 40 and step[-4:].mean() > 215
    return bool((step == 255).mean() < 0.05 and 100 < step.mean() < 155 and ends)


def named(name: str) -> Arrange:
    def make(folder: Path) -> Path:
        noisy_image("alpha", 0, 0, (40, 56)).save(folder / name, format="PNG")
        return folder / name

    return make


def fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.png")
    return folder / "pipe.png"


def float_tiff(folder: Path) -> Path:
    Image.fromarray(np.full((16, 16), 0.5, dtype=np.float32)).save(folder / "float.tiff")
    return folder / "float.tiff"


def good_and_big(folder: Path) -> Path:
    """A good seed sorted before one over the pixel limit: the big one is refused before any step."""
    noisy_image("alpha", 0, 0, (40, 56)).save(folder / "alpha.png")
    png_header(folder / "zbig.png", 9000, 9000)
    return folder


ROWS = [
    Row(
        "a seed over the pixel limit after a good one is refused before any step",
        good_and_big,
        1,
        r"{seed}/zbig\.png: 9000x9000 is over the 64,000,000-pixel limit",
    ),
    Row("16-bit grayscale is scaled to 8 bits", gray16, 0, r"1 step\(s\) made", not_white),
    Row(
        "a seed named ...png",
        named("...png"),
        1,
        r"{seed}: seed image name '\.\.' is not a plain file name .*rename the file",
    ),
    Row("a seed named ..png", named("..png"), 1, r"{seed}: seed image name '\.' is not a plain file name"),
    Row("a hidden seed name", named(".x.png"), 1, r"{seed}: seed image name '\.x' is not a plain file name"),
    Row("a FIFO seed", fifo, 1, r"{seed}: cannot read this seed image: not a regular file but a FIFO"),
    Row(
        "a seed over the data-set reader's pixel limit",
        lambda folder: png_header(folder / "big.png", 9000, 9000),
        1,
        r"{seed}: 9000x9000 is over the 64,000,000-pixel limit",
    ),
    Row(
        "a seed PIL warns of as a decompression bomb",
        lambda folder: png_header(folder / "bomb.png", 12000, 12000),
        1,
        r"{seed}: over the 64,000,000-pixel limit \(Image size \(144000000 pixels\)",
    ),
    Row(
        "a seed PIL refuses as a decompression bomb",
        lambda folder: png_header(folder / "bomb.png", 40000, 40000),
        1,
        r"{seed}: over the 64,000,000-pixel limit \(Image size \(1600000000 pixels\)",
    ),
    Row(
        "a floating-point seed",
        float_tiff,
        1,
        r"{seed}: a floating-point image \(mode F\); convert it to 8-bit RGB first",
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_a_bad_seed_image_is_one_line_naming_it(
    row: Row, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seeds, out = tmp_path / "seeds", tmp_path / "set"
    seeds.mkdir()
    seed = row.seed(seeds)
    limit = Image.MAX_IMAGE_PIXELS
    argv = ["generate", "--editor", "jpeg", "--seed-images", str(seed), "--out", str(out)]
    assert main([*argv, "--runs", "1", "--steps", "1"]) == row.code
    captured = capsys.readouterr()
    message = captured.err if row.code else captured.out
    assert "Traceback" not in message
    assert re.search(row.says.replace("{seed}", re.escape(str(seed))), message), message
    assert limit == Image.MAX_IMAGE_PIXELS, "PIL's own limit is the process's"
    assert {p.name for p in tmp_path.iterdir()} <= {"seeds", "set"}, "nothing beside the set"
    if row.code:
        assert not (out / "metadata.jsonl").exists() or not (out / "metadata.jsonl").read_bytes()
        assert not (out / "images").exists()
    assert row.check(out)
