"""`--shard=K/N` and `banana-tests report`'s completeness check, on runs of the whole suite in
fresh processes (as CI jobs run it) with the known metrics on a tiny set."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from banana_tests.api import ScoreRequest, records_to_score, scoring_settings
from banana_tests.cases import CaseKey, id_of_testcase
from banana_tests.reports.junit import read_junit
from banana_tests.reports.merge_checks import INCOMPLETE_EXIT, MIXED_EXIT, PLANNED, SPLIT_OFF, chunks
from banana_tests.scheduler.metric_groups import group_of, units_of
from banana_tests.scheduler.sharding import Group, Shard, parse_shard
from tests.conftest import write_set

PROJECT = Path(__file__).resolve().parent.parent
METRICS = ("noise_level", "noise_level_reversed")
TARGETS = ",".join(f"tests.known_metrics:{m}" for m in METRICS)
DELTA_TESTS = ("::test_detects_degradation[", "::test_trend_detects_degradation[")


def suite_run(
    dataset: Path, xml: Path, *extra: str, status: int | None = 1, cache: Path | None = None
) -> Path:
    """The installed suite's tests in a fresh process, with no score cache; its JUnit XML. By
    default the run misses (noise_level_reversed misses every step); `status` None: a shard that
    may pass or miss. With `cache`, pytest's own cache (--lf) is kept there."""
    cacheprovider = ["-p", "no:cacheprovider"] if cache is None else ["-o", f"cache_dir={cache}"]
    cmd = [sys.executable, "-m", "pytest", "banana_tests", "-q", *cacheprovider]
    cmd += [f"--dataset={dataset}", f"--metric={TARGETS}", f"--junitxml={xml}", "--no-cache", *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in ((0, 1) if status is None else (status,)), done.stdout + done.stderr
    return xml


def report(*args: str | Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "banana_tests.cli", "report", *map(str, args)]
    return subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=300)


def cases_in(xml: Path) -> list[str]:
    return [
        id_of_testcase(tc.get("classname", ""), tc.get("name", "")) for tc in ET.parse(xml).iter("testcase")
    ]


def units_in(xml: Path) -> dict[str, Group]:
    """The scheduler's units of a run's cases, from the typed keys its file reads back to."""
    reading = read_junit([xml])
    return units_of(
        [*reading.matrix.cells, *(c.key for cases in reading.family_cases.values() for c in cases)]
    )


def unit_of_id(nodeid: str, metrics: tuple[str, ...]) -> Group:
    """A Δ or trend test's unit, read off its id as the suite spells it (its seed images have no '-')."""
    test_id = nodeid[nodeid.index("[") + 1 : -1]
    if "::test_trend_detects_degradation[" in nodeid:
        metric = next(m for m in sorted(metrics, key=len, reverse=True) if test_id.startswith(m + "-"))
        return Group(metric, test_id[len(metric) + 1 :])
    key = CaseKey.from_test_id(test_id, metrics)
    return Group(key.metric, key.seed_image)


def failures_in(xml: Path) -> list[str]:
    return [
        id_of_testcase(tc.get("classname", ""), tc.get("name", ""))
        for tc in ET.parse(xml).iter("testcase")
        if tc.find("failure") is not None or tc.find("error") is not None
    ]


def suite_property(xml: Path, name: str) -> list[str]:
    values = [p.get("value", "") for p in ET.parse(xml).iterfind("testsuite/properties/property")
              if p.get("name") == name]  # fmt: skip
    return [line for value in values for line in value.split("\n") if line]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The whole suite unsharded, as shards 1/2 and 2/2, shard 1/2 under `-n 2`, and as three shards."""
    root = tmp_path_factory.mktemp("shards")
    data = write_set(root / "set")
    return {
        "whole": suite_run(data, root / "whole.xml", "-p", "no:randomly"),
        "1/2": suite_run(data, root / "shard1.xml", "-p", "no:randomly", "--shard=1/2"),
        "2/2": suite_run(data, root / "shard2.xml", "-p", "no:randomly", "--banana-shard=2/2"),
        "1/2 -n 2": suite_run(data, root / "shard1-xdist.xml", "-p", "no:randomly", "--shard=1/2", "-n", "2"),
        **{
            f"{k}/3": suite_run(
                data,
                root / f"third{k}.xml",
                "-p",
                "no:randomly",
                f"--shard={k}/3",
                cache=root / "pytest-cache",
            )
            for k in (1, 2, 3)
        },
        # shard 2/3 of other runs: another selection, another data set, the same data elsewhere
        "2/3 --runs=1": suite_run(data, root / "runs1.xml", "-p", "no:randomly", "--shard=2/3", "--runs=1"),
        "2/3 other set": suite_run(
            write_set(root / "other", runs=(0, 1, 2)), root / "other.xml", "-p", "no:randomly", "--shard=2/3"
        ),
        "2/3 copied set": suite_run(
            shutil.copytree(data, root / "copy"), root / "copy.xml", "-p", "no:randomly", "--shard=2/3"
        ),
    }


@pytest.mark.slow
def test_two_shards_run_every_case_exactly_once(runs: dict[str, Path]) -> None:
    first, second, whole = (cases_in(runs[k]) for k in ("1/2", "2/2", "whole"))
    assert Counter(first + second) == Counter(whole)
    assert first and second and not set(first) & set(second)
    # a (metric, seed image) group, or a metric's controls, invariance and snapshots, in one shard
    units = {k: units_in(runs[k]) for k in ("1/2", "2/2")}
    groups = {k: {group_of(case, METRICS, units[k]) for case in cases_in(runs[k])} for k in units}
    assert not groups["1/2"] & groups["2/2"]
    non_delta = [c for c in whole if not any(t in c for t in DELTA_TESTS)]
    for family in (
        "::test_detects_control_degradation[",
        "::test_score_is_invariant[",
        "::test_scores_match",
    ):
        assert any(family in c for c in non_delta), family
    assert all((c in first) != (c in second) for c in non_delta)


@pytest.mark.slow
def test_three_shards_merge_to_the_unsharded_matrix_byte_for_byte(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    thirds = [cases_in(runs[f"{k}/3"]) for k in (1, 2, 3)]
    assert all(thirds) and Counter(c for third in thirds for c in third) == Counter(cases_in(runs["whole"]))
    merged = report(*(runs[f"{k}/3"] for k in (1, 2, 3)), "--out", tmp_path / "merged")
    whole = report(runs["whole"], "--out", tmp_path / "whole")
    assert merged.returncode == 0 == whole.returncode, merged.stderr + whole.stderr
    assert (tmp_path / "merged" / "matrix.csv").read_bytes() == (
        tmp_path / "whole" / "matrix.csv"
    ).read_bytes()


@pytest.mark.slow
def test_each_run_records_its_plan(runs: dict[str, Path]) -> None:
    for key in ("1/2", "2/2", "whole"):
        assert suite_property(runs[key], PLANNED) == cases_in(runs[key]), key
    assert suite_property(runs["whole"], SPLIT_OFF) == []
    assert set(suite_property(runs["1/2"], SPLIT_OFF)) == set(cases_in(runs["2/2"]))
    # under xdist the workers' plan reaches the controller's file: the same split
    assert sorted(suite_property(runs["1/2 -n 2"], PLANNED)) == sorted(suite_property(runs["1/2"], PLANNED))
    assert Counter(cases_in(runs["1/2 -n 2"])) == Counter(cases_in(runs["1/2"]))


@pytest.mark.slow
def test_merged_shards_give_the_unsharded_matrix_and_exit_0(runs: dict[str, Path], tmp_path: Path) -> None:
    merged, whole = (
        report(runs["1/2"], runs["2/2"], "--out", tmp_path / "merged"),
        report(runs["whole"], "--out", tmp_path / "whole"),
    )
    assert merged.returncode == 0 == whole.returncode, merged.stderr + whole.stderr
    assert (tmp_path / "merged" / "matrix.csv").read_bytes() == (
        tmp_path / "whole" / "matrix.csv"
    ).read_bytes()
    assert "in none of the files" not in merged.stderr


@pytest.mark.slow
def test_one_shard_alone_lists_every_missing_case(runs: dict[str, Path], tmp_path: Path) -> None:
    done = report(runs["1/2"], "--out", tmp_path / "out")
    assert done.returncode == INCOMPLETE_EXIT, done.stderr
    missing = cases_in(runs["2/2"])
    assert f"{len(missing)} planned case(s) are in none of the files:" in done.stderr
    listed = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ")]
    assert sorted(listed) == sorted(missing)
    assert "Planned cases missing" in (tmp_path / "out" / "report.html").read_text()
    relaxed = report(runs["1/2"], "--out", tmp_path / "relaxed", "--allow-incomplete")
    assert relaxed.returncode == 0, relaxed.stderr


@pytest.mark.slow
def test_a_case_with_two_outcomes_fails_the_merge(runs: dict[str, Path], tmp_path: Path) -> None:
    """A rerun of shard 1 in which one passing case now fails (written into a copy of its file)."""
    rerun = shutil.copy(runs["1/2"], tmp_path / "rerun.xml")
    tree = ET.parse(rerun)
    case = next(tc for tc in tree.iter("testcase") if not len(tc.findall("failure") + tc.findall("skipped")))
    ET.SubElement(case, "failure", message="AssertionError: now it fails")
    tree.write(rerun)
    done = report(runs["1/2"], rerun, runs["2/2"], "--out", tmp_path / "out")
    assert done.returncode == INCOMPLETE_EXIT, done.stderr
    name = id_of_testcase(case.get("classname", ""), case.get("name", ""))
    assert "1 case(s) have different outcomes:" in done.stderr
    assert f"  {name}: passed in {runs['1/2']}, failed in {rerun}" in done.stderr
    same = report(runs["1/2"], runs["1/2 -n 2"], runs["2/2"], "--out", tmp_path / "same")
    assert same.returncode == 0, same.stderr  # the same outcomes twice: a note
    assert f"{len(cases_in(runs['1/2']))} case(s) ran more than once, with the same outcome" in same.stderr


@pytest.mark.slow
def test_shards_of_other_runs_are_refused_naming_the_files_and_what_differs(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    first, third = runs["1/3"], runs["3/3"]
    both, runs1, other = (
        re.escape(str(p)) for p in (f"{first}, {third}", runs["2/3 --runs=1"], runs["2/3 other set"])
    )
    for key, says in (
        ("2/3 --runs=1", rf"  --runs: all in {both}; 1 in {runs1}\n"),
        (
            "2/3 other set",
            rf"  selected records \(between --shard runs\): \w+ \(16 records\) of --dataset=\S+/set "
            rf"in {both}; \w+ \(24 records\) of --dataset=\S+/other in {other}\n",
        ),
    ):
        out = tmp_path / key.replace(" ", "_").replace("/", "-")
        done = report(first, runs[key], third, "--out", out)
        assert done.returncode == MIXED_EXIT, done.stderr
        assert "these files come from runs that cannot be merged:" in done.stderr
        assert re.search(says, done.stderr), done.stderr
        assert not out.exists()  # refused: nothing written
    # the same records at another path are the same data: they merge, to the same matrix
    copied = report(first, runs["2/3 copied set"], third, "--out", tmp_path / "copied")
    whole = report(runs["whole"], "--out", tmp_path / "whole")
    assert copied.returncode == 0 == whole.returncode, copied.stderr + whole.stderr
    assert (tmp_path / "copied" / "matrix.csv").read_bytes() == (
        tmp_path / "whole" / "matrix.csv"
    ).read_bytes()


@pytest.mark.slow
def test_an_empty_shard_writes_its_plan_exits_0_and_merges(tmp_path: Path) -> None:
    """One seed image: four units (two (metric, seed image) units, each metric's other tests),
    so of five shards the fifth is dealt none, serial or under xdist."""
    data = write_set(tmp_path / "set", seeds=("alpha",))
    whole = suite_run(data, tmp_path / "whole.xml", "-p", "no:randomly")
    empty = suite_run(data, tmp_path / "s5.xml", "-p", "no:randomly", "--shard=5/5", status=0)
    under_xdist = suite_run(data, tmp_path / "x5.xml", "--shard=5/5", "-n", "2", status=0)
    for file in (empty, under_xdist):
        assert cases_in(file) == [] and suite_property(file, PLANNED) == []
        assert sorted(suite_property(file, SPLIT_OFF)) == sorted(cases_in(whole))
    done = report(whole, empty, under_xdist, "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    alone = report(empty, "--out", tmp_path / "alone")  # every case it left to the others is missing
    assert alone.returncode == INCOMPLETE_EXIT, alone.stderr
    assert f"{len(cases_in(whole))} planned case(s) are in none of the files:" in alone.stderr


@pytest.mark.slow
def test_lf_reruns_exactly_each_shards_failures_and_k_narrows_after_dealing(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """The three shards kept one pytest cache, so `--lf` knows all their failures; before, it
    narrowed the collection first and the shards were dealt out of what was left."""
    first = {k: runs[f"{k}/3"] for k in (1, 2, 3)}
    data, cache = Path(suite_property(first[1], "dataset")[0]), first[1].parent / "pytest-cache"
    failed = {k: sorted(failures_in(xml)) for k, xml in first.items()}
    assert all(failed.values()), failed
    for k in (1, 2, 3):
        rerun = suite_run(
            data, tmp_path / f"r{k}.xml", "-p", "no:randomly", f"--shard={k}/3", "--lf", cache=cache
        )
        assert sorted(cases_in(rerun)) == failed[k], k
    reruns = report(*(tmp_path / f"r{k}.xml" for k in (1, 2, 3)), "--out", tmp_path / "out")
    assert reruns.returncode == INCOMPLETE_EXIT, reruns.stderr  # the reruns alone: partial, never complete
    passed = {c for xml in first.values() for c in cases_in(xml)} - {c for f in failed.values() for c in f}
    listed = re.search(r"partial: (\d+) case\(s\) left out by --lf are in none of the files:\n((?:  .*\n)*)",
                       reruns.stderr)  # fmt: skip
    assert listed, reruns.stderr
    assert set(listed[2].split()) <= passed and int(listed[1]) == len(listed[2].split()) > 0
    assert "partial, narrowed by --lf" in (tmp_path / "out" / "report.html").read_text()
    with_first = report(
        *first.values(), *(tmp_path / f"r{k}.xml" for k in (1, 2, 3)), "--out", tmp_path / "o2"
    )
    assert with_first.returncode == 0, with_first.stderr  # beside the runs they rerun: complete
    assert "complete: " in (tmp_path / "o2" / "report.html").read_text()
    narrowed = suite_run(
        data, tmp_path / "k.xml", "-p", "no:randomly", "--shard=1/3", "-k", "beta", status=None
    )
    assert cases_in(narrowed) == [case for case in cases_in(first[1]) if "beta" in case]


DESELECTED = (
    "banana_tests/families/control/test_control.py::test_detects_control_degradation[noise_level-jpeg]"
)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_merge_of_narrowed_runs_is_partial_and_names_what_they_left_out(
    runs: dict[str, Path], tmp_path: Path, workers: tuple[str, ...]
) -> None:
    """`-k` and `--deselect` leave cases out: a report of that run alone says partial, lists
    each case left out and exits 3; beside a run that holds them it is complete."""
    data, whole = Path(suite_property(runs["whole"], "dataset")[0]), cases_in(runs["whole"])
    narrowed = suite_run(data, tmp_path / "k.xml", "-p", "no:randomly", "-k", "not beta",
                         f"--deselect={DESELECTED}", *workers, status=None)  # fmt: skip
    ran = cases_in(narrowed)
    left = sorted(set(whole) - set(ran))
    assert sorted(ran) == sorted(suite_property(narrowed, PLANNED)) and left
    assert any("[noise_level-jpeg]" in c for c in left) and all("beta" in c or "jpeg" in c for c in left)
    done = report(narrowed, "--out", tmp_path / "out")
    assert done.returncode == INCOMPLETE_EXIT, done.stderr
    head = f"partial: {len(left)} case(s) left out by -k 'not beta', --deselect are in none of the files:"
    lines = done.stderr.splitlines()
    assert head in lines, done.stderr
    assert [line.strip() for line in lines[lines.index(head) + 1 :][: len(left)]] == left
    page = (tmp_path / "out" / "report.html").read_text()
    assert (
        f"partial, narrowed by -k &#x27;not beta&#x27;, --deselect: {len(ran)} of {len(whole)} cases" in page
    )
    assert report(narrowed, "--out", tmp_path / "allowed", "--allow-incomplete").returncode == 0
    merged = report(runs["whole"], narrowed, "--out", tmp_path / "merged")
    assert merged.returncode == 0 and "partial" not in merged.stderr, merged.stderr


@pytest.mark.slow
def test_score_and_pytest_deal_the_same_units_on_the_embedded_data() -> None:
    """`banana-tests score --shard=K/N` scores the (metric, seed image) units `pytest --shard=K/N`
    runs (with or without --trend), from the same dealing."""
    metrics = ("brisque", "niqe", "piqe")
    for k in (1, 2, 3):
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "banana_tests",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ]
        cmd += ["-p", "no:randomly", f"--shard={k}/3", "--trend", f"--metric={','.join(metrics)}"]
        done = subprocess.run(cmd, cwd=PROJECT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        ran = {
            unit_of_id(line, metrics)
            for line in done.stdout.splitlines()
            if any(t in line for t in DELTA_TESTS)
        }
        scored = records_to_score(
            scoring_settings(ScoreRequest(metrics=metrics, shard=Shard(k, 3), root=PROJECT))
        )
        assert ran and {(g.metric, g.seed_image) for g in ran} == set(scored), k


@pytest.mark.slow
def test_pytest_split_with_random_order_is_complete_or_says_what_is_not(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """pytest-split's groups, each job in its own random order (pytest-randomly's seed): its
    groups then need not add up. The report lists exactly the cases no group ran."""
    dataset = Path(suite_property(runs["whole"], "dataset")[0])
    groups = [
        suite_run(
            dataset,
            tmp_path / f"group{g}.xml",
            "-p",
            "randomly",
            f"--randomly-seed={seed}",
            "--splits=2",
            f"--group={g}",
        )
        for g, seed in ((1, 7), (2, 14))
    ]
    ran = Counter(case for g in groups for case in cases_in(g))
    missing = sorted(set(cases_in(runs["whole"])) - ran.keys())
    twice = sorted(case for case, n in ran.items() if n > 1)
    assert missing, "these seeds split the run into groups that do not add up"
    done = report(*groups, "--out", tmp_path / "out")
    assert done.returncode == INCOMPLETE_EXIT, done.stderr
    listed = [line.strip() for line in done.stderr.splitlines() if line.startswith("  ") and "::" in line]
    assert sorted(listed) == missing
    assert f"{len(twice)} case(s) ran more than once, with the same outcome each time" in done.stderr


def test_shards_deal_out_sorted_groups_in_turn() -> None:
    units = [Group("m", seed) for seed in "dcba"] + [Group("m"), Group("k"), Group("k", "a")]
    dealt = [Shard(k, 2).deal(units) for k in (1, 2)]
    # the (metric, seed image) units first, sorted: k/a, m/a, m/b, m/c, m/d; then k, m
    assert dealt[0] == {Group("k", "a"), Group("m", "b"), Group("m", "d"), Group("m")}
    assert dealt[1] == set(units) - dealt[0]
    assert Shard(3, 3).deal(units[:2]) == frozenset()  # more shards than units: an empty share
    others = [f"t.py::test_{i}" for i in range(40)]  # tests on no metric: by a checksum of the id
    assert sorted(t for k in (1, 2, 3) for t in others if Shard(k, 3).holds(t)) == sorted(others)
    assert parse_shard("2/3") == Shard(2, 3) and parse_shard(None) is None


def test_long_plans_are_cut_into_bounded_values() -> None:
    ids = [f"m.test::t[{i:06d}]" for i in range(50_000)]
    values = list(chunks(ids))
    assert len(values) > 1 and max(map(len, values)) <= 256 * 1024
    assert [line for v in values for line in v.split("\n")] == ids


def test_runs_split_by_metric_or_seed_image_merge_but_shards_must_share_the_selection() -> None:
    """Without `--shard`, jobs split by metric or by seed image are one matrix; `--shard` runs
    deal one selection, so they must share it; every file shares the verdict rules."""
    from banana_tests.reports.merge_checks import disagreements

    def facts(shard: str, metrics: str, seeds: dict[str, str], runs: str = "all") -> dict[str, str]:
        return {"shard": shard, "metric_set": metrics, "seed_records": json.dumps(seeds), "runs": runs}

    a, b = Path("a.xml"), Path("b.xml")
    by_metric = {a: facts("", "brisque", {"alpha": "1"}), b: facts("", "niqe", {"alpha": "1"})}
    by_seed = {a: facts("", "brisque", {"alpha": "1"}), b: facts("", "brisque", {"beta": "2"})}
    assert disagreements(by_metric) == [] == disagreements(by_seed)
    shards = {a: facts("1/2", "brisque", {"alpha": "1"}), b: facts("2/2", "niqe", {"alpha": "1"})}
    assert disagreements(shards) == ["--metric (between --shard runs): brisque in a.xml; niqe in b.xml"]
    other = {a: facts("", "brisque", {"alpha": "1"}), b: facts("", "niqe", {"alpha": "9"}, runs="2")}
    assert disagreements(other) == [
        "--runs: all in a.xml; 2 in b.xml",
        "records of seed image alpha: 1 in a.xml; 9 in b.xml",
    ]


def test_shards_must_share_a_familys_options_and_other_runs_need_not() -> None:
    """The trend family's `--trend` decides its cases: shards that differ on it deal other units."""
    from banana_tests.reports.merge_checks import disagreements

    a, b = Path("a.xml"), Path("b.xml")
    runs = {a: {"shard": "", "trend": "true"}, b: {"shard": "", "trend": "false"}}
    shards = {a: {"shard": "1/2", "trend": "true"}, b: {"shard": "2/2", "trend": "false"}}

    assert disagreements(runs) == []
    assert disagreements(shards) == ["--trend (between --shard runs): true in a.xml; false in b.xml"]
