"""The degradation oracle as the report's reference row: PSNR/SSIM against the reference step,
run as a detector beside the metrics.

It needs no model, so it is the positive control: a matrix that is all red beside an oracle row
that detects every step indicts the metrics, not the suite. The oracle detects a step when some
run's step moved from its reference by at least one grey level RMS (PSNR under UNCHANGED_PSNR),
the same rule that makes a metric's case a valid trial (scoring.oracle), so a step the oracle
misses is exactly where the metrics' cases are "not a valid trial".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from banana_tests.cases import CaseKey, sort_key
from banana_tests.scoring.oracle import NOT_A_VALID_TRIAL, UNCHANGED_PSNR
from banana_tests.table_text import Align, table
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome, OutcomeCounts

ORACLE = "PSNR oracle"
"""The reference row's name; the space keeps it apart from any metric's name."""


@dataclass(frozen=True)
class OracleCell:
    """The oracle on one (seed image, step[, run]): each run's PSNR (dB) and SSIM."""

    key: CaseKey
    psnr: tuple[float, ...]
    ssim: tuple[float, ...]

    @property
    def detected(self) -> bool:
        return any(p < UNCHANGED_PSNR for p in self.psnr)

    @property
    def outcome(self) -> Outcome:
        return Outcome.PASSED if self.detected else Outcome.FAILED

    @property
    def mean_psnr(self) -> float:
        return math.fsum(self.psnr) / len(self.psnr)

    @property
    def mean_ssim(self) -> float:
        """nan for a record that carries PSNR only."""
        return math.fsum(self.ssim) / len(self.ssim) if self.ssim else math.nan


@dataclass(frozen=True)
class OracleStep:
    """The oracle at one step, every run of every seed image pooled."""

    step: int
    cells: int
    detected: int
    psnr_low: float
    psnr_high: float
    ssim_low: float
    ssim_high: float

    def row(self) -> list[str]:
        """Its table row, in summary.md and report.html: step, detected/cells, PSNR and SSIM ranges."""
        psnr, ssim = (
            f"{self.psnr_low:.2f} … {self.psnr_high:.2f}",
            f"{self.ssim_low:.3f} … {self.ssim_high:.3f}",
        )
        return [str(self.step), f"{self.detected}/{self.cells}", psnr, ssim]


def oracle_cells(matrix: Matrix) -> list[OracleCell]:
    """One per (seed image, step[, run]) whose cells recorded the oracle, in row order. Every
    metric's case records the same image pairs, so the first metric's figures stand for all."""
    found: dict[CaseKey, OracleCell] = {}
    for key in sorted(matrix.cells, key=sort_key):
        cell = matrix.cells[key]
        row = CaseKey(ORACLE, key.seed_image, key.step, key.run)
        if cell.psnr and row not in found:
            found[row] = OracleCell(row, cell.psnr, cell.ssim)
    return list(found.values())


def oracle_counts(cells: list[OracleCell]) -> OutcomeCounts:
    counts = OutcomeCounts()
    for cell in cells:
        counts.add(cell.outcome)
    return counts


def oracle_steps(cells: list[OracleCell]) -> list[OracleStep]:
    by_step: dict[int, list[OracleCell]] = {}
    for cell in cells:
        by_step.setdefault(cell.key.step, []).append(cell)
    out = []
    for step, group in sorted(by_step.items()):
        psnr = [p for c in group for p in c.psnr]
        ssim = [s for c in group for s in c.ssim] or [math.nan]
        detected = sum(c.detected for c in group)
        out.append(OracleStep(step, len(group), detected, min(psnr), max(psnr), min(ssim), max(ssim)))
    return out


def invalid_trials(matrix: Matrix) -> list[Cell]:
    """The metrics' cases on steps that did not change: no trial of the metric."""
    cells = matrix.cells
    return [cells[k] for k in sorted(cells, key=sort_key) if cells[k].outcome is Outcome.INVALID]


def psnr_text(values: tuple[float, ...]) -> str:
    """Each run's PSNR in dB to one decimal, e.g. `50.2, inf`."""
    return ", ".join(f"{p:.1f}" for p in values)


def oracle_markdown(matrix: Matrix) -> str:
    """The oracle's section of summary.md: per step, how many steps it saw change and the PSNR
    and SSIM ranges, then every case that was not a valid trial with its PSNR; empty when no
    cell recorded the oracle (the paper's matrix, files written before it)."""
    cells = oracle_cells(matrix)
    if not cells:
        return ""
    lines = [
        "### Degradation oracle (positive control)",
        "",
        "PSNR and SSIM of each step against the reference step of the same run, by pixels alone.",
        f"It detects a step that moved by at least one grey level RMS (PSNR < {UNCHANGED_PSNR:.2f} dB);",
        f"where it does not, every metric's case is {NOT_A_VALID_TRIAL}, not the metric's failure.",
        "",
        *table(
            ["step", "detected", "PSNR (dB)", "SSIM"],
            [s.row() for s in oracle_steps(cells)],
            [Align.RIGHT] * 4,
        ),
    ]
    invalid = invalid_trials(matrix)
    if invalid:
        lines += [
            "",
            f"{len(invalid)} case(s) {NOT_A_VALID_TRIAL} (not counted as the metric's failure):",
            "",
        ]
        lines += [f"- {c.key.test_id}: PSNR {psnr_text(c.psnr)} dB" for c in invalid]
    return "\n".join(lines) + "\n"
