"""Bad data-set names at the score snapshots (issue 56): a set's snapshots are its own. A set
given as `.`, `..`, or by a path or hub id that ends in the same name as another's, gets a label
of its own (banana_tests.families.snapshot.snapshots.dataset_label), and no run over another set writes
the embedded set's snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from banana_tests.data import EMBEDDED

from banana_tests.families.snapshot.snapshots import dataset_label, snapshot_folder
from tests.conftest import offline, write_set

NAME = "test_scores_match_snapshot[m].json"


def folder(source: str, rootdir: Path, module: Path) -> Path:
    """Where a checkout's run over `source` keeps its snapshots of the module."""
    label = dataset_label(source, False, rootdir)
    return snapshot_folder(rootdir / "banana_snapshots", module, label, NAME, updating=True)


@pytest.mark.parametrize("given", [".", "..", "./", "set/..", "set/."])
def test_a_set_named_by_a_relative_path_writes_inside_the_snapshot_folder_and_not_the_embedded_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    module = tmp_path / "suite" / "test_snapshots.py"
    (tmp_path / "here" / "set").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "here")
    snapshots = (module.parent / "__snapshots__").resolve()

    found = folder(given, tmp_path, module).resolve()

    assert found.is_relative_to(snapshots), found
    assert found != snapshots / module.stem and found.parent != snapshots, "the embedded set's folder"
    assert found.name == module.stem and found.parent.name not in {".", "..", ""}


def test_two_sets_of_one_name_get_two_labels_and_a_set_keeps_its_label_wherever_it_is_named_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for side in ("a", "b"):
        (tmp_path / side / "set").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    a, b = (dataset_label(f"{side}/set", False, tmp_path) for side in ("a", "b"))
    assert a != b and a is not None and a.startswith("set-")
    monkeypatch.chdir(tmp_path / "a" / "set")
    assert dataset_label(".", False, tmp_path) == a
    assert dataset_label(str(tmp_path / "a" / "set"), False, tmp_path) == a
    for checkout in ("one", "two"):  # a set in the project, checked out in two places: one label
        (tmp_path / checkout / "data" / "set").mkdir(parents=True)
    one, two = (
        dataset_label(str(tmp_path / c / "data" / "set"), False, tmp_path / c) for c in ("one", "two")
    )
    assert one == two
    assert dataset_label("hf:x/set", False, tmp_path) != dataset_label("hf:y/set", False, tmp_path)
    assert dataset_label("hf:x/set", False, tmp_path) == "hf-x--set"


def test_the_embedded_set_keeps_its_label_however_it_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert dataset_label(str(EMBEDDED), False, tmp_path) is None
    monkeypatch.chdir(EMBEDDED)
    assert dataset_label(".", False, tmp_path) is None


@pytest.mark.slow
def test_a_run_over_dot_inside_a_set_leaves_the_embedded_snapshot_alone(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: `--dataset=.` was labelled `.`, and its --snapshot-update replaced the embedded
    set's 96 recorded scores by the set's 4."""
    write_set(pytester.path, seeds=("alpha",), runs=(0,), steps=(1, 5, 10, 20))
    pytester.makepyfile(
        test_suite="from banana_tests.families.snapshot.test_snapshots import pytest_generate_tests, "
        "test_scores_match_snapshot  # noqa: F401\n"
    )
    offline(monkeypatch, pytester.path)
    args = (
        "--metric=metrics_under_test.examples:laplacian_variance",
        "--snapshot-update",
        "-p",
        "no:cacheprovider",
    )
    assert pytester.runpytest_subprocess(*args).ret == 0
    embedded = (
        pytester.path / "__snapshots__" / "test_suite" / "test_scores_match_snapshot[laplacian_variance].json"
    )
    recorded = embedded.read_bytes()
    assert len(json.loads(recorded)) == 96

    result = pytester.runpytest_subprocess("--dataset=.", *args)

    assert result.ret == 0, result.stdout.str()
    assert embedded.read_bytes() == recorded, "the embedded set's snapshot was overwritten"
    [own] = (pytester.path / "__snapshots__").glob(
        "*/test_suite/test_scores_match_snapshot[[]laplacian_variance].json"
    )
    assert own.parent.parent.name.startswith(pytester.path.name + "-")
    assert len(json.loads(own.read_bytes())) == 4
