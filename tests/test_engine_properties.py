"""Properties of the gap engine and of a case's identity, checked by hypothesis."""

from __future__ import annotations

import math
import re

from hypothesis import assume, given
from hypothesis import strategies as st

from banana_tests.cases import CaseKey, Field
from banana_tests.verdicts.gaps import gap, run_mean
from banana_tests.verdicts.record import CaseRecord
from metrics_under_test.registry import catalog
from metrics_under_test.spec import Scale

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-2, max_value=1e2, allow_nan=False, allow_infinity=False)


@st.composite
def scales(draw: st.DrawFn) -> Scale:
    low = draw(finite)
    return Scale(low, low + draw(positive), draw(st.booleans()))


@st.composite
def run_scores(draw: st.DrawFn) -> tuple[list[float], list[float]]:
    """Raw scores of the runs at the reference step and at step i, the same number of runs."""
    runs = draw(st.integers(min_value=1, max_value=5))
    return draw(st.lists(finite, min_size=runs, max_size=runs)), draw(
        st.lists(finite, min_size=runs, max_size=runs)
    )


@given(scales(), run_scores(), positive, finite)
def test_verdict_is_invariant_under_positive_affine_rescaling(
    scale: Scale, scores: tuple[list[float], list[float]], a: float, b: float
) -> None:
    """Rescaling scores and range together keeps Δ; any other positive range keeps its sign."""
    ref, cur = scores
    assume(abs(run_mean(cur) - run_mean(ref)) > 1e-6 * (1 + max(map(abs, ref + cur))))
    before = gap(scale, ref, cur)
    rescaled = Scale(a * scale.low + b, a * scale.high + b, scale.lower_better)
    after = gap(rescaled, [a * s + b for s in ref], [a * s + b for s in cur])
    assert after.detected == before.detected
    assert math.isclose(after.delta, before.delta, rel_tol=1e-6, abs_tol=1e-6)
    other_range = Scale(scale.low - b, scale.low - b + a, scale.lower_better)
    assert gap(other_range, ref, cur).detected == before.detected


@given(scales(), finite, finite)
def test_flipping_the_direction_reverses_the_order_of_scores(scale: Scale, x: float, y: float) -> None:
    """The flipped scale ranks any two different scores the other way round, and its normalised
    scores mirror the original's about 50."""
    assume(abs(x - y) > 1e-6)
    flipped = scale.flipped()
    assert flipped.flipped() == scale
    assert (scale.normalise(x) < scale.normalise(y)) == (flipped.normalise(x) > flipped.normalise(y))
    assert math.isclose(scale.normalise(x) + flipped.normalise(x), 100.0, abs_tol=1e-6)


@given(scales(), st.lists(finite, min_size=1, max_size=5), st.floats(min_value=1e-3, max_value=1e2))
def test_only_a_worse_score_is_a_detection(scale: Scale, scores: list[float], shift: float) -> None:
    """Δ = 0 fails (the assertion is strict); a step scored worse in the metric's own direction is
    detected whatever the range; a step scored better is not."""
    worse = shift if scale.lower_better else -shift
    assert not gap(scale, scores, scores).detected
    assert gap(scale, scores, [s + worse for s in scores]).detected
    assert not gap(scale, scores, [s - worse for s in scores]).detected


@given(scales(), st.lists(finite, min_size=1, max_size=5))
def test_run_mean_commutes_with_normalisation(scale: Scale, scores: list[float]) -> None:
    normalised = [scale.normalise(s) for s in scores]
    assert math.isclose(scale.normalise(run_mean(scores)), run_mean(normalised), rel_tol=1e-9, abs_tol=1e-6)


METRICS = sorted(catalog())
seed_images = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_ .-]{0,20}", fullmatch=True)
case_keys = st.builds(
    CaseKey,
    metric=st.sampled_from(METRICS),
    seed_image=seed_images,
    step=st.integers(min_value=0, max_value=1000),
    run=st.none() | st.integers(min_value=0, max_value=99),
)


@given(case_keys)
def test_test_id_round_trips(key: CaseKey) -> None:
    """Ids are unambiguous unless a seed name looks like a run suffix or extends the metric's name
    into another metric's (arniqa + "clive-…" reads as arniqa-clive); the properties always are."""
    head = f"{key.metric}-{key.seed_image}"
    assume(not re.search(r"-run\d+$", key.seed_image))
    assume(
        not any(m != key.metric and head.startswith(m + "-") and len(m) > len(key.metric) for m in METRICS)
    )
    assert CaseKey.from_test_id(key.test_id, METRICS) == key
    assert CaseKey.from_test_id(key.test_id + "@piqe", METRICS) == key  # xdist's loadgroup suffix


@given(case_keys)
def test_a_record_round_trips_through_its_properties(key: CaseKey) -> None:
    record = CaseRecord(key, 1, {Field.DELTA: "-1.5", Field.RUNS: "2"})
    assert CaseRecord.read(dict(record.properties())) == record
