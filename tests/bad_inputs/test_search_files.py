"""The search folder's files as bad input (issue 50): one row each, in a real pytest run.

A replay file (`.banana_cache/search/replay/<metric>.json`, the worst escape a run wrote) is data:
one the search could not have written is not replayed, with one SearchFileWarning naming the file
and the field, and that metric's search runs as a run without the file does. A search folder that
refuses the PNG pair and the replay file warns once, naming it, and the verdict stands. Each run
holds two cheap numpy metrics (tests/known_metrics.py) with their Δ cases, and the search of one
(`--search=1`, about 3 s here): the other metric's verdicts, and every planned case in the JUnit
file, are checked too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from banana_tests.cases import id_of_testcase
from banana_tests.reports.merge_checks import PLANNED
from tests.bad_inputs.test_cache_images import read_only_folder
from tests.conftest import SUITE_MODULE, suite_folder, write_set
from tests.known_metrics import install_known_metrics

pytestmark = pytest.mark.slow  # each test runs pytest in a child process: the slow tier

SEARCH_MODULE = (
    "from banana_tests.families.search.test_search import banana_search, test_no_worst_escape  # noqa: F401\n"
)
METRICS = ("noise_level", "noise_level_reversed")
BAD = "noise_level"  # the metric searched, whose file is bad; noise_level_reversed's verdicts must not change
SET = {"seeds": ("alpha",), "runs": (0,), "steps": (1, 5)}


def options() -> list[str]:
    metrics = ",".join(f"known_metrics:{m}" for m in METRICS)
    only_one = "not (test_no_worst_escape and noise_level_reversed)"
    return [
        "--dataset=data",
        f"--metric={metrics}",
        "--steps=5",
        "--search=1",
        "-k",
        only_one,
        "--junitxml=j.xml",
    ]


def replay_of(root: Path, metric: str = BAD) -> Path:
    return root / ".banana_cache" / "search" / "replay" / f"{metric}.json"


def cases(path: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """Each testcase by name: its outcome and its properties (a search's time and PNG paths left
    out: they differ from run to run)."""
    out = {}
    for case in ET.parse(path).iter("testcase"):
        kid = next((c.tag for c in case if c.tag in ("failure", "error", "skipped")), "passed")
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        kept = {k: v for k, v in props.items() if k not in ("search_seconds", "clean_png", "degraded_png")}
        out[str(case.get("name"))] = (kid, kept)
    return out


def all_planned_ran(path: Path) -> bool:
    """Every case the run planned has its testcase in the JUnit file."""
    root = ET.parse(path).getroot()
    planned = {
        line
        for p in root.iter("property")
        if p.get("name") == PLANNED
        for line in (p.get("value") or "").splitlines()
    }
    ran = {id_of_testcase(c.get("classname", ""), c.get("name", "")) for c in root.iter("testcase")}
    return bool(planned) and planned <= ran


@pytest.fixture(scope="module")
def untouched_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a run without any search file, which wrote its example database."""
    root = tmp_path_factory.mktemp("untouched")
    write_set(root / "data", **SET)  # type: ignore[arg-type]
    (root / "test_suite.py").write_text(SUITE_MODULE + SEARCH_MODULE)
    install_known_metrics(root)
    env = {k: v for k, v in os.environ.items() if k not in ("BANANA_WEIGHTS_DIR", "PYTEST_ADDOPTS", "CI")}
    env |= {
        "HF_HUB_OFFLINE": "1",
        "TORCH_HOME": str(root / "torch"),
        "PYTEST_ADDOPTS": "-p no:randomly",  # as tests.conftest's pytester
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *options()],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return root


@pytest.fixture(scope="module")
def untouched(untouched_run: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """The JUnit cases of a run without any search file: what each bad-file run must give."""
    return cases(untouched_run / "j.xml")


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    suite_folder(pytester, monkeypatch, module=SUITE_MODULE + SEARCH_MODULE, **SET)
    install_known_metrics(pytester.path)
    return pytester


GOOD: dict[str, Any] = {
    "crop": {"seed_image": "astronaut", "top": 32, "left": 91, "height": 250, "width": 256},
    "degradation": {
        "steps": 17,
        "soften_sigma": 0.5803,
        "resynthesis_share": 0.0131,
        "tint_rate": 0.0,
        "static_amplitude": 7.6975,
        "static_chroma": 1.9649,
        "scatter_density": 0.0002,
        "seed": 437,
    },
}
"""A replay file as the search writes one (PIQE's escape of docs/trial.md)."""


def changed(part: str, field: str, value: Any) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        known = json.loads(json.dumps(GOOD))
        known[part][field] = value
        path.write_text(json.dumps(known))

    return write


def dropped(part: str, field: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        known = json.loads(json.dumps(GOOD))
        del known[part][field]
        path.write_text(json.dumps(known))

    return write


def raw(data: bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(data)

    return write


def fifo(path: Path) -> None:
    os.mkfifo(path)


def device(path: Path) -> None:
    path.symlink_to("/dev/zero")


@dataclass(frozen=True)
class Row:
    write: Callable[[Path], None]
    says: str  # what the warning says after `not replayed: `


ROWS = {
    "out-of-range": Row(
        changed("degradation", "soften_sigma", -5.0),
        "degradation.soften_sigma = -5.0 is outside the search's range [0, 0.74]",
    ),
    "a billion steps": Row(
        changed("degradation", "steps", 1_000_000_000),
        "degradation.steps = 1000000000 is outside the search's range [1, 20]",
    ),
    "a bool for steps": Row(
        changed("degradation", "steps", True), "degradation.steps = True is not an integer"
    ),
    "NaN": Row(
        changed("degradation", "static_amplitude", float("nan")),
        "degradation.static_amplitude = nan is outside the search's range [0, 12]",
    ),
    "a field missing": Row(dropped("degradation", "seed"), "degradation.seed is missing"),
    "an unknown field": Row(
        changed("degradation", "gamma", 2.2), "degradation.gamma is not a parameter of the search"
    ),
    "a path for a seed image": Row(
        changed("crop", "seed_image", "../../etc/passwd"),
        "crop.seed_image = '../../etc/passwd' is not one of the seed images ['astronaut', ",
    ),
    "a box outside its image": Row(
        changed("crop", "top", 9999), "crop.top = 9999 is outside the search's range [0, 134]"
    ),
    "not JSON": Row(raw(b"\x89PNG\r\n\x1a\n"), "not JSON ("),
    "nested too deep": Row(raw(b"[" * 60_000), "not JSON ("),
    "not an object": Row(raw(b"[1, 2]"), "the file holds list, not an object"),
    "too large": Row(
        raw(json.dumps(GOOD).encode() + b" " * 70_000),
        f"{len(json.dumps(GOOD).encode()) + 70_000:,} bytes, over the 65,536-byte limit",
    ),
    "a FIFO": Row(fifo, "not a regular file but a FIFO"),
    "a device": Row(device, "not a regular file but a character device"),
}


def warning_lines(result: pytest.RunResult) -> list[str]:
    return [line for line in result.outlines if "SearchFileWarning: " in line]


def assert_nothing_else_lost(
    result: pytest.RunResult, root: Path, untouched: dict[str, tuple[str, dict[str, str]]]
) -> None:
    """Exit 1 (each metric misses), one warning, every planned case run, each as without the file."""
    assert result.ret == 1, result.stdout.str()
    assert result.parseoutcomes().get("warnings") == 1, result.parseoutcomes()
    assert all_planned_ran(root / "j.xml")
    assert cases(root / "j.xml") == untouched


@pytest.mark.parametrize("row", ROWS.values(), ids=ROWS.keys())
def test_a_bad_replay_file_is_ignored_with_one_warning(
    suite: pytest.Pytester, untouched: dict[str, tuple[str, dict[str, str]]], row: Row
) -> None:
    path = replay_of(suite.path)
    path.parent.mkdir(parents=True)
    row.write(path)

    result = suite.runpytest_subprocess(*options(), "--timeout=120")

    [line] = warning_lines(result)
    assert f"SearchFileWarning: replay file {path} not replayed: {row.says}" in line, line
    assert line.endswith("; the search runs without it (its next escape replaces the file)"), line
    assert_nothing_else_lost(result, suite.path, untouched)


def test_a_bad_replay_file_under_xdist_warns_once_from_its_worker(
    suite: pytest.Pytester, untouched: dict[str, tuple[str, dict[str, str]]]
) -> None:
    path = replay_of(suite.path)
    path.parent.mkdir(parents=True)
    ROWS["a billion steps"].write(path)

    result = suite.runpytest_subprocess(*options(), "-n", "2", "--timeout=120")

    [line] = warning_lines(result)
    assert f"replay file {path} not replayed: {ROWS['a billion steps'].says}" in line
    assert_nothing_else_lost(result, suite.path, untouched)
    assert json.loads(path.read_text())["degradation"]["steps"] <= 20  # its escape replaced the file


def too_large(path: Path) -> None:
    with path.open("wb") as sparse:
        sparse.truncate(1024 * 1024)


DATABASE_ROWS = {
    "a FIFO": (fifo, "not a regular file but a FIFO (named pipe)", []),
    "a FIFO, -n 2": (fifo, "not a regular file but a FIFO (named pipe)", ["-n", "2"]),
    "a device": (device, "not a regular file but a character device", []),
    "too large": (too_large, "1,048,576 bytes, over the 65,536-byte limit", []),
}


@pytest.mark.parametrize(("spoil", "says", "workers"), DATABASE_ROWS.values(), ids=DATABASE_ROWS.keys())
def test_a_bad_example_database_entry_is_not_read_and_warns_once(
    suite: pytest.Pytester,
    untouched_run: Path,
    untouched: dict[str, tuple[str, dict[str, str]]],
    spoil: Callable[[Path], None],
    says: str,
    workers: list[str],
) -> None:
    """hypothesis reads every file of the test's database folder whole: a FIFO there blocked the
    search until --timeout. The database a run wrote, with one bad entry in each of its folders,
    is not used: one warning naming the entry, and the search runs as without it."""
    source = untouched_run / ".banana_cache" / "search" / "hypothesis"
    shutil.copytree(source, suite.path / ".banana_cache" / "search" / "hypothesis", symlinks=True)
    database = suite.path / ".banana_cache" / "search" / "hypothesis" / BAD
    keys = sorted(p for p in database.iterdir() if p.is_dir())
    assert keys, "the run without search files wrote no example database"
    for key in keys:
        spoil(key / "bad")

    result = suite.runpytest_subprocess(*options(), *workers, "--timeout=120")

    [line] = warning_lines(result)
    assert (
        f"SearchFileWarning: example database {database} not used: {keys[0] / 'bad'}: {says}; "
        "the search runs without it"
    ) in line, line
    assert_nothing_else_lost(result, suite.path, untouched)


def folder_is_a_file(root: Path) -> str:
    (root / ".banana_cache" / "search").write_text("")
    return "Not a directory: "


def folder_read_only(root: Path) -> str:
    (root / ".banana_cache" / "search").symlink_to(read_only_folder(root), target_is_directory=True)
    return ""  # Permission denied, or Operation not permitted (/sys, as root)


FOLDER_ROWS = {
    "a file": (folder_is_a_file, []),
    "read-only": (folder_read_only, []),
    "read-only, -n 2": (folder_read_only, ["-n", "2"]),
}


@pytest.mark.parametrize(("spoil", "workers"), FOLDER_ROWS.values(), ids=FOLDER_ROWS.keys())
def test_an_unwritable_search_folder_warns_once_and_keeps_the_verdicts(
    suite: pytest.Pytester,
    untouched: dict[str, tuple[str, dict[str, str]]],
    spoil: Callable[[Path], str],
    workers: list[str],
) -> None:
    (suite.path / ".banana_cache").mkdir()
    says = spoil(suite.path)

    result = suite.runpytest_subprocess(*options(), *workers, "--timeout=120")

    assert result.ret == 1, result.stdout.str()
    [line] = warning_lines(result)  # the search lost its pair and its replay file: one warning
    folder = suite.path / ".banana_cache" / "search"
    assert f"SearchFileWarning: search folder {folder} cannot be written ({says}" in line, line
    assert line.endswith(f"); {BAD}'s verdict stands, without its PNG pair and replay file"), line
    assert result.parseoutcomes().get("warnings") == 1
    assert all_planned_ran(suite.path / "j.xml")
    assert cases(suite.path / "j.xml") == untouched
    [missed] = [x for x in result.outlines if x.startswith(f"{BAD} scores a plainly degraded image")]
    assert "; PNG pair not written; shrunk to " in missed, missed
    assert "nothing scored" not in result.stdout.str()
    shutil.rmtree(suite.path / ".banana_cache", ignore_errors=True)
