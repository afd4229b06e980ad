"""metrics_under_test/registry.py against the paper's own Table 2 (../shared/paper/README.md), and
the registry's scales built from it: the one source of every normalisation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from metrics_under_test.registry import PAPER_METRICS, catalog, resolve
from tests.conftest import unavailable

PAPER = Path(__file__).resolve().parents[2] / "shared" / "paper" / "README.md"
PI_HIGH = 55.0  # the paper gives only "≥ 0"; our bound, argued in docs/matrix.md ("PI's range")
OUTSIDE_PYIQA = {"VisualQuality-R1", "RALI"}  # VLM metrics the paper tests outside pyiqa


def paper_table() -> dict[str, tuple[float, float | None, bool]]:
    """Table 2 of the paper README: metric -> (low, high or None for "≥ low", higher is better)."""
    if not PAPER.is_file():
        unavailable(f"no paper notes at {PAPER}")
    text = PAPER.read_text()
    section = text.split("## Table 2", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # header, rule
    table: dict[str, tuple[float, float | None, bool]] = {}
    for line in rows:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for name, rng, better in (cells[0:3], cells[4:7]):
            if not name:
                continue
            closed = re.fullmatch(r"\[(-?[\d.]+), (-?[\d.]+)\]", rng)
            half = re.fullmatch(r"≥ (-?[\d.]+)", rng)
            assert closed or half, (name, rng)
            low, high = (float(closed[1]), float(closed[2])) if closed else (float(half[1]), None)  # type: ignore[index]
            assert better in ("yes", "no"), (name, better)
            table[name] = (low, high, better == "yes")
    return table


def test_the_paper_table_parses_to_23_metrics() -> None:
    table = paper_table()
    assert len(table) == 23
    assert table["BRISQUE"] == (0.0, 150.0, False) and table["WaDIQaM"] == (-1.0, 0.1, True)


def test_table2_py_is_the_papers_table_2() -> None:
    """Every range and direction as published; PI's open upper bound is the documented 55."""
    table = paper_table()
    ours = {p.paper_name: (p.low, p.high, not p.lower_better) for p in PAPER_METRICS}
    assert set(ours) == set(table) - OUTSIDE_PYIQA
    for name, (low, high, higher_better) in table.items():
        if name in OUTSIDE_PYIQA:
            continue
        assert ours[name] == (low, PI_HIGH if high is None else high, higher_better), name
    assert [p.paper_name for p in PAPER_METRICS if table[p.paper_name][1] is None] == ["PI"]


@pytest.mark.parametrize("paper", PAPER_METRICS, ids=lambda p: p.pyiqa_name)
def test_the_registry_normalises_with_table_2(paper: object) -> None:
    """By pyiqa name and by paper name, the metric's scale is Table 2's row: its range maps to
    [0, 100] with 100 the better end."""
    from metrics_under_test.registry import PaperMetric

    assert isinstance(paper, PaperMetric)
    spec = catalog()[paper.pyiqa_name]
    assert [s.name for s in resolve(paper.paper_name)] == [paper.pyiqa_name]
    scale = spec.scale
    assert (scale.low, scale.high, scale.lower_better) == (paper.low, paper.high, paper.lower_better)
    worse, better = (paper.high, paper.low) if paper.lower_better else (paper.low, paper.high)
    assert scale.normalise(worse) == pytest.approx(0.0, abs=1e-9)
    assert scale.normalise(better) == pytest.approx(100.0)
    middle = (paper.low + paper.high) / 2
    assert scale.normalise(middle) == pytest.approx(50.0)
