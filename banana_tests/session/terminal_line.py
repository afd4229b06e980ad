"""A line on the user's terminal from inside a running test, where pytest captures the output."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Write one line to stderr with pytest's capture suspended, as its live logging does; under
    xdist a worker's stderr is the terminal's."""
    capture = config.pluginmanager.getplugin("capturemanager")

    def say(line: str) -> None:
        if capture is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)

    return say
