"""`--trend` cases in the report: their series round-trip through JUnit into trend_<seed>.png, and
every case records the data set and package versions for the report's Run table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana_tests.cli import main
from banana_tests.core.machine import package_versions
from banana_tests.families.trend import Trend, TrendKey
from banana_tests.families.trend.trends import TrendSeries
from banana_tests.reports.junit import JUnitError, read_junit
from banana_tests.reports.junit_testcase import RUN_PROPERTIES
from banana_tests.verdicts.record import CaseRecord
from tests.conftest import write_set

PROJECT = Path(__file__).resolve().parent.parent
SEEDS = ("alpha", "beta")
NOISE = "tests.known_metrics:noise_level"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One run with --trend over every step of a tiny set: (data set, JUnit XML). The metric
    reads the injected noise (tests/known_metrics.py), so every Δ and trend case passes."""
    root = tmp_path_factory.mktemp("trend-run")
    data, xml = write_set(root / "set", seeds=SEEDS), root / "junit.xml"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "banana_tests/families/degradation/test_degradation.py",
        "banana_tests/families/trend/test_trend.py",
    ]
    cmd += [
        "-q",
        "-p",
        "no:cacheprovider",
        f"--dataset={data}",
        f"--metric={NOISE}",
        "--trend",
        "--steps=all",
    ]
    cmd += ["--no-cache", f"--junitxml={xml}"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return data, xml


def report(out: Path, *files: Path) -> Path:
    # a run of two suite modules is partial (tests/bad_inputs/test_partial_runs.py)
    assert main(["report", *map(str, files), "--out", str(out), "--allow-incomplete"]) == 0
    return out


def cases(xml: Path) -> list[dict[str, str]]:
    return [
        {p.get("name", ""): p.get("value", "") for p in tc.iter("property")}
        for tc in ET.parse(xml).iter("testcase")
    ]


def test_trend_series_round_trips_through_the_property() -> None:
    t = Trend(
        TrendKey("piqe", "alpha"),
        1,
        ((1, 61.25), (5, 58.5), (10, 40.125)),
        ((1, 60.0, 62.5), (5, 57.0, 60.0), (10, 39.0, 41.25)),
    )
    series = TrendSeries.from_properties(dict(CaseRecord(t.key, 1, t.properties()).properties()))
    assert series.rows == ((1, 61.25, 60.0, 62.5), (5, 58.5, 57.0, 60.0), (10, 40.125, 39.0, 41.25))
    assert series.reference == t.reference == 61.25
    assert (series.metric, series.seed_image) == ("piqe", "alpha")


def test_a_malformed_series_names_the_file(tmp_path: Path) -> None:
    xml = tmp_path / "bad.xml"
    props = {"kind": "trend", "metric": "piqe", "seed_image": "a", "reference_step": "1"}
    props["trend_series"] = "[[1, 2]]"
    body = "".join(f'<property name="{k}" value="{v}"/>' for k, v in props.items())
    xml.write_text(f'<testsuites><testsuite><testcase name="t"><properties>{body}</properties></testcase>'
                   "</testsuite></testsuites>")  # fmt: skip
    with pytest.raises(JUnitError, match=r"bad\.xml: trend testcase 't': trend_series"):
        read_junit([xml])


@pytest.mark.slow
def test_each_trend_case_records_its_series_in_line_with_its_delta_cases(run: tuple[Path, Path]) -> None:
    data, xml = run
    props = cases(xml)
    deltas = {(p["seed_image"], int(p["step"])): p for p in props if "step" in p and "delta" in p}
    trends = [p for p in props if p.get("banana_record") == "trend/2"]
    assert sorted(p["seed_image"] for p in trends) == list(SEEDS)
    assert {p["metric"] for p in props} == {"noise_level"}
    assert [float(p["spearman"]) for p in trends] == [-1.0, -1.0]  # the noise grows at every step
    assert [p["first_detection_step"] for p in trends] == ["5", "5"]
    facts = {p.get("name"): p.get("value") for p in ET.parse(xml).iterfind("testsuite/properties/property")}
    assert (facts["dataset"], facts["versions"]) == (str(data), package_versions())  # once, on the suite
    assert [RUN_PROPERTIES & p.keys() for p in props] == [set()] * len(props)
    for p in trends:
        series = TrendSeries.from_properties(p)
        assert [r[0] for r in series.rows] == [1, 5, 10, 20]
        assert any(low < high for _, _, low, high in series.rows)  # two runs, different noise
        for step, mean, low, high in series.rows:
            assert low <= mean <= high
            if step != 1:
                case = deltas[(series.seed_image, step)]
                assert mean == pytest.approx(float(case["norm_step"]))
                assert series.reference == pytest.approx(float(case["norm_reference"]))


@pytest.mark.slow
def test_the_report_plots_each_seed_and_shows_the_run(run: tuple[Path, Path], tmp_path: Path) -> None:
    data, xml = run
    out = report(tmp_path / "a", xml)
    for seed in SEEDS:
        for ext in ("png", "svg"):
            assert (out / f"trend_{seed}.{ext}").stat().st_size > 0
        with Image.open(out / f"trend_{seed}.png") as im:
            assert im.width > 300 and im.height > 200
            colours = np.unique(np.asarray(im.convert("RGB")).reshape(-1, 3), axis=0)
            assert len(colours) > 50  # lines, band and text, not blank
    html = (out / "report.html").read_text()
    trends = html.split("<h2>Trends</h2>")[1].split("<h2>")[0]
    for seed in SEEDS:  # captioned with the seed image's real name
        assert f'alt="{seed}"' in trends and f"<figcaption>{seed}: trend_{seed}.png" in trends
    assert trends.count("data:image/png;base64,") == len(SEEDS)
    run_table = html.split("<h2>Run</h2>")[1].split("<h2>")[0]
    assert f"<td>{data}</td>" in run_table
    assert f"<td>{package_versions()}</td>" in run_table and "banana-tests " in run_table
    again = report(tmp_path / "b", xml)
    for seed in SEEDS:
        for ext in ("png", "svg"):
            name = f"trend_{seed}.{ext}"
            assert (again / name).read_bytes() == (out / name).read_bytes(), name


@pytest.mark.slow
def test_the_series_is_compact_json(run: tuple[Path, Path]) -> None:
    text = next(p["trend_series"] for p in cases(run[1]) if p.get("banana_record") == "trend/2")
    assert " " not in text and len(json.loads(text)) == 4
