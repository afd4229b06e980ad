"""Per metric and step: could one global threshold on the normalised score filter step-k images
out? The AUC against the reference-step images, pooled over seed images and runs, with the clean
images' own spread beside it (banana_tests.verdicts.separability), from the cells' per-run scores."""

from __future__ import annotations

from banana_tests.table_text import Align, table
from banana_tests.verdicts.matrix import Matrix
from banana_tests.verdicts.separability import Separability, separability


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
