from __future__ import annotations

import json
from pathlib import Path

import pytest

from banana_tests.trajectories import DataError, read_imagefolder, resolve_inside
from tests.conftest import MakeSet


def test_reads_every_record(make_set: MakeSet) -> None:
    root = make_set(seeds=("a", "b", "c"), runs=(0, 1, 2), steps=(1, 5))
    ts = read_imagefolder(root)
    assert len(ts.records) == 3 * 3 * 2
    assert ts.variants == ["replicate"]
    assert all(r.path.is_file() and r.sha256 for r in ts.records)
    assert ts.records[0].source.endswith("metadata.jsonl:1")


def test_bad_lines_become_problems_and_the_rest_loads(make_set: MakeSet) -> None:
    root = make_set()
    meta = root / "metadata.jsonl"
    meta.write_text(meta.read_text() + '{"file_name": "x.png", "seed_image": "a"}\nnot json\n')
    ts = read_imagefolder(root)
    assert len(ts.records) == 16
    assert len(ts.problems) == 2
    assert "missing field(s) variant, run, step" in str(ts.problems[0])
    assert ":18:" in str(ts.problems[1])


def test_file_names_may_not_escape_the_root(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="escapes the data set root"):
        resolve_inside(tmp_path, "../etc/passwd")
    with pytest.raises(DataError, match="escapes"):
        resolve_inside(tmp_path, "/etc/passwd")


def test_a_folder_without_metadata_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"no metadata\.jsonl"):
        read_imagefolder(tmp_path)


def test_canonical_sets_load_through_datasets_imagefolder(make_set: MakeSet) -> None:
    """A set made here is a Hugging Face imagefolder: push_to_hub and load_dataset read it."""
    datasets = pytest.importorskip("datasets")
    root = make_set(seeds=("a",), runs=(0, 1), steps=(1, 5))
    ds = datasets.load_dataset("imagefolder", data_dir=str(root), split="train")
    ds = ds.cast_column("image", datasets.Image(decode=False))
    ours = {(r.seed_image, r.run, r.step, r.path) for r in read_imagefolder(root).records}
    theirs = {(row["seed_image"], row["run"], row["step"], Path(row["image"]["path"])) for row in ds}
    assert ours == theirs
    assert json.loads((root / "metadata.jsonl").read_text().splitlines()[0])["sha256"] == ds[0]["sha256"]
