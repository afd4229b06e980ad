from __future__ import annotations

import dataclasses
import re

import pytest

from banana_tests.cases import SCHEMA, CaseKey, CaseKind, Field, strip_xdist_group
from banana_tests.families.control import ControlKey
from banana_tests.families.invariance import InvarianceKey
from banana_tests.families.search import SearchKey
from banana_tests.families.trend import TrendKey
from banana_tests.verdicts.record import CaseRecord, Key, RecordError


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


KEYS = [
    CaseKey("piqe", "alpha", 5),
    TrendKey("piqe", "alpha"),
    ControlKey("piqe", "jpeg"),
    InvarianceKey("piqe", "shift"),
    SearchKey("piqe"),
]


@pytest.mark.parametrize("key", KEYS, ids=lambda k: type(k).__name__)
def test_every_kind_of_record_reads_back_as_itself(key: Key) -> None:
    """A record's identity names its kind and its key's fields only; read back, it is the same
    record of the same kind, with or without a reference step."""
    for record in (CaseRecord(key), CaseRecord(key, 1)):
        props = dict(record.properties())
        assert props[Field.RECORD] == f"{record.kind.value}/{SCHEMA}"
        assert (Field.RUN in props, Field.REFERENCE_STEP in props) == (False, record.reference_step == 1)
        back = CaseRecord.read(props)
        assert back == record and back is not None and back.kind is record.kind
        with pytest.raises(dataclasses.FrozenInstanceError):  # a record read is a record kept
            back.reference_step = 2  # type: ignore[misc]
    kinds = [CaseRecord(k).kind for k in KEYS]
    assert kinds == [CaseKind.DELTA, CaseKind.TREND, CaseKind.CONTROL, CaseKind.INVARIANCE, CaseKind.SEARCH]


def test_a_first_detection_step_is_a_number_or_none() -> None:
    trend = TrendKey("piqe", "alpha")
    step = Field.FIRST_DETECTION_STEP
    assert CaseRecord(trend, 1, {step: "7"}).step_number(step) == 7
    assert CaseRecord(trend, 1, {step: "none"}).step_number(step) is None
    assert CaseRecord(trend, 1, {step: ""}).step_number(step) is None
    assert CaseRecord(trend, 1).step_number(step) is None


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"banana_record": "snapshot/2", "metric": "piqe"}, "unknown kind 'snapshot'"),
        ({"banana_record": "delta/2", "metric": "piqe", "step": "5"}, "without its 'seed_image' property"),
        ({"banana_record": "control/2"}, "without its 'metric' property"),
        (
            {"banana_record": "delta/2", "metric": "p", "seed_image": "a", "step": "five"},
            "malformed property",
        ),
        ({"banana_record": "invariance/2", "metric": "p", "invariance": "shift", "change": "x"}, "'change'"),
        ({"banana_record": "delta/2", "metric": "p", "seed_image": "a", "step": "5", "delta": "x"}, "figure"),
    ],
)
def test_a_record_it_cannot_use_is_one_record_error(props: dict[str, str], says: str) -> None:
    with pytest.raises(RecordError, match=re.escape(says)) as info:
        CaseRecord.read(props)
    assert info.value.__cause__ is None  # the one line says it all: no chained traceback
