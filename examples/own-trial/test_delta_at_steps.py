"""A trial of your own: Δ at the steps you choose, on your own trajectory set.

    pytest examples/own-trial/test_delta_at_steps.py --dataset=path/to/my_set --steps=all

Δ is computed exactly as the shipped cases do (run means of the raw scores, normalised with the
metric's Table 2 range, minus the reference step's), so a failure here reads like one there.
"""

from __future__ import annotations

import pytest

from banana_tests.public_fixtures import Scorer, Trajectories

STEPS = [5, 20]  # steps your set holds (--steps=all keeps every step; the default keeps 5, 10, 20)


@pytest.mark.parametrize("step", STEPS)
def test_score_falls_by_step(banana_metric: Scorer, banana_trajectories: Trajectories, step: int) -> None:
    missed = {}
    for seed in banana_trajectories.seed_images:
        gap = banana_metric.delta(banana_trajectories.pairs(seed, step))  # one (reference, step) pair per run
        if not gap.detected:  # Δ < 0: the metric saw the image get worse
            missed[seed] = f"Δ{step} = {gap.delta:+.2f}"
    assert not missed, f"{banana_metric.name} missed the degradation at step {step}: {missed}"
