"""Score snapshots through pytester: drift fails with a readable diff; nothing is ever deleted;
narrowed runs compare what they scored; an installed suite writes under the user's rootdir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import suite_folder

pytest.importorskip("syrupy")

MODULE = (
    "from banana_tests.test_snapshots import pytest_generate_tests, test_scores_match_snapshot"
    "  # noqa: F401\n"
)


@pytest.fixture
def snapped(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return suite_folder(pytester, monkeypatch, MODULE, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5))


def snapshot_file(pytester: pytest.Pytester, metric: str) -> Path:
    folder = pytester.path / "__snapshots__" / "data" / "test_suite"  # the set in data/
    return folder / f"test_scores_match_snapshot[{metric}].json"


def test_a_drifted_score_fails_naming_the_image_step_and_amount(snapped: pytest.Pytester) -> None:
    snapped.runpytest_subprocess("--dataset=data", "--metric=piqe", "--snapshot-update").assert_outcomes(
        passed=1
    )
    path = snapshot_file(snapped, "piqe")
    scores = json.loads(path.read_text())
    assert sorted(scores) == [f"replicate/{s}/run0/step{i}" for s in ("alpha", "beta") for i in (1, 5)]
    scores["replicate/beta/run0/step5"] *= 1.01
    path.write_text(json.dumps(scores, indent=2) + "\n")

    drifted = snapped.runpytest_subprocess("--dataset=data", "--metric=piqe")
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(
        [
            "*1 score(s) moved beyond rtol=0.001 and atol=0.1 (snapshot → now):*",
            "*replicate/beta/run0/step5: * → *, moved -* (-0.99%)*",
        ]
    )
    assert "alpha/run0/step5" not in drifted.stdout.str()
    tolerant = snapped.runpytest_subprocess("--dataset=data", "--metric=piqe", "--snapshot-rtol=0.02")
    tolerant.assert_outcomes(passed=1)


def test_scores_match_within_a_tenth_of_a_normalised_point() -> None:
    from banana_tests.session.snapshots import abs_tolerance, drift
    from metrics_under_test.registry import lookup

    spec = lookup("brisque")
    atol = abs_tolerance(spec)
    span = spec.scale.high - spec.scale.low

    assert atol == pytest.approx(span / 1_000)
    assert drift({"a": -2.8082}, {"a": -2.8082 + 0.9 * atol}, 1e-3, atol) == []
    moved = drift({"a": -2.8082}, {"a": -2.8082 + 1.1 * atol}, 1e-3, atol)
    assert len(moved) == 1 and moved[0].startswith("a: -2.8082 → ")


def test_a_subset_run_keeps_other_metrics_snapshots(snapped: pytest.Pytester) -> None:
    """Serial and -n 2, with and without --snapshot-update: nothing reported unused or deleted."""
    snapped.runpytest_subprocess(
        "--dataset=data", "--metric=piqe,entropy", "--snapshot-update"
    ).assert_outcomes(passed=2)
    before = {m: snapshot_file(snapped, m).read_text() for m in ("piqe", "entropy")}
    for extra in ([], ["--snapshot-update"], ["-n", "2"], ["-n", "2", "--snapshot-update"]):
        result = snapped.runpytest_subprocess("--dataset=data", "--metric=entropy", *extra)
        assert result.parseoutcomes().get("passed") == 1, extra
        assert result.ret == pytest.ExitCode.OK, extra
        assert "unused" not in result.stdout.str(), extra
        assert {m: snapshot_file(snapped, m).read_text() for m in ("piqe", "entropy")} == before, extra


def test_a_keyword_update_of_one_metric_deletes_no_other_snapshot(snapped: pytest.Pytester) -> None:
    """The README's gate step 2 under syrupy 7 deleted brisque's, niqe's and piqe's snapshots."""
    snapped.runpytest_subprocess("--dataset=data", "--metric=piqe", "--snapshot-update").assert_outcomes(
        passed=1
    )
    before = snapshot_file(snapped, "piqe").read_text()
    result = snapped.runpytest_subprocess(
        "--dataset=data",
        "--metric=laplacian_variance",
        "--snapshot-update",
        "-k",
        "test_scores_match_snapshot",
    )
    assert result.ret == pytest.ExitCode.OK
    assert "Deleted" not in result.stdout.str()
    assert snapshot_file(snapped, "piqe").read_text() == before
    assert snapshot_file(snapped, "laplacian_variance").is_file()


def test_a_narrowed_run_compares_only_what_it_scored(snapped: pytest.Pytester) -> None:
    snapped.runpytest_subprocess("--dataset=data", "--metric=laplacian_variance", "--snapshot-update")
    path = snapshot_file(snapped, "laplacian_variance")
    recorded = path.read_text()
    for narrowing in ("--seed-image=alpha", "--runs=1", "--steps=5"):
        snapped.runpytest_subprocess(
            "--dataset=data", "--metric=laplacian_variance", narrowing
        ).assert_outcomes(passed=1)
    scores = json.loads(recorded)
    scores["replicate/alpha/run0/step5"] *= 1.5
    path.write_text(json.dumps(scores))
    drifted = snapped.runpytest_subprocess(
        "--dataset=data", "--metric=laplacian_variance", "--seed-image=alpha"
    )
    drifted.assert_outcomes(failed=1)
    drifted.stdout.fnmatch_lines(["*1 score(s) moved*", "*replicate/alpha/run0/step5: *"])


def test_a_narrowed_update_is_refused_and_keeps_the_snapshot(snapped: pytest.Pytester) -> None:
    snapped.runpytest_subprocess("--dataset=data", "--metric=laplacian_variance", "--snapshot-update")
    recorded = snapshot_file(snapped, "laplacian_variance").read_text()
    result = snapped.runpytest_subprocess(
        "--dataset=data", "--metric=laplacian_variance", "--steps=5", "--snapshot-update"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*--snapshot-update needs a run over the whole data set: drop --steps=5*"])
    assert snapshot_file(snapped, "laplacian_variance").read_text() == recorded


def test_a_metric_without_a_snapshot_fails_saying_how_to_record_it(snapped: pytest.Pytester) -> None:
    result = snapped.runpytest_subprocess("--dataset=data", "--metric=laplacian_variance")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*no snapshot recorded for this metric yet: record it with --snapshot-update*"]
    )
    assert "JSONDecodeError" not in result.stdout.str()


def test_another_data_set_keeps_its_snapshots_apart(snapped: pytest.Pytester) -> None:
    from tests.conftest import write_set

    write_set(snapped.path / "other", seeds=("alpha", "beta"), runs=(0,), steps=(1, 5))
    snapped.runpytest_subprocess("--dataset=data", "--metric=laplacian_variance", "--snapshot-update")
    snapped.runpytest_subprocess("--dataset=other", "--metric=laplacian_variance", "--snapshot-update")
    base = snapped.path / "__snapshots__"
    name = "test_scores_match_snapshot[laplacian_variance].json"
    assert (base / "data" / "test_suite" / name).is_file() and (
        base / "other" / "test_suite" / name
    ).is_file()
    snapped.runpytest_subprocess("--dataset=other", "--metric=laplacian_variance").assert_outcomes(passed=1)


def test_an_installed_suite_reads_shipped_snapshots_and_writes_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from banana_tests.session import snapshots

    module = tmp_path / "site-packages" / "banana_tests" / "test_snapshots.py"
    shipped = module.parent / "__snapshots__" / "test_snapshots"
    shipped.mkdir(parents=True)
    (shipped / "t[brisque].json").write_text("{}")
    user = tmp_path / "project" / "banana_snapshots"
    monkeypatch.setattr(snapshots, "installed", lambda path: True)

    assert snapshots.snapshot_folder(user, module, None, "t[brisque].json", updating=False) == shipped
    assert (
        snapshots.snapshot_folder(user, module, None, "t[brisque].json", updating=True)
        == user / "test_snapshots"
    )
    assert (
        snapshots.snapshot_folder(user, module, None, "t[mine].json", updating=False)
        == user / "test_snapshots"
    )
    assert snapshots.snapshot_folder(user, module, "b100", "t[brisque].json", updating=False) == (
        user / "b100" / "test_snapshots"
    )
    (user / "test_snapshots").mkdir(parents=True)
    (user / "test_snapshots" / "t[brisque].json").write_text("{}")
    assert (
        snapshots.snapshot_folder(user, module, None, "t[brisque].json", updating=False)
        == user / "test_snapshots"
    )
    monkeypatch.undo()
    assert not snapshots.installed(module) and snapshots.installed(Path(pytest.__file__))
