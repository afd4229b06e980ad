"""pytest's own summary for the suite's misses: red, and listed by `-rf`.

A failing verdict is filed under its own category, `missed` (session.reporter.MISSED), so
pytest's FAILURES section leaves it to the suite's one-line-per-verdict section. pytest colours
a run red only for the categories `failed` and `error`, any other one yellow, and `-rf` lists
only `failed`: a run of misses alone ended yellow while exiting 1, its misses absent from `-rf`.
`MissSummary` teaches the run's terminal reporter the category, and undoes it when the run ends
(an in-process pytester run leaves the next run's reporter as pytest made it):

- the run's colour (the final line, the progress) is red once a case missed;
- "N missed" is red in the final line and in `-rf`;
- `-rf` lists each miss, `MISSED <test id> - <its figure>`, beside pytest's `FAILED` lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _pytest import terminal

MISSED = "missed"
"""The terminal's category for a failing verdict."""
RED = "red"
FAILED = "failed"  # pytest's category that `-rf` lists


class MissSummary:
    """Installed on the run's terminal reporter as soon as there is one (`attach`: pytest registers
    it after the plugin's pytest_configure), removed at pytest_unconfigure. An xdist worker has
    none: its controller prints the summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.reporter: pytest.TerminalReporter | None = None
        self.colour_before: str | None = terminal._color_for_type.get(MISSED)

    def attach(self) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.reporter is not None:
            return
        self.reporter = reporter
        main_colour: Callable[[bool], str] = reporter._determine_main_color
        short_summary: Callable[[], None] = reporter.short_test_summary

        def determine_main_color(unknown_type_seen: bool) -> str:
            return RED if reporter.stats.get(MISSED) else main_colour(unknown_type_seen)

        def short_test_summary() -> None:
            """pytest's short summary, its `f` listing the misses after the failures: they are
            shown as `failed` for the call only, and pytest's stats are left as they were."""
            misses: list[Any] = reporter.stats.get(MISSED, [])
            if not misses or "f" not in reporter.reportchars:
                return short_summary()
            created = FAILED not in reporter.stats
            failed: list[Any] = reporter.stats.setdefault(FAILED, [])
            before = len(failed)
            failed.extend(misses)
            try:
                return short_summary()
            finally:
                del failed[before:]
                if created:
                    del reporter.stats[FAILED]

        setattr(reporter, "_determine_main_color", determine_main_color)  # noqa: B010
        setattr(reporter, "short_test_summary", short_test_summary)  # noqa: B010
        terminal._color_for_type[MISSED] = RED

    def pytest_sessionstart(self) -> None:
        self.attach()

    def pytest_unconfigure(self) -> None:
        if self.reporter is None:
            return
        for name in ("_determine_main_color", "short_test_summary"):
            if name in vars(self.reporter):
                delattr(self.reporter, name)
        if self.colour_before is None:
            terminal._color_for_type.pop(MISSED, None)
        else:
            terminal._color_for_type[MISSED] = self.colour_before


def install_miss_summary(config: pytest.Config) -> None:
    summary = MissSummary(config)
    config.pluginmanager.register(summary, "banana-tests-miss-summary")
    summary.attach()  # a run adopted at collection has its reporter already
