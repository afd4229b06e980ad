from __future__ import annotations

import pytest

from banana_tests.cases import CaseKey, strip_xdist_group
from banana_tests.verdicts.record import CaseRecord


@pytest.mark.parametrize(
    "key",
    [
        CaseKey("brisque", "astronaut", 5),
        CaseKey("topiq_nr-flive", "motor-cycle", 20, run=3),
        CaseKey("clipiqa+", "x", 100),
    ],
)
def test_test_id_round_trips(key: CaseKey) -> None:
    metrics = ["brisque", "topiq_nr", "topiq_nr-flive", "clipiqa+"]
    assert key.test_id.endswith(f"-step{key.step}")
    assert CaseKey.from_test_id(key.test_id, metrics) == key
    record = CaseRecord(key, 1)
    assert CaseRecord.read(dict(record.properties())) == record


def test_ids_of_the_brief_shape() -> None:
    assert CaseKey("brisque", "coffee", 10).test_id == "brisque-coffee-step10"
    assert CaseKey("niqe", "coffee", 10, run=1).test_id == "niqe-coffee-run1-step10"


def test_xdist_group_suffix_is_stripped() -> None:
    assert strip_xdist_group("brisque-coffee-step10@brisque") == "brisque-coffee-step10"
    assert CaseKey.from_test_id("brisque-coffee-step10@brisque", ["brisque"]).seed_image == "coffee"


def test_unknown_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="not a banana-tests case id"):
        CaseKey.from_test_id("brisque-coffee", ["brisque"])
    with pytest.raises(ValueError, match="names none of the metrics"):
        CaseKey.from_test_id("musiq-coffee-step5", ["brisque"])
