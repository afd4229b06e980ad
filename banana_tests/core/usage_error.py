"""An option or a data set that no run can satisfy, found by the core: a suite run turns it into
pytest's usage error (one line, exit 4), the api into ScoreSetupError."""

from __future__ import annotations


class UsageError(ValueError):
    """The message names the option or the data set, as the user wrote it."""
