"""A metric whose scores saturate is warned about, once, at the end of the run (issue 33, item 4)."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from banana_tests.cases import CaseKey
from banana_tests.families.degradation.saturation import SHARE, saturations
from banana_tests.verdicts.matrix import Cell, Matrix, Outcome
from tests.conftest import suite_folder

ROOT = Path(__file__).resolve().parents[1]

# A sharpness heuristic clipped to its range: 100 on the clean and slightly noisy images (steps 1
# and 5 of tests.conftest.noisy_image), 0 on the noisier ones.
CLIPPED = """
import numpy as np

from metrics_under_test.examples import laplacian_variance
from metrics_under_test.protocol import metric


@metric("clipped_sharpness", lower_better=False, score_range=(0.0, 100.0))
def clipped_sharpness(images):
    return [float(np.clip(600 - v / 10, 0, 100)) for v in laplacian_variance(images)]
"""


def cell(seed: str, step: int, reference: float, degraded: float, outcome: Outcome = Outcome.PASSED) -> Cell:
    return Cell(
        CaseKey("m", seed, step),
        outcome,
        delta=degraded - reference,
        reference_step=1,
        run_norm_references=(reference,),
        run_norm_steps=(degraded,),
    )


def test_ties_ends_and_zero_deltas_each_saturate_a_metric() -> None:
    spread = [cell(s, k, 80.0 + i, 70.0 - k - i) for i, s in enumerate("abc") for k in (5, 10)]
    assert saturations(Matrix.of(spread)) == []
    tied = [cell(s, k, 50.0, 50.0 - k if s == "c" else 40.0) for s in "abc" for k in (5, 10)]
    (found,) = saturations(Matrix.of(tied))
    assert (found.images, found.tied, found.tied_score, found.at_ends, found.zero_deltas) == (
        9,
        5,
        40.0,
        0,
        0,
    )
    assert found.tied > SHARE * found.images
    assert found.message().startswith(
        "m's scores saturate: 56% of its 9 scored images share one score (40 normalised)."
    )
    ended = [cell(s, k, 100.0, 0.0 if k == 5 else 1.0 + i) for i, s in enumerate("abc") for k in (5, 10)]
    assert "67% sit at an end of its score_range" in saturations(Matrix.of(ended))[0].message()
    beyond = [cell(s, k, 101.0 + i, -5.0 - k - i) for i, s in enumerate("abc") for k in (5, 10)]
    assert saturations(Matrix.of(beyond)) == []  # out of range, yet every image told apart
    one_zero = [*spread, cell("d", 5, 60.0, 60.0, Outcome.FAILED)]
    assert (
        saturations(Matrix.of(one_zero))[0]
        .message()
        .startswith("m's scores saturate: 1 of its 7 Δ are exactly 0.")
    )


def test_cases_without_a_verdict_are_left_out() -> None:
    skipped = [
        cell(s, 5, 60.0, 60.0, outcome)
        for s, outcome in zip("ab", [Outcome.SKIPPED, Outcome.ERROR], strict=True)
    ]
    assert saturations(Matrix.of(skipped)) == []


def test_half_is_not_more_than_half() -> None:
    """SHARE: only more than half of the images tied, or at an end, saturate a metric, and only
    what saturates it is named."""
    half_tied = [cell("a", 5, 50.0, 40.0), cell("b", 5, 60.0, 40.0)]  # 2 of 4 images score 40
    half_at_ends = [cell("a", 5, 100.0, 30.0), cell("b", 5, 70.0, 0.0)]  # 2 of 4 at an end
    assert saturations(Matrix.of(half_tied)) == saturations(Matrix.of(half_at_ends)) == []
    zero = [cell("a", 5, 100.0, 100.0, Outcome.FAILED), cell("b", 5, 60.0, 40.0)]  # both, and a Δ of 0
    (found,) = saturations(Matrix.of(zero))
    assert found.message().startswith("m's scores saturate: 1 of its 2 Δ are exactly 0. Its Δ cases")


def test_every_way_a_metric_saturates_is_named_in_its_one_line() -> None:
    clipped = [cell("a", 5, 100.0, 100.0, Outcome.FAILED), cell("b", 5, 100.0, 100.0, Outcome.FAILED)]
    (found,) = saturations(Matrix.of([*clipped, cell("c", 5, 100.0, 30.0)]))
    assert found.message() == (
        "m's scores saturate: 83% of its 6 scored images share one score (100 normalised); "
        "83% sit at an end of its score_range (normalised exactly 0 or 100); 2 of its 3 Δ are "
        "exactly 0. Its Δ cases cannot tell those images apart; see docs/metrics.md, "
        "'Choosing score_range'"
    )


@pytest.mark.parametrize(("reference_step", "steps"), [(1, (5, 10)), (0, (1, 5)), (1, (0, 5))])
def test_each_seed_image_run_and_step_is_one_image(reference_step: int, steps: tuple[int, int]) -> None:
    """Run-mean cells (three runs' scores each) and --aggregate=per-run cells (one run's each)
    count the same images: each (seed image, run, step) once, the reference step's too."""

    def score(seed: int, run: int, step: int) -> float:
        return 20.0 + 10.0 * seed + 3.0 * run + step / 4  # distinct, none at an end, exact in binary

    def runs(seed: int, step: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
        references = tuple(score(seed, run, reference_step) for run in range(3))
        if (seed, step) == (0, steps[0]):  # the run Δs -1, 0, +1: a run mean of exactly 0 (and a tie)
            return references, tuple(r + run - 1 for run, r in enumerate(references))
        return references, tuple(score(seed, run, step) for run in range(3))

    def scored(key: CaseKey, references: tuple[float, ...], degraded: tuple[float, ...]) -> Cell:
        delta = (sum(degraded) - sum(references)) / len(references)
        outcome = Outcome.PASSED if delta < 0 else Outcome.FAILED
        return Cell(
            key,
            outcome,
            delta,
            reference_step=reference_step,
            runs=len(references),
            run_norm_references=references,
            run_norm_steps=degraded,
        )

    means, per_run = [], []
    for seed, name in enumerate("ab"):
        for step in steps:
            refs, degraded = runs(seed, step)
            key = CaseKey("m", name, step)
            means.append(scored(key, refs, degraded))
            per_run += [scored(dataclasses.replace(key, run=k), (refs[k],), (degraded[k],)) for k in range(3)]
    (mean,) = saturations(Matrix.of(means))
    (each,) = saturations(Matrix.of(per_run))
    assert (mean.images, mean.tied, mean.zero_deltas, mean.deltas) == (18, 2, 1, 4)
    assert (each.images, each.tied, each.zero_deltas, each.deltas) == (18, 2, 1, 12)


def test_cases_without_per_run_scores_count_as_delta_but_not_as_images() -> None:
    no_runs = [
        Cell(CaseKey("m", "a", 5, run=0), Outcome.PASSED, -3.0, reference_step=1),  # --aggregate=per-run
        Cell(CaseKey("m", "b", 5), Outcome.PASSED, -2.0, reference_step=1),
    ]
    assert saturations(Matrix.of(no_runs)) == []
    failed_before_its_delta = Cell(CaseKey("m", "c", 5), Outcome.FAILED, reference_step=1)
    zero = cell("d", 5, 60.0, 30.0)
    zero = dataclasses.replace(zero, delta=0.0, outcome=Outcome.FAILED)
    (found,) = saturations(Matrix.of([*no_runs, failed_before_its_delta, zero]))
    assert (found.images, found.deltas) == (2, 3)
    assert found.message().startswith("m's scores saturate: 1 of its 3 Δ are exactly 0.")


@pytest.mark.slow
def test_a_saturating_metric_is_warned_about_and_piqe_is_not(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0, 1), steps=(1, 5, 10, 20))
    pytester.makepyfile(clipped=CLIPPED)

    result = pytester.runpytest_subprocess(
        "--dataset=data", "--metric=clipped:clipped_sharpness,piqe", "--no-cache", "-n", "2"
    )

    lines = [line for line in result.outlines if "saturate" in line]
    [summary] = [line for line in lines if line.startswith("banana-tests: warning: ")]
    # What the line must carry: the metric, both shares, and where the docs say how to fix it.
    for carried in ("clipped_sharpness", "100%", "an end of its score_range", "2 of its 6 Δ"):
        assert carried in summary, (carried, summary)
    assert "docs/metrics.md" in summary and "Choosing score_range" in summary, summary
    assert [line for line in lines if "BananaSaturationWarning: " in line] == [
        line for line in lines if "clipped_sharpness" in line and not line.startswith("banana-tests:")
    ]
    assert len(lines) == 2 and not any("piqe" in line for line in lines)
    assert result.parseoutcomes()["warnings"] == 1


def test_a_clipped_tie_is_what_saturates_a_metric() -> None:
    from banana_tests.verdicts.verdict import at_an_end, clipped_tie

    assert at_an_end(0.0) and at_an_end(100.0) and not at_an_end(100.5) and not at_an_end(-0.5)
    assert clipped_tie(0.0, 0.0) and clipped_tie(100.0, 100.0)
    assert not clipped_tie(40.0, 40.0) and not clipped_tie(0.0, 100.0) and not clipped_tie(0.0, 3.0)


@pytest.mark.slow
def test_a_control_tie_clipped_at_an_end_of_the_range_is_called_saturated(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Δ cases' rule in the control family (issue 50): a tie at an end of the range is no
    detection, and its line says the scores saturate (PIQE's strong blurs: 0.00 ≥ 0.00)."""
    suite_folder(
        pytester,
        monkeypatch,
        module="from banana_tests.families.control.test_control import *  # noqa: F403\n",
    )
    pytester.makepyfile(clipped=CLIPPED)

    result = pytester.runpytest_subprocess(
        "--metric=clipped:clipped_sharpness", "-k", "gaussian_noise", "--no-cache", "--junitxml=j.xml"
    )

    assert result.ret == 1 and result.parseoutcomes() == {"missed": 1, "deselected": 2}
    [line] = [x for x in result.outlines if x.startswith("clipped_sharpness did not rank gaussian_noise")]
    assert line.endswith(
        ": saturated, both clipped to normalised 0.00, an end of its score_range; see docs/metrics.md, "
        "'Choosing score_range'"
    )
    [failure] = ET.parse(pytester.path / "j.xml").iter("failure")
    assert failure.get("message", "").startswith(
        "Failed: saturated: normalised 0.00 = 0.00, an end of its score_range\n"
    )


def test_the_warning_filter_the_docs_give_names_the_warning() -> None:
    """docs/metrics.md's `-W ignore::<class>` must name the class the run warns with: pytest ends a
    run with a usage error on a filter whose class does not import."""
    import importlib
    import re

    from banana_tests.families.degradation.saturation import BananaSaturationWarning

    docs = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    [dotted] = set(re.findall(r"`([\w.]+\.BananaSaturationWarning)`", docs))
    module, _, name = dotted.rpartition(".")
    assert getattr(importlib.import_module(module), name) is BananaSaturationWarning
