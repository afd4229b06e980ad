"""The scheduler's groups: a metric's Δ cases and trends a seed image at a time, its other tests
together, tests on no metric alone (banana_tests.scheduler.metric_groups)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from banana_tests.cases import CaseKey
from banana_tests.families.trend import TrendKey
from banana_tests.scheduler.metric_groups import group_of, units_of
from banana_tests.scheduler.sharding import Group

PROJECT = Path(__file__).resolve().parent.parent
METRICS = ("brisque", "clip-iqa", "clip")
SUITE = "banana_tests/families/degradation/test_degradation.py::test_detects_degradation"


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        (f"{SUITE}[brisque-astronaut-step5]", Group("brisque", "astronaut")),
        (f"{SUITE}[brisque-astronaut-run1-step5]", Group("brisque", "astronaut")),  # --aggregate=per-run
        (f"{SUITE}[clip-iqa-brick-step10]", Group("clip-iqa", "brick")),  # the longest metric name wins
        (f"{SUITE}[clip-brick-step10]", Group("clip", "brick")),
        (
            "banana_tests/test_trend.py::test_trend_detects_degradation[brisque-astronaut]",
            Group("brisque", "astronaut"),
        ),
        (
            "banana_tests/families/control/test_control.py::test_detects_control_degradation[brisque-jpeg]",
            Group("brisque"),
        ),
        (
            "banana_tests/families/snapshot/test_snapshots.py::test_scores_match_snapshot[brisque]",
            Group("brisque"),
        ),
        ("test_own.py::test_scores[brisque-5]", Group("brisque")),  # a test on banana_metric
        ("test_own.py::test_scores[brisque-step5]", Group("brisque")),  # no seed image in it
        ("test_own.py::test_other[niqe-astronaut-step5]", None),  # a metric not selected
        ("test_own.py::test_plain", None),
    ],
)
def test_group_of_a_test(nodeid: str, expected: Group | None) -> None:
    planned = [CaseKey("brisque", "astronaut", 5), CaseKey("brisque", "astronaut", 5, run=1)]
    planned += [
        CaseKey("clip-iqa", "brick", 10),
        CaseKey("clip", "brick", 10),
        TrendKey("brisque", "astronaut"),
    ]
    assert group_of(nodeid, METRICS, units_of(planned)) == expected


def test_a_planned_case_is_grouped_by_its_key_not_by_its_id() -> None:
    """A seed image named like an id's suffix (`scan-run1`): its id reads as run 1 of `scan`, its
    key says what it is."""
    key = CaseKey("brisque", "scan-run1", 5)
    assert group_of(f"{SUITE}[{key.test_id}]", METRICS, units_of([key])) == Group("brisque", "scan-run1")
    trend = TrendKey("clip", "iqa-brick")  # reads as a clip-iqa test
    assert group_of(f"t.py::test_trend[{trend.test_id}]", METRICS, units_of([trend])) == Group(
        "clip", "iqa-brick"
    )


def test_a_seed_images_group_is_its_own_scope() -> None:
    assert Group("brisque", "astronaut").scope != Group("brisque").scope != Group("niqe").scope


PROBE = """
import json
from pathlib import Path

from banana_tests.plugin import planned_keys
from banana_tests.scheduler.metric_groups import group_of, units_of
from banana_tests.session.collection import unit_of
from banana_tests.session.ownership import adopted

METRICS = {metrics!r}


def pytest_collection_finish(session):
    units = units_of(planned_keys(session.config, adopted(session.config)))
    rows = [
        [i.nodeid, repr(unit_of(i, METRICS)), repr(group_of(i.nodeid, METRICS, units))] for i in session.items
    ]
    Path({out!r}).write_text(json.dumps(rows))
"""


@pytest.mark.slow
@pytest.mark.parametrize("aggregate", ["mean", "per-run"])
def test_shards_deal_by_the_typed_keys_the_units_the_scheduler_reads_off_the_ids(
    tmp_path: Path, aggregate: str
) -> None:
    """`--shard` reads each test's unit off its typed parameters, the xdist controller (node ids
    only) off its id: on every test of the suite, and a user's test on `banana_metric`, the two
    agree, so a shard holds whole scheduler units and the dealing is the one the ids gave."""
    metrics = ("brisque", "niqe", "piqe")
    (tmp_path / "shard_probe.py").write_text(PROBE.format(metrics=metrics, out=str(tmp_path / "units.json")))
    own = tmp_path / "test_own.py"
    own.write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('x', [1, 2])\ndef test_own(banana_metric, x):\n    pass\n\n"
        "def test_plain():\n    pass\n"
    )
    cmd = [sys.executable, "-m", "pytest", "banana_tests", str(own), "--collect-only", "-p", "shard_probe"]
    cmd += ["-p", "no:cacheprovider", "--trend", f"--metric={','.join(metrics)}", f"--aggregate={aggregate}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PROJECT)]), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "units.json").read_text())
    units = {unit for _, unit, _ in rows}
    assert {"None", "Group(metric='piqe', seed_image=None)"} < units and len(units) > 5
    assert any("test_own[" in nodeid and unit != "None" for nodeid, unit, _ in rows)
    assert any("-run" in nodeid for nodeid, _, _ in rows) == (aggregate == "per-run")
    assert [row for row in rows if row[1] != row[2]] == []
