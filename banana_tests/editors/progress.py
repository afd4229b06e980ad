"""A one-line progress bar (steps done / total, ETA) that stays silent off a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """`advance()` after each step; steps done before this process started count as done."""

    def __init__(self, total: int, done: int = 0, stream: TextIO | None = None, width: int = 30) -> None:
        self.total, self.done, self.width = total, done, width
        self.stream = stream if stream is not None else sys.stdout
        self.enabled = self.stream.isatty()
        self._start, self._start_done = time.monotonic(), done
        self._draw()

    def advance(self) -> None:
        self.done += 1
        self._draw()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

    def line(self) -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = round(self.width * fraction)
        made = self.done - self._start_done
        elapsed = time.monotonic() - self._start
        eta = _clock(elapsed / made * (self.total - self.done)) if made else "?"
        bar = "#" * filled + "." * (self.width - filled)
        return f"[{bar}] {self.done}/{self.total} steps  elapsed {_clock(elapsed)}  ETA {eta}"

    def _draw(self) -> None:
        if self.enabled:
            self.stream.write("\r" + self.line())
            self.stream.flush()
