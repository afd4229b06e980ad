"""`banana-tests fixtures refresh` rebuilds the embedded set byte for byte (about 20 s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from banana_tests.data import SEEDS

from banana_tests.cli import main
from banana_tests.editors.embedded_sets import DEFAULT_DIR


@pytest.mark.slow
def test_refresh_reproduces_the_committed_sha256(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("skimage")
    committed = [json.loads(line) for line in (DEFAULT_DIR / "metadata.jsonl").read_text().splitlines()]
    seeds = tmp_path / "seeds"
    argv = ["fixtures", "refresh", "--out", str(tmp_path), "--seeds-out", str(seeds), "--skip-trials"]
    assert main(argv) == 0  # the trial sets' sha256s: tests/test_artifacts.py, one seed image each
    fresh = [json.loads(line) for line in (tmp_path / "metadata.jsonl").read_text().splitlines()]
    assert {r["file_name"]: r["sha256"] for r in fresh} == {r["file_name"]: r["sha256"] for r in committed}
    assert {p.name: p.read_bytes() for p in seeds.iterdir()} == {
        p.name: p.read_bytes() for p in SEEDS.iterdir()
    }
    out = capsys.readouterr().out
    assert f"{len(committed)} images" in out and "8 clean seed images" in out


def test_refresh_without_a_recipe_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fixtures", "refresh", "--recipe", str(tmp_path / "none.json"), "--out", str(tmp_path)]) == 1
    assert "no recipe at" in capsys.readouterr().err
