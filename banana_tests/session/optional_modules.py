"""The suite's test modules that only some options collect: the trend module under --trend, the
search module under --search. The plugin's `pytest_ignore_collect` and the shard selection's
count of unreached modules read the same rule here."""

from __future__ import annotations

from pathlib import Path

import pytest

TREND_MODULE = Path(__file__).resolve().parents[1] / "test_trend.py"
SEARCH_MODULE = TREND_MODULE.with_name("test_search.py")


def left_out(collection_path: Path, config: pytest.Config) -> bool | None:
    """True for an optional module its option did not ask for; None for any other path."""
    if collection_path not in (TREND_MODULE, SEARCH_MODULE):
        return None
    from banana_tests.session.run_state import settings_of

    chosen = settings_of(config)
    return None if (chosen.trend if collection_path == TREND_MODULE else chosen.search) else True
