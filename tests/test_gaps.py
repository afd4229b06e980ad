from __future__ import annotations

import pytest

from banana_tests.verdicts.gaps import gap, run_mean
from metrics_under_test.spec import Scale


def test_normalise_maps_the_typical_range_to_0_100() -> None:
    assert Scale(0, 150, lower_better=False).normalise(75) == 50
    assert Scale(1, 5, lower_better=False).normalise(5) == 100


def test_lower_better_flips_direction() -> None:
    brisque = Scale(0, 150, lower_better=True)
    assert brisque.normalise(0) == 100
    assert brisque.normalise(150) == 0
    assert brisque.normalise(-9.8) > 100  # not clipped: the paper's BRISQUE goes below 0


def test_dongpo_brisque_check_value() -> None:
    """The paper's Figure 4: BRISQUE 34.1 → -9.8 is a gap of +29.3 normalised units."""
    g = gap(Scale(0, 150, lower_better=True), [34.1], [-9.8])
    assert g.delta == pytest.approx(29.266, abs=1e-3)
    assert not g.detected


def test_gap_averages_raw_scores_over_runs_first() -> None:
    g = gap(Scale(0, 10, lower_better=False), [4.0, 6.0], [3.0, 5.0])
    assert (g.score_reference, g.score_step, g.runs) == (5.0, 4.0, 2)
    assert g.delta == pytest.approx(-10.0)
    assert g.detected


def test_gap_refuses_unpaired_runs() -> None:
    with pytest.raises(ValueError, match="2 runs but step has 1"):
        gap(Scale(0, 1, False), [0.1, 0.2], [0.3])


@pytest.mark.parametrize("low, high", [(1, 1), (2, 1), (0, float("inf"))])
def test_scale_refuses_degenerate_ranges(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="typical range"):
        Scale(low, high, False)


def test_run_mean_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        run_mean([])
