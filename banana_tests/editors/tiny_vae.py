"""TAEF2, the tiny distilled autoencoder of FLUX.2's VAE latent space, as a torch module.

Written from the network's description (docs/datasets.md, "The learned editor"), not from
upstream code: a sequential stack whose indices are the state dict's keys, so the published
weights load with `strict=True`. The weights ship beside this module (`taef2/`, MIT, with their
notice) and are checked by sha256; `torch.load(weights_only=True)` reads the bytes checked.

A round trip (encode, decode) is what a latent editing model's decoder does to an image it was
asked to copy: the decoder makes fine detail up from the latent, and fed back on itself it drifts.
This module imports torch; the artifact family that uses it imports it only when it runs.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from banana_tests.editors.base import EditorError
from banana_tests.safe_files import NotReadable, read_regular

THREADS = 1
"""torch's intra-op threads for a round trip: a convolution split over more threads sums in
another order, and the 8-bit output differed in a few pixels between 1 and 2 threads."""
SCALE = 8
"""Pixels per latent cell along each side: the encoder's three stride-2 stages."""
LATENT_CHANNELS = 32
WIDTH = 64
POOL_WIDTH = 256
POOL_GROUPS = 4
SOFT_CLAMP = 3.0
"""The decoder's first layer: z ↦ 3·tanh(z/3), the latent's usual range."""
TILE_ABOVE = 2048 * 1024
"""Padded pixels above which a round trip runs in tiles: up to this size it runs on the whole
image (the bytes of every set made before tiling), peaking at about 2.4 GB."""
TILE = 768
"""A tile's side in image pixels, before its halo (a multiple of 32)."""
QUARTER = 4
ENCODER_SPLIT, DECODER_SPLIT = 7, 8
"""The encoder's layers before index 7 take the image down to quarter resolution; the decoder's
from index 8 on take a quarter-resolution map back up. Those run in tiles."""
ENCODER_HALO, DECODER_HALO = 32, 64
"""Image pixels of context around a tile, beyond the receptive field of its tiled layers (25 px
for the encoder's, 61 px for the decoder's): a multiple of 8 keeps the strides aligned."""


@dataclass(frozen=True)
class WeightFile:
    name: str
    sha256: str


ENCODER = WeightFile("taef2_encoder.pth", "10a4e1021e89d7551eaf161352da8dbd0b1aa83872ae28b150c1df1ce2f147b6")
DECODER = WeightFile("taef2_decoder.pth", "0a44a31e1ae59eb9dbf9359d24942fd3ef5928162c1800d97a28c61d51be0ab5")
MAX_BYTES = 16 * 2**20
"""The largest weight file read: the published ones are 2.7 MB each."""


class WeightFileError(EditorError):
    """A shipped weight file is missing or is not the published one; the message is one line."""


def weights_dir() -> Path:
    return Path(str(resources.files("banana_tests.editors") / "taef2"))


def checked_state(file: WeightFile, folder: Path | None = None) -> dict[str, Any]:
    """The state dict in `file`, read from its bytes once they match the published sha256."""

    path = (folder or weights_dir()) / file.name
    try:  # a regular file within the limit: a FIFO in its place would block the read forever
        data = read_regular(path, MAX_BYTES)
    except NotReadable as exc:
        raise WeightFileError(
            f"{path}: cannot read TAEF2 weights ({exc}); expected sha256 {file.sha256}"
        ) from None
    found = hashlib.sha256(data).hexdigest()
    if found != file.sha256:
        raise WeightFileError(
            f"{path}: not the published TAEF2 weights (sha256 {found}, {len(data):,} bytes); "
            f"expected sha256 {file.sha256}"
        )
    # the bytes that were checked, not the path opened again: its file may be swapped in between
    state: dict[str, Any] = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    return state


def _conv(c_in: int, c_out: int, *, stride: int = 1, bias: bool = True) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=bias)


class Block(nn.Module):
    """Three 3×3 convolutions with ReLUs between, added to the input, then a ReLU. FLUX.2's
    blocks nearest the latent first add `pool` (1×1 up, GroupNorm, ReLU, 1×1 down) to the input."""

    def __init__(self, pooled: bool) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            _conv(WIDTH, WIDTH), nn.ReLU(), _conv(WIDTH, WIDTH), nn.ReLU(), _conv(WIDTH, WIDTH)
        )
        self.pool = (
            nn.Sequential(
                nn.Conv2d(WIDTH, POOL_WIDTH, 1, bias=False),
                nn.GroupNorm(POOL_GROUPS, POOL_WIDTH),
                nn.ReLU(),
                nn.Conv2d(POOL_WIDTH, WIDTH, 1, bias=False),
            )
            if pooled
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pool is not None:
            x = x + self.pool(x)
        return torch.relu(self.conv(x) + x)


class SoftClamp(nn.Module):
    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return SOFT_CLAMP * torch.tanh(z / SOFT_CLAMP)


def build_encoder() -> nn.Sequential:
    """RGB in [0, 1], (N, 3, H, W), H and W multiples of 8 → latent (N, 32, H/8, W/8)."""
    layers: list[nn.Module] = [_conv(3, WIDTH), Block(False)]
    for stage in range(3):
        layers.append(_conv(WIDTH, WIDTH, stride=2, bias=False))
        layers += [Block(stage == 2) for _ in range(3)]
    layers.append(_conv(WIDTH, LATENT_CHANNELS))
    return nn.Sequential(*layers)


def build_decoder() -> nn.Sequential:
    """Latent (N, 32, h, w) → RGB (N, 3, 8h, 8w), to be clamped to [0, 1]."""
    layers: list[nn.Module] = [SoftClamp(), _conv(LATENT_CHANNELS, WIDTH), nn.ReLU()]
    for stage in range(3):
        layers += [Block(stage == 0) for _ in range(3)]
        layers += [nn.Upsample(scale_factor=2), _conv(WIDTH, WIDTH, bias=False)]
    layers += [Block(False), _conv(WIDTH, 3)]
    return nn.Sequential(*layers)


@dataclass(frozen=True)
class TinyVae:
    encoder: nn.Sequential
    decoder: nn.Sequential


def load(folder: Path | None = None) -> TinyVae:
    """Both halves with the checked weights, strictly (every key, no extra), in eval mode."""
    encoder, decoder = build_encoder(), build_decoder()
    encoder.load_state_dict(checked_state(ENCODER, folder), strict=True)
    decoder.load_state_dict(checked_state(DECODER, folder), strict=True)
    return TinyVae(encoder.eval().requires_grad_(False), decoder.eval().requires_grad_(False))


@cache
def shipped(device: str = "cpu") -> TinyVae:
    """The shipped network on `device`, built once a process (a worker of `generate` builds its own)."""
    vae = load()
    return TinyVae(vae.encoder.to(device), vae.decoder.to(device))


def round_trip(
    x: np.ndarray,
    latent_noise: float = 0.0,
    rng: np.random.Generator | None = None,
    *,
    device: str = "cpu",
    tile_above: int = TILE_ABOVE,
) -> np.ndarray:
    """decode(encode(x)) of an (H, W, 3) image in 8-bit code values, as float64 code values.

    The image is padded by reflection to multiples of 8 and cropped back. `latent_noise` adds
    Gaussian noise of that std (drawn from `rng`, numpy's, so it is the same on every machine) to
    the latent before decoding: the model's own randomness. Above `tile_above` padded pixels the
    full-resolution layers run in tiles (`tiled`), so memory stays bounded.
    """
    vae = shipped(device)
    h, w, _ = x.shape
    pad = ((0, -h % SCALE), (0, -w % SCALE), (0, 0))
    padded = np.pad(x / 255.0, pad, mode="reflect" if min(h, w) > SCALE else "edge")
    tiles = padded.shape[0] * padded.shape[1] > tile_above
    with torch.inference_mode(), _threads(THREADS):
        image = torch.from_numpy(np.ascontiguousarray(padded.transpose(2, 0, 1), dtype=np.float32))[None]
        del padded
        image = image.to(device)
        latent = encode_tiled(vae.encoder, image) if tiles else vae.encoder(image)
        del image
        if latent_noise > 0:
            if rng is None:
                raise ValueError("latent_noise needs a random generator")
            noise = rng.standard_normal(tuple(latent.shape)).astype(np.float32)
            latent = latent + latent_noise * torch.from_numpy(noise).to(device)
        decoded = decode_tiled(vae.decoder, latent) if tiles else vae.decoder(latent)
        out = decoded.clamp_(0.0, 1.0)[0, :, :h, :w].cpu().numpy()
    return np.asarray(out.transpose(1, 2, 0), dtype=np.float64) * 255.0


def encode_tiled(encoder: nn.Sequential, image: torch.Tensor) -> torch.Tensor:
    """The encoder with its layers down to quarter resolution run tile by tile; the rest (whose
    GroupNorm needs the whole image) on the whole quarter-resolution map."""
    quarter = _tiled(encoder[:ENCODER_SPLIT], image, QUARTER, 1, TILE, ENCODER_HALO)
    return encoder[ENCODER_SPLIT:](quarter)  # type: ignore[no-any-return]


def decode_tiled(decoder: nn.Sequential, latent: torch.Tensor) -> torch.Tensor:
    """The decoder on the whole map down to quarter resolution, the rest tile by tile."""
    quarter = decoder[:DECODER_SPLIT](latent)
    return _tiled(decoder[DECODER_SPLIT:], quarter, 1, QUARTER, TILE // QUARTER, DECODER_HALO // QUARTER)


def _tiled(
    layers: nn.Sequential, x: torch.Tensor, shrink: int, grow: int, core: int, halo: int
) -> torch.Tensor:
    """`layers(x)` computed on overlapping windows of `x` (a tile of `core` input cells and `halo`
    more on each side, wider than the layers' receptive field) and cropped to each tile's core.
    Every kept value sees exactly the inputs it sees on the whole map, so no seam shows; the
    output (`grow` times the input size, divided by `shrink`) is one buffer filled in place."""
    _, _, height, width = x.shape
    out: torch.Tensor | None = None
    for top in range(0, height, core):
        for left in range(0, width, core):
            y0, x0 = max(0, top - halo), max(0, left - halo)
            y1, x1 = min(height, top + core + halo), min(width, left + core + halo)
            piece = layers(x[:, :, y0:y1, x0:x1])
            if out is None:
                out = piece.new_empty((1, piece.shape[1], height * grow // shrink, width * grow // shrink))
            bottom, right = min(height, top + core), min(width, left + core)
            out[:, :, _cells(top, bottom, grow, shrink), _cells(left, right, grow, shrink)] = piece[
                :, :, _cells(top - y0, bottom - y0, grow, shrink), _cells(left - x0, right - x0, grow, shrink)
            ]
    assert out is not None
    return out


def _cells(start: int, stop: int, grow: int, shrink: int) -> slice:
    return slice(start * grow // shrink, stop * grow // shrink)


@contextmanager
def _threads(count: int) -> Iterator[None]:
    """torch's intra-op thread count set for the block, and the caller's put back after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
