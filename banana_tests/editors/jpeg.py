"""The `jpeg` editor: classic JPEG generation loss, a well-understood control degradation.

Each step re-encodes the image as JPEG at `quality` (optionally after shrinking it by
`resize` and enlarging it back), so the loss compounds step after step, with no randomness.
"""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from banana_tests.editors.base import EditorConfig, EditorError, EditRequest, EditResult, take_options
from banana_tests.editors.prompts import apply_transform


class JpegEditor:
    name = "jpeg"
    accepts: frozenset[str] = frozenset()
    deterministic = True
    """Every run of a seed image is the same bytes: `generate` warns when asked for several."""

    def __init__(self, quality: int = 75, resize: float = 1.0) -> None:
        if not 1 <= quality <= 100:
            raise EditorError(f"jpeg quality must lie in 1..100, got {quality}")
        if not 0 < resize <= 1:
            raise EditorError(f"jpeg resize must lie in (0, 1], got {resize}")
        self.quality, self.resize = quality, resize
        self.model = f"jpeg-q{quality}" + (f"-r{resize:g}" if resize != 1 else "")

    def settings(self) -> dict[str, Any]:
        return {"model": self.model, "quality": self.quality, "resize": self.resize}

    def cost_estimate(self, edits: int, resolution: str | None) -> str | None:
        return None

    def edit(self, request: EditRequest) -> EditResult:
        image = apply_transform(request.image.convert("RGB"), request.transform)
        size = image.size
        if self.resize != 1:
            small = (max(1, round(size[0] * self.resize)), max(1, round(size[1] * self.resize)))
            image = image.resize(small, Image.Resampling.BICUBIC)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=self.quality)
        out = Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")
        if out.size != size:
            out = out.resize(size, Image.Resampling.BICUBIC)
        return EditResult(out)


def make(config: EditorConfig) -> JpegEditor:
    """`--option quality=N` (1..100, default 75), `--option resize=F` (round trip scale, default 1)."""
    options = take_options(config, "jpeg", {"quality": 75, "resize": 1.0})
    return JpegEditor(options["quality"], options["resize"])
