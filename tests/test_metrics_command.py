"""`banana-tests metrics`: every metric listed, with availability that follows the files here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from banana_tests.cli import main
from metrics_under_test.registry import CATALOG, catalog
from metrics_under_test.weights import stage
from tests.conftest import SHARED_MIRROR, offline


def listing(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict]:  # type: ignore[type-arg]
    assert main(["metrics", "--json", *args]) == 0
    return {row["name"]: row for row in json.loads(capsys.readouterr().out)}


@pytest.fixture(autouse=True)
def empty_torch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    offline(monkeypatch, tmp_path)
    return tmp_path / "torch"


def test_json_lists_every_pyiqa_nr_metric_and_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    rows = listing(capsys)
    catalog = {m["name"] for m in json.loads(CATALOG.read_text())["metrics"]}
    assert catalog | {"laplacian_variance", "noise_sigma"} == set(rows)
    assert rows["brisque"]["backend"] == "pyiqa" and rows["brisque"]["lower_better"] is True
    assert rows["laplacian_variance"]["target"] == "metrics_under_test.examples:laplacian_variance"
    assert rows["dbcnn"]["paper_name"] == "DBCNN" and rows["musiq"]["range"] == [0.0, 100.0]


def test_availability_follows_the_files_in_the_cache_and_the_mirror(
    capsys: pytest.CaptureFixture[str], empty_torch_home: Path
) -> None:
    rows = listing(capsys)
    assert rows["piqe"]["available"] and rows["noise_sigma"]["available"]  # nothing to provide
    assert not rows["brisque"]["available"] and "brisque_svm_weights.pth" in rows["brisque"]["how_to_provide"]
    assert not rows["dbcnn"]["available"] and rows["dbcnn"]["fetches_at_load"] is None
    assert not rows["afine_nr"]["available"] and rows["afine_nr"]["fetches_at_load"]
    if not SHARED_MIRROR.is_dir():
        pytest.skip(f"no weights mirror at {SHARED_MIRROR}")
    mirrored = listing(capsys, "--weights-dir", str(SHARED_MIRROR))
    assert mirrored["brisque"]["weights"][0]["found"] == "mirror" and mirrored["niqe"]["available"]
    stage(SHARED_MIRROR, ((w.file, w.path) for n in ("brisque", "niqe") for w in catalog()[n].weights))
    staged = listing(capsys)
    assert staged["brisque"]["available"] and staged["niqe"]["weights"][0]["found"] == "cache"
    assert str(empty_torch_home) in staged["niqe"]["weights"][0]["path"]
    assert not staged["musiq"]["available"]


def test_the_table_is_fast_and_never_imports_pyiqa_or_torch() -> None:
    code = (
        "import sys; from banana_tests.cli import main; main(['metrics']); "
        "assert 'pyiqa' not in sys.modules and 'torch' not in sys.modules, 'heavy import'"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    header = ["metric", "better", "range", "backend", "cost", "s/2K", "here", "files"]
    assert out.splitlines()[0].split() == header
    assert any(line.startswith("noise_sigma ") and " lower " in line for line in out.splitlines())
    assert "metrics can run here" in out


def test_the_seconds_shown_are_the_measured_ones() -> None:
    """`s/2K` comes from benchmarks/bench_metrics_cpu.md, the table benchmarks/bench_metrics.py
    printed: a re-measurement must update both."""
    from banana_tests.commands.metrics import CPU_SECONDS_2K
    from metrics_under_test.pyiqa_catalog import MEASURED, measured_seconds

    table = MEASURED.read_text(encoding="utf-8")
    measured = measured_seconds(table)
    assert CPU_SECONDS_2K.keys() == measured.keys()
    for name, seconds in measured.items():
        assert CPU_SECONDS_2K[name] == pytest.approx(seconds, rel=0.01), name  # shown to 3 figures
