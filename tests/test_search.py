"""The worst-escape search (banana_tests/test_search.py) end to end, in real pytest runs: PIQE's
escape found within the documented budget, its PNG pair scored again directly, replayed from the
cache at once by the next run; a metric built to see every degradation reports none found, the
same for a given --hypothesis-seed; pytest-timeout stops a search; `-n 2` puts two metrics'
searches on two workers; the default run collects no search."""

from __future__ import annotations

import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from banana_tests.cases import Field
from banana_tests.cli import main
from banana_tests.scoring.oracle import change
from metrics_under_test.pyiqa_backend import PyiqaMetric
from metrics_under_test.registry import lookup
from tests.conftest import assert_outcomes, suite_folder

SEARCH_MODULE = (
    "from banana_tests.families.search.test_search import banana_search, test_no_worst_escape  # noqa: F401\n"
)
PIQE_BUDGET = 20
"""docs/trial.md's budget for PIQE: `--search=20` finds its escape (measured: the 5th example)."""

METRICS = """
import time

import numpy as np
from PIL import Image

from banana_tests.data import SEEDS

SEEDS_RGB = [np.asarray(Image.open(p).convert("RGB")) for p in sorted(SEEDS.glob("*.png"))]


def is_clean_crop(img):
    '''Whether `img` is, pixel for pixel, a crop of a clean seed image.'''
    h, w = img.shape[:2]
    first = img[0].tobytes()
    for seed in SEEDS_RGB:
        for top in range(seed.shape[0] - h + 1):
            row = seed[top].tobytes()
            at = row.find(first)
            while at >= 0:
                if at % 3 == 0 and np.array_equal(seed[top : top + h, at // 3 : at // 3 + w], img):
                    return True
                at = row.find(first, at + 1)
    return False


class CleanCrop:
    '''Built to see every degradation: 1 for an untouched crop of a seed image, else 0.'''

    name = "clean_crop"
    lower_better = False
    score_range = (0.0, 1.0)
    cost = "fast"

    def __call__(self, images):
        return [1.0 if is_clean_crop(img) else 0.0 for img in images]


class SlowCleanCrop(CleanCrop):
    '''The same, a second a call: a search of many examples outlasts any short timeout.'''

    name = "slow_clean_crop"

    def __call__(self, images):
        time.sleep(1.0)
        return super().__call__(images)
"""


@pytest.fixture
def users(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project with the search module and its own metrics."""
    suite_folder(pytester, monkeypatch, module=SEARCH_MODULE, seeds=("alpha",), runs=(0,), steps=(1, 5))
    pytester.makepyfile(usermetrics=METRICS)
    return pytester


def run(pytester: pytest.Pytester, *options: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("--junitxml=j.xml", "-p", "no:randomly", "-rA", *options)


def properties(path: Path) -> dict[str, dict[str, str]]:
    """Each testcase's properties, by its name."""
    return {
        case.get("name", ""): {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        for case in ET.parse(path).iter("testcase")
    }


def drawn(found: dict[str, str]) -> dict[str, str]:
    """A search's record but its time, its PNGs by name (under --no-cache: in pytest's tmp folder)."""
    pngs = {k: Path(found[k]).name for k in ("clean_png", "degraded_png")}
    return {k: v for k, v in found.items() if k != "search_seconds"} | pngs


@pytest.mark.slow
def test_piqe_escapes_within_the_budget_and_the_next_run_replays_it(users: pytest.Pytester) -> None:
    started = time.perf_counter()
    first = run(users, "--metric=piqe", f"--search={PIQE_BUDGET}")
    first_s = time.perf_counter() - started
    assert_outcomes(first, missed=1)
    line = next(x for x in first.outlines if x.startswith("piqe scores a plainly degraded image"))
    found = properties(users.path / "j.xml")["test_no_worst_escape[piqe]"]
    assert found["banana_record"] == "search/2" and found["escaped"] == "true"
    clean_png, escaped_png = Path(found["clean_png"]), Path(found["degraded_png"])
    assert f"pair (clean, escaped): {clean_png} {escaped_png}" in line
    assert clean_png.is_relative_to(users.path / ".banana_cache" / "search")
    clean, escaped = (np.asarray(Image.open(p).convert("RGB")) for p in (clean_png, escaped_png))
    spec = lookup("piqe")
    again = [spec.scale.normalise(s) for s in PyiqaMetric(spec, "cpu")([clean, escaped])]
    assert again == pytest.approx([float(found["norm_reference"]), float(found["norm_step"])], abs=1e-6)
    assert again[1] >= again[0]
    moved = change(clean, escaped)
    assert moved.psnr == pytest.approx(float(found["psnr"])) and moved.psnr < 30.0
    assert f"PSNR {moved.psnr:.2f} dB, SSIM {moved.ssim:.3f}" in line
    assert f"normalised {again[1]:.2f} (clean {again[0]:.2f})" in line
    assert found["degradation"] in line  # the crop and every drawn parameter

    started = time.perf_counter()
    second = run(users, "--metric=piqe", f"--search={PIQE_BUDGET}")
    second_s = time.perf_counter() - started
    assert_outcomes(second, missed=1)
    replayed = properties(users.path / "j.xml")["test_no_worst_escape[piqe]"]
    assert replayed["examples"] == "1" and replayed["degradation"] == found["degradation"]
    assert float(replayed["search_seconds"]) < float(found["search_seconds"]) / 3
    assert second_s < first_s, (first_s, second_s)  # each run also starts pytest and loads PIQE

    out = users.path / "report"
    assert main(["report", str(users.path / "j.xml"), f"--out={out}"]) == 0
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## Worst escape" in summary and "| piqe | failed | escape | 1 |" in summary
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h2>Worst escape</h2>" in page and page.count("data:image/png;base64,") >= 2


@pytest.mark.slow
def test_a_metric_that_sees_every_degradation_reports_none_found(users: pytest.Pytester) -> None:
    """Also: the same draws for the same --hypothesis-seed, without a cache to replay from."""
    options = ("--metric=usermetrics:CleanCrop", "--search=12", "--no-cache", "--hypothesis-seed=7")
    result = run(users, *options)
    assert_outcomes(result, passed=1)
    seen = properties(users.path / "j.xml")["test_no_worst_escape[clean_crop]"]
    assert seen["escaped"] == "false" and int(seen["examples"]) == 24  # N look, N more find none
    assert float(seen["norm_step"]) < float(seen["norm_reference"]) and float(seen["psnr"]) < 30.0
    said = "clean_crop: none found in 24 examples; the most degraded detected at PSNR"
    assert said in result.stdout.str()
    assert not (users.path / ".banana_cache").exists()
    assert_outcomes(run(users, *options), passed=1)
    again = properties(users.path / "j.xml")["test_no_worst_escape[clean_crop]"]
    assert drawn(again) == drawn(seen)
    out = users.path / "report"
    assert main(["report", str(users.path / "j.xml"), f"--out={out}"]) == 0
    assert "| clean_crop | passed | none found in 24 examples |" in (out / "summary.md").read_text("utf-8")


@pytest.mark.slow
def test_pytest_timeout_stops_the_search(users: pytest.Pytester) -> None:
    """hypothesis takes pytest-timeout's Failed for a failing example and would run the next one."""
    started = time.perf_counter()
    result = run(users, "--metric=usermetrics:SlowCleanCrop", "--search=100", "--timeout=3", "--no-cache")
    assert time.perf_counter() - started < 60
    assert_outcomes(result, errors=1)  # a hung metric is an error, not a failed search
    # the metric stopped in a batch is hung for the run: one line naming it, the phase and the stop
    [line] = [x for x in result.outlines if x.startswith("metric 'slow_clean_crop' hung in its batch")]
    assert "Timeout (>3.0s) from pytest-timeout" in line


@pytest.mark.slow
def test_two_metrics_search_on_two_workers(users: pytest.Pytester) -> None:
    metrics = "--metric=usermetrics:CleanCrop,usermetrics:SlowCleanCrop"
    result = run(users, metrics, "--search=3", "-n", "2", "-v", "--no-cache")
    assert_outcomes(result, passed=2)
    workers = re.findall(r"\[(gw\d)\].*test_no_worst_escape\[(\w+)\]", result.stdout.str())
    assert {metric for _, metric in workers} == {"clean_crop", "slow_clean_crop"}
    assert len({worker for worker, _ in workers}) == 2, workers


@pytest.mark.slow
def test_without_search_the_default_run_collects_no_search(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    collect = ("--pyargs", "banana_tests", "--collect-only", "-q", "-p", "no:randomly")
    default = pytester.runpytest_subprocess(*collect)
    searched = pytester.runpytest_subprocess(*collect, "--search=5")
    assert "test_no_worst_escape" not in default.stdout.str()
    searches = [x for x in searched.outlines if "test_no_worst_escape[" in x]
    assert [x.rsplit("[", 1)[1] for x in searches] == ["brisque]", "niqe]", "piqe]"]
    extra = set(searched.outlines) - set(default.outlines)
    assert set(searches) <= extra
    assert all("test_no_worst_escape" in x or "tests collected" in x for x in extra), extra


def test_a_search_record_reads_back_and_its_failure_is_a_baseline_entry(tmp_path: Path) -> None:
    from banana_tests.families.search import SearchKey, SearchLog, Seen
    from banana_tests.verdicts.baseline import dump_baseline, load_baseline
    from banana_tests.verdicts.record import CaseRecord, figure_properties

    log = SearchLog()
    for psnr, degraded in ((25.0, 61.0), (12.0, 59.0), (18.0, 60.0), (40.0, 70.0), (10.0, float("nan"))):
        log.add(Seen("crop", "steps=3", psnr, 0.5, 60.0, degraded))
    assert log.examples == 5 and log.escape is not None and log.escape.psnr == 18.0  # 40 dB is no escape
    assert log.most_degraded_detected is not None and log.most_degraded_detected.psnr == 12.0
    key = SearchKey("piqe")
    props = dict([*CaseRecord(key).identity(), *figure_properties(log.properties())])
    record = CaseRecord.read(props)
    assert record is not None and record.key == key and record.number(Field.PSNR) == 18.0
    assert record.figures[Field.ESCAPED] == "true" and record.figures[Field.EXAMPLES] == "5"
    dump_baseline([key], tmp_path / "b.json")
    assert '{"kind": "search", "metric": "piqe"}' in (tmp_path / "b.json").read_text()
    assert load_baseline(tmp_path / "b.json") == frozenset({key})


def test_the_objective_prefers_a_worse_escape_and_pulls_detected_images_towards_escaping() -> None:
    from banana_tests.families.search import Seen

    def objective(psnr: float, degraded: float) -> float:
        return Seen("crop", "steps=1", psnr, 0.5, 60.0, degraded).objective

    assert objective(15.0, 61.0) > objective(20.0, 61.0)  # more degraded, still escaping
    assert objective(20.0, 59.0) > objective(20.0, 50.0)  # closer to escaping
    assert objective(float("inf"), 60.0) == -100.0 and objective(20.0, float("nan")) == -1e9


def test_every_drawn_example_reads_back_from_a_replay_file() -> None:
    """The replay file's checks (issue 50) refuse nothing the search draws, 4-decimal rounding at
    the ends of the ranges included, and give back the example itself."""
    import json
    from dataclasses import asdict

    from hypothesis import given

    from banana_tests.distortions import Crop
    from banana_tests.editors.degradation import Degradation, degradations
    from banana_tests.families.search.test_search import crop_from_data, crops

    @given(crop=crops(), degradation=degradations())
    def reads_back(crop: Crop, degradation: Degradation) -> None:
        known = json.loads(json.dumps({"crop": asdict(crop), "degradation": asdict(degradation)}))
        assert crop_from_data(known["crop"]) == crop
        assert Degradation.from_data(known["degradation"]) == degradation

    reads_back()


LITERALS = "WEIGHTS = [{}]\n".format(", ".join(f"{i / 97:.4f}, {i}" for i in range(1, 400)))
"""A user's module full of numbers inside the search's ranges, as any conftest or metric has some."""


def test_the_search_draws_the_same_examples_whatever_modules_are_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hypothesis draws the literals of loaded modules outside site-packages into its examples; the
    search must not (its seed gives one escape from a wheel, a checkout or beside a conftest)."""
    from typing import cast

    from banana_tests.families.search import SearchLog, Seen
    from banana_tests.families.search.test_search import Search, search
    from banana_tests.session.scorer import Scorer

    class Blind:
        """Rates every clean crop 1 and every degraded one 0: no escape, all 2N examples drawn."""

        name = "blind"

        def normalise(self, score: float) -> float:
            return score

        def scores(self, images: list[object]) -> list[float]:
            return [1.0, 0.0]

    class Everything(SearchLog):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        def add(self, seen: Seen) -> None:
            super().add(seen)
            self.seen.append(f"{seen.crop!r} {seen.degradation!r}")

    def drawn() -> list[str]:
        log = Everything()
        search(cast(Scorer, Blind()), Search(15, 7, tmp_path / "search", kept=False), log)
        return log.seen

    before = drawn()
    (tmp_path / "user_literals.py").write_text(LITERALS)
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("user_literals")
    try:
        after = drawn()
    finally:
        del sys.modules["user_literals"]

    assert len(before) == 30 and after == before
