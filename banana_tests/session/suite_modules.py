"""The suite's test modules, and which of them a run collects: the trend module only under
`--trend`, the search module only under `--search` (they cost a metric call per case)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from banana_tests.session.settings import Settings

SUITE_FOLDER = Path(__file__).resolve().parents[1]
TREND_MODULE = SUITE_FOLDER / "test_trend.py"
SEARCH_MODULE = SUITE_FOLDER / "test_search.py"


def left_out(path: Path, chosen: Settings) -> bool:
    """Whether a run with these settings leaves the suite module at `path` out."""
    if path == TREND_MODULE:
        return not chosen.trend
    if path == SEARCH_MODULE:
        return not chosen.search
    return False


def collected_modules(chosen: Settings) -> list[Path]:
    """The suite's test modules a whole run with these settings collects."""
    return [path for path in sorted(SUITE_FOLDER.glob("test_*.py")) if not left_out(path, chosen)]
