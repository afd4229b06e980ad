"""The paper's published Figure 5 gaps as matrix cells, so reports can render and compare them.

The CSV keeps the paper's text, rounded to 0.1. A failure is a published gap ≥ 0, and "-0.0"
(PaQ-2-PiQ Fog 5, PIQE Sand 5) counts as 0, so a failure: only then do the failure counts
equal the paper's (PaQ-2-PiQ 18, PIQE 22), though the gap was negative before rounding.
"""

from __future__ import annotations

import csv
from pathlib import Path

from banana_tests.cases import CaseKey
from banana_tests.data import PAPER_CSV
from banana_tests.verdicts.matrix import Cell
from banana_tests.verdicts.outcome import Outcome
from metrics_under_test.registry import PAPER_METRICS

PAPER_REFERENCE_STEP = 1
_PYIQA_NAME = {m.paper_name: m.pyiqa_name for m in PAPER_METRICS}


def paper_cells(path: Path = PAPER_CSV) -> list[Cell]:
    """One passed/failed cell per (metric, seed image, step) of Figure 5, metrics by pyiqa name."""
    cells = []
    with path.open(newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                metric = _PYIQA_NAME[row["metric"]]
                text = row["normalized_gap"].strip()
                key = CaseKey(metric, row["seed_image"], int(row["step"]))
                delta = float(text)
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path}:{line}: not a Figure 5 row {row} ({exc!r})") from exc
            outcome = Outcome.FAILED if delta >= 0 else Outcome.PASSED
            cells.append(Cell(key, outcome, delta, reference_step=PAPER_REFERENCE_STEP))
    return cells
