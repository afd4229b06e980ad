"""The one Markdown table writer: what a cell may hold without breaking its row."""

from __future__ import annotations

import pytest

from banana_tests.table_text import Align, table


def test_a_pipe_and_a_line_break_stay_in_their_cell() -> None:
    assert table(["name", "n"], [["a|b", 1], ["two\nlines", 2]], [Align.LEFT, Align.RIGHT]) == [
        "| name | n |",
        "|---|---:|",
        "| a\\|b | 1 |",
        "| two<br>lines | 2 |",
    ]


def test_an_alignment_per_column() -> None:
    with pytest.raises(ValueError, match="1 alignments for 2 columns"):
        table(["a", "b"], [], [Align.LEFT])
