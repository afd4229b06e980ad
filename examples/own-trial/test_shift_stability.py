"""A trial of your own: a metric's score must barely move when the image moves by one pixel.

Runs once per metric of `--metric` (ids `[brisque]`, `[niqe]`, ...), on the trajectory set that
`--dataset` and the selection options choose (by default the embedded one).
"""

from __future__ import annotations

from banana_tests.public_fixtures import Scorer, Trajectories

MAX_MOVE = 2.0  # normalised points (0-100, higher is better)


def test_one_pixel_shift_barely_moves_the_score(
    banana_metric: Scorer, banana_trajectories: Trajectories
) -> None:
    moved = {}
    for seed in banana_trajectories.seed_images:
        run = banana_trajectories.runs(seed)[0]
        record = banana_trajectories[seed, run, banana_trajectories.reference_step]
        image = banana_trajectories.image(record)  # decoded now, and only now
        here, shifted = banana_metric.scores([image[:-1, :-1], image[1:, 1:]])
        moved[seed] = abs(banana_metric.normalise(here) - banana_metric.normalise(shifted))
    worst = max(moved, key=moved.__getitem__)
    assert moved[worst] < MAX_MOVE, f"{banana_metric.name} moves {moved[worst]:.2f} points on {worst}"
