"""Scoring as a public step (docs/cluster.md): `banana_tests.api.score` and `banana-tests score`
fill a score cache without pytest, `banana-tests cache merge` joins caches, and a verdict pass on
the result builds no model, scores nothing and gives the Δs of a run that scored everything."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import test_throughput
from tests.conftest import assert_outcomes, junit_cases, unavailable
from tests.test_promises import IMPORTS_PLUGIN, niqe_parameters

pytestmark = pytest.mark.slow  # banana-tests score and cache in child processes: the slow tier

suite = test_throughput.suite  # the fixture: 3 seed images, countmetric logging its builds
METRIC = "--metric=countmetric:First,countmetric:Second"
JUNIT = ("-o", "junit_family=xunit1")


def builds(folder: pytest.Pytester, log: str = "builds.log") -> list[str]:
    path = folder.path / log
    return path.read_text().splitlines() if path.exists() else []


def looks(folder: pytest.Pytester) -> list[str]:
    """The builds of the look at what each metric loads (banana_tests.scoring.score_identity):
    once per metric and cache, in a child of its own."""
    return builds(folder, "builds.log.looked")


def deltas(xml: Path) -> dict[str, tuple[str, str]]:
    """Each case's Δ and whether its scores came from the cache, by test name."""
    out = {}
    for case in ET.parse(xml).iter("testcase"):
        props = {p.get("name"): p.get("value", "") for p in case.iter("property")}
        out[case.get("name", "")] = (props["delta"], props["score_cached"])
    return out


def verdict_pass(folder: pytest.Pytester, cache: str, xml: str) -> dict[str, tuple[str, str]]:
    """A suite run on a filled cache: it must build no model."""
    before = builds(folder), looks(folder)
    result = folder.runpytest_subprocess(
        "--dataset=data", METRIC, f"--cache-dir={cache}", f"--junitxml={xml}", *JUNIT
    )
    assert_outcomes(result, passed=9, missed=9)
    assert builds(folder) == before[0], "the verdict pass built a model"
    assert looks(folder) == before[1], "the verdict pass looked at what a metric loads again"
    return deltas(folder.path / xml)


def unsharded(folder: pytest.Pytester) -> dict[str, str]:
    """The Δs of a run that scores everything itself."""
    folder.runpytest_subprocess("--dataset=data", METRIC, "--no-cache", "--junitxml=cold.xml", *JUNIT)
    return {name: delta for name, (delta, _) in deltas(folder.path / "cold.xml").items()}


def test_the_api_fills_a_cache_the_verdict_pass_only_reads(suite: pytest.Pytester) -> None:
    script = (
        "from pathlib import Path\n"
        "from banana_tests.api import Device, ScoreRequest, score\n"
        "metrics = ['countmetric:First', 'countmetric:Second']\n"
        "s = score(ScoreRequest(Path('data'), metrics, cache_dir=Path('c'), device=Device.CPU))\n"
        "print(s.complete, *s.lines(), sep='\\n')\n"
    )
    result = suite.run(sys.executable, "-c", script)
    assert result.ret == 0, result.stderr.str()
    assert result.outlines[:3] == [
        "True",
        "first: 24 images, 0 from the cache, 24 scored",  # 3 seed images × 2 runs × steps 1, 5, 10, 20
        "second: 24 images, 0 from the cache, 24 scored",
    ]
    assert sorted(line.split()[0] for line in builds(suite)) == ["first", "second"]  # once each
    assert sorted(line.split()[0] for line in looks(suite)) == ["first", "second"]

    found = verdict_pass(suite, "c", "verdicts.xml")
    assert {cached for _, cached in found.values()} == {"true"}
    assert {name: delta for name, (delta, _) in found.items()} == unsharded(suite)


def cli(folder: pytest.Pytester, *args: str) -> pytest.RunResult:
    return folder.run(sys.executable, "-m", "banana_tests.cli", *args)


def test_score_on_two_machines_then_merge_gives_the_unsharded_verdicts(suite: pytest.Pytester) -> None:
    shards = {"a": ["--seed-image=alpha"], "b": ["--seed-image=beta", "--seed-image=gamma"]}
    for cache, seeds in shards.items():
        result = cli(suite, "score", "--dataset=data", METRIC, *seeds, f"--cache-dir={cache}", "--device=cpu")
        assert result.ret == 0, result.stderr.str()
        result.stderr.fnmatch_lines(["banana-tests score: [[]1/*[]] first *: 8 images (*s)"])
    assert len(builds(suite)) == 4  # each metric once per machine
    assert len(looks(suite)) == 4  # and looked at once per machine: the merge carries the answers

    merged = cli(suite, "cache", "merge", "a", "b", "--into=merged")
    assert merged.ret == 0, merged.stderr.str()
    again = cli(suite, "cache", "merge", "a", "b", "--into=merged")
    assert again.outlines == [f"0 new scores into merged ({merged.outlines[0].split()[0]} already there)"]

    found = verdict_pass(suite, "merged", "verdicts.xml")
    assert {cached for _, cached in found.values()} == {"true"}
    assert {name: delta for name, (delta, _) in found.items()} == unsharded(suite)


def test_score_shards_add_up_to_every_image_once(suite: pytest.Pytester) -> None:
    """`score --shard=K/N` deals out the (metric, seed image) units as the suite's `--shard` does:
    3 shards of 2 metrics × 3 seed images, each image of each metric scored in one shard only."""
    counts = []
    for k in (1, 2, 3):
        result = cli(suite, "score", "--dataset=data", METRIC, f"--shard={k}/3", f"--cache-dir=s{k}")
        assert result.ret == 0, result.stderr.str()
        counts.append(len(result.stderr.str().split("banana-tests score: [")) - 1)
    assert counts == [2, 2, 2]  # six units, two each
    merged = cli(suite, "cache", "merge", "s1", "s2", "s3", "--into=merged")
    assert merged.ret == 0, merged.stderr.str()
    whole = cli(suite, "score", "--dataset=data", METRIC, "--cache-dir=whole")
    assert whole.ret == 0, whole.stderr.str()
    alone = cli(suite, "cache", "merge", "whole", "--into=whole-copy")
    assert merged.outlines[0].split()[0] == alone.outlines[0].split()[0]  # the same scores, none twice
    found = verdict_pass(suite, "merged", "verdicts.xml")
    assert {cached for _, cached in found.values()} == {"true"}
    assert {name: delta for name, (delta, _) in found.items()} == unsharded(suite)


def test_a_conflicting_score_is_refused_by_key_and_nothing_is_written(suite: pytest.Pytester) -> None:
    for cache, seed in (("a", "alpha"), ("b", "alpha")):
        cli(
            suite,
            "score",
            "--dataset=data",
            "--metric=countmetric:First",
            f"--seed-image={seed}",
            f"--cache-dir={cache}",
        )
    with sqlite3.connect(suite.path / "b" / "scores.sqlite") as db:
        image, metric = db.execute("SELECT image, metric FROM scores ORDER BY image LIMIT 1").fetchone()
        db.execute("UPDATE scores SET score = score + 1 WHERE image = ? AND metric = ?", (image, metric))
    cli(suite, "cache", "merge", "a", "--into=existing")
    before = (suite.path / "existing" / "scores.sqlite").read_bytes()

    for into in ("fresh", "existing"):
        result = cli(suite, "cache", "merge", "a", "b", f"--into={into}")
        assert result.ret == 1
        message = result.stderr.str()
        assert f"conflict for image {image}, metric 'first' (identity {metric})" in message
        assert str(Path("a", "scores.sqlite")) in message and str(Path("b", "scores.sqlite")) in message
    assert not (suite.path / "fresh" / "scores.sqlite").exists()
    assert (suite.path / "existing" / "scores.sqlite").read_bytes() == before


def test_usage_errors_exit_2(suite: pytest.Pytester) -> None:
    (suite.path / "notacache").write_text("hello")
    merged = cli(suite, "cache", "merge", "notacache", "--into=m")
    assert merged.ret == 2
    assert "notacache: not a score cache" in merged.stderr.str()
    scored = cli(suite, "score", "--dataset=data", "--metric=countmetric:First", "--steps=1")
    assert scored.ret == 2
    assert "--steps=1 includes the reference step 1" in scored.stderr.str()


def test_a_verdict_pass_after_score_imports_no_torch(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pyiqa metric scored by `banana-tests score`: the verdict pass reads every score and the
    oracle's figures from the cache, importing none of torch, pyiqa and numpy (docs/speed.md)."""
    niqe_parameters(suite, monkeypatch)
    selection = ("--dataset=data", "--metric=niqe", "--seed-image=alpha", "--steps=5")
    scored = cli(suite, "score", *selection)
    assert scored.ret == 0, scored.stderr.str()
    assert scored.outlines[0] == "niqe: 4 images, 0 from the cache, 4 scored"  # 2 runs × steps 1 and 5
    suite.makeconftest(IMPORTS_PLUGIN)
    result = suite.runpytest_subprocess(*selection, "--junitxml=j.xml", "-s")
    assert "HEAVY MODULES: none" in result.outlines
    [(_, props)] = junit_cases(suite.path / "j.xml").values()
    assert props["score_cached"] == "true"


def test_the_ray_example_scores_merges_and_the_verdict_pass_scores_nothing(suite: pytest.Pytester) -> None:
    """examples/ray/ray_score.py on a local Ray cluster of 2 CPUs (Ray is in the ray extra: without
    it the test skips, and fails in CI)."""
    if importlib.util.find_spec("ray") is None:
        unavailable("Ray is not installed (it is in the ray extra)")
    example = Path(__file__).parents[1] / "examples" / "ray" / "ray_score.py"
    metrics = METRIC.split("=", 1)[1]
    result = suite.run(
        sys.executable,
        example,
        "--dataset=data",
        f"--metric={metrics}",
        "--out=work",
        "--num-cpus=2",
        timeout=300,
    )
    assert result.ret == 0, result.stderr.str()[-3000:]
    assert sum(line.startswith(("alpha-cpu:", "beta-cpu:", "gamma-cpu:")) for line in result.outlines) == 3
    found = verdict_pass(suite, "work/merged", "verdicts.xml")
    assert {cached for _, cached in found.values()} == {"true"}
    assert {name: delta for name, (delta, _) in found.items()} == unsharded(suite)
