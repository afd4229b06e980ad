"""The matrix's own sections beyond its per-metric table, each from the Δ cells alone, each empty
when the cells lack what it needs: which artifact a metric misses, separability and the
degradation oracle.

Misses by artifact: a trial's seed image is `<seed image>.<artifact>`
(banana_tests.trajectories.records), so the cells of a `--artifact` run group by artifact with
no field of their own: "PIQE misses 14/24" comes with "static 8/24, tint 0/24".

Separability: could one global threshold on a metric filter degraded images out? A data team
picks one cut-off for all content. That works only if reference-step images score above step-k
images across seed images and runs, pooled: the AUC of the normalised score as a classifier
(Mann-Whitney: the chance that a random clean image outscores a random degraded one, ties
counting half). 0.5 is chance; below 0.5 the metric prefers the degraded images. The clean
images' own spread sits beside it, because content moves scores more than degradation.

The degradation oracle, the report's reference row: PSNR/SSIM against the reference step, run as
a detector beside the metrics. It needs no model, so it is the positive control: a matrix that is
all red beside an oracle row that detects every step indicts the metrics, not the suite. The oracle
detects a step when some run's step moved from its reference by at least one grey level RMS (PSNR
under UNCHANGED_PSNR), the same rule that makes a metric's case a valid trial (scoring.oracle), so
a step the oracle misses is exactly where the metrics' cases are "not a valid trial".
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from banana_tests.cases import CaseKey, sort_key
from banana_tests.scoring.oracle import NOT_A_VALID_TRIAL, UNCHANGED_PSNR
from banana_tests.table_text import Align, table
from banana_tests.trajectories.records import ARTIFACTS, split_trial
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome, OutcomeCounts


@dataclass(frozen=True)
class Separability:
    """One metric at one step, pooled over seed images and runs; scores are normalised (higher = better)."""

    step: int
    auc: float
    clean: int  # reference-step images
    degraded: int  # step-k images
    clean_low: float  # the clean images' lowest and highest normalised score: the content confound
    clean_high: float

    @property
    def clean_spread(self) -> float:
        return self.clean_high - self.clean_low


def auc(clean: Sequence[float], degraded: Sequence[float]) -> float:
    """P(clean > degraded) + ½·P(tie), from mid-ranks in O(n log n)."""
    if not clean or not degraded:
        raise ValueError("AUC needs at least one clean and one degraded score")
    pooled = sorted([(s, True) for s in clean] + [(s, False) for s in degraded])
    rank_sum = 0.0  # of the clean scores, 1-based mid-ranks
    i = 0
    while i < len(pooled):
        j = i
        while j < len(pooled) and pooled[j][0] == pooled[i][0]:
            j += 1
        mid_rank = (i + 1 + j) / 2
        rank_sum += mid_rank * sum(1 for _, is_clean in pooled[i:j] if is_clean)
        i = j
    n_clean = len(clean)
    return (rank_sum - n_clean * (n_clean + 1) / 2) / (n_clean * len(degraded))


def separability(step: int, clean: Sequence[float], degraded: Sequence[float]) -> Separability:
    return Separability(step, auc(clean, degraded), len(clean), len(degraded), min(clean), max(clean))


Table = dict[str, dict[str, OutcomeCounts]]  # artifact -> metric -> counts


def artifact_counts(matrix: Matrix) -> Table:
    """Outcome counts per artifact (in the composite's order) and metric, over the trial cells."""
    found: defaultdict[str, defaultdict[str, OutcomeCounts]] = defaultdict(lambda: defaultdict(OutcomeCounts))
    for key, cell in matrix.cells.items():
        trial = split_trial(key.seed_image)
        if trial is not None:
            found[trial[1]][key.metric].add(cell.outcome)
    return {a: dict(found[a]) for a in ARTIFACTS if a in found}


def _grid(table: Table) -> tuple[list[str], list[list[str]]]:
    metrics = sorted({m for row in table.values() for m in row})
    rows = [
        [artifact, *(row[m].label() if m in row else "" for m in metrics)] for artifact, row in table.items()
    ]
    return metrics, rows


def artifact_lines(matrix: Matrix) -> list[str]:
    """The table for the terminal: a row per artifact, a column per metric, misses/verdicts."""
    table = artifact_counts(matrix)
    if not table:
        return []
    metrics, rows = _grid(table)
    col = max(7, *(len(m) for m in metrics), *(len(c) for r in rows for c in r[1:]))
    first = max(12, *(len(r[0]) for r in rows))
    lines = [
        "cell: cases missed (Δ ≥ 0) / cases with a verdict, over every seed image and step",
        " " * first + " " + " ".join(m.rjust(col) for m in metrics),
    ]
    lines += [r[0].ljust(first) + " " + " ".join(c.rjust(col) for c in r[1:]) for r in rows]
    return lines


def artifact_markdown(matrix: Matrix) -> str:
    """summary.md's section; empty without trial cells."""
    counts = artifact_counts(matrix)
    if not counts:
        return ""
    metrics, rows = _grid(counts)
    lines = [
        "### Misses by artifact",
        "",
        "Each trial set degrades the same seed images with one artifact family alone (replicate: all",
        "of them); a cell counts the cases missed (Δ ≥ 0) out of those with a verdict.",
        "",
        *table(["artifact", *metrics], rows, [Align.LEFT] + [Align.RIGHT] * len(metrics)),
    ]
    return "\n".join(lines) + "\n"


def artifact_html(matrix: Matrix) -> str:
    """report.html's section; empty without trial cells."""
    table = artifact_counts(matrix)
    if not table:
        return ""
    metrics, rows = _grid(table)
    head = "".join(f"<th>{escape(m)}</th>" for m in metrics)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (
        "<h2>Misses by artifact</h2>\n<p>Each trial set degrades the same seed images with one artifact "
        "family alone (replicate: all of them); a cell counts the cases missed (Δ ≥ 0) out of those "
        f'with a verdict.</p>\n<div class="scroll"><table class="facts"><tr><th>artifact</th>{head}</tr>'
        f"{body}</table></div>"
    )


def miss_rates(matrix: Matrix) -> tuple[list[str], list[str], list[list[float]]]:
    """(artifacts, metrics, miss rate in % per artifact and metric; nan without a verdict) for the figure."""
    table = artifact_counts(matrix)
    metrics = sorted({m for row in table.values() for m in row})
    rates = []
    for row in table.values():
        line = []
        for m in metrics:
            c = row.get(m, OutcomeCounts())
            verdicts = c.passed + c.failed
            line.append(100.0 * c.failed / verdicts if verdicts else float("nan"))
        rates.append(line)
    return list(table), metrics, rates


def separabilities(matrix: Matrix) -> dict[str, list[Separability]]:
    """By metric, one per step, in step order. Each (seed image, run) reference image counts once,
    however many steps' cells carry it; cells recorded without per-run scores are left out."""
    clean: dict[str, dict[tuple[str, int], float]] = {}
    degraded: dict[str, dict[int, list[float]]] = {}
    for key, cell in sorted(matrix.cells.items()):
        if not cell.run_norm_references or len(cell.run_norm_references) != len(cell.run_norm_steps):
            continue
        runs = [key.run] if key.run is not None else list(range(len(cell.run_norm_references)))
        for run, reference, step in zip(runs, cell.run_norm_references, cell.run_norm_steps, strict=True):
            clean.setdefault(key.metric, {})[(key.seed_image, run)] = reference
            degraded.setdefault(key.metric, {}).setdefault(key.step, []).append(step)
    return {
        metric: [
            separability(step, list(clean[metric].values()), scores) for step, scores in sorted(steps.items())
        ]
        for metric, steps in sorted(degraded.items())
    }


def separability_lines(matrix: Matrix) -> list[str]:
    """One terminal line per metric: AUC per step and the clean images' spread."""
    table = separabilities(matrix)
    width = max((len(m) for m in table), default=0)
    out = []
    for metric, rows in table.items():
        aucs = ", ".join(f"step {r.step} {r.auc:.2f}" for r in rows)
        first = rows[0]
        out.append(
            f"{metric.ljust(width)}  AUC {aucs}; clean images {first.clean_low:.1f} … {first.clean_high:.1f} "
            f"(spread {first.clean_spread:.1f}, n = {first.clean})"
        )
    return out


def separability_rows(matrix: Matrix) -> tuple[list[str], list[list[str]]]:
    """(header, rows): per metric, the AUC at each step (empty where it has none) and the clean
    images' count, range and spread; no rows when no cell carries per-run scores."""
    by_metric = separabilities(matrix)
    steps = sorted({r.step for rows in by_metric.values() for r in rows})
    header = ["metric", *(f"AUC step {s}" for s in steps), "clean images", "clean range", "clean spread"]
    body = []
    for metric, rows in by_metric.items():
        by_step = {r.step: f"{r.auc:.3f}" for r in rows}
        first = rows[0]
        clean = f"{first.clean_low:.1f} … {first.clean_high:.1f}"
        body.append(
            [
                metric,
                *(by_step.get(s, "") for s in steps),
                str(first.clean),
                clean,
                f"{first.clean_spread:.1f}",
            ]
        )
    return header, body


def separability_markdown(matrix: Matrix) -> str:
    """The per-metric table for summary.md; empty when no cell carries per-run scores."""
    header, body = separability_rows(matrix)
    if not body:
        return ""
    lines = [
        "### Separability: could one threshold filter step-k images?",
        "",
        "AUC of telling step-k images from reference-step images by the normalised score, pooled over",
        "seed images and runs: 1 = every clean image scores above every degraded one, 0.5 = chance,",
        "below 0.5 the metric prefers the degraded images. The clean images' range is the content confound.",
        "",
    ]
    lines += table(header, body, [Align.LEFT] + [Align.RIGHT] * (len(header) - 1))
    return "\n".join(lines) + "\n"


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
