"""`banana-tests metrics`: every metric listed, with availability that follows the files here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from banana_tests.cli import main
from metrics_under_test.extras import installed
from metrics_under_test.registry import CATALOG, catalog
from metrics_under_test.weights import stage
from tests.conftest import SHARED_MIRROR, needs, offline


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
    assert catalog | {"laplacian_variance", "noise_sigma", "visualquality_r1", "rali"} == set(rows)
    assert rows["brisque"]["backend"] == "pyiqa" and rows["brisque"]["lower_better"] is True
    assert rows["laplacian_variance"]["target"] == "metrics_under_test.examples:laplacian_variance"
    assert rows["dbcnn"]["paper_name"] == "DBCNN" and rows["musiq"]["range"] == [0.0, 100.0]


def test_availability_follows_the_files_in_the_cache_and_the_mirror(
    capsys: pytest.CaptureFixture[str], empty_torch_home: Path
) -> None:
    needs("pyiqa")  # without it no pyiqa metric is available, whatever its files
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


@pytest.mark.slow
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


def test_all_23_paper_metrics_are_listed_with_how_each_runs_here(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table 2's 23 metrics, each with how it runs here; the VLM models with licence and size."""
    needs("pyiqa")
    from metrics_under_test.vlm_catalog import VISUALQUALITY_R1, Runs

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    rows = listing(capsys)
    paper = {name: row for name, row in rows.items() if row["in_paper"]}
    assert len(paper) == 23 and all(row["runs_here"] in {r.value for r in Runs} for row in paper.values())
    assert {row["paper_name"] for row in paper.values()} >= {"VisualQuality-R1", "RALI", "Q-Align", "PIQE"}
    assert paper["piqe"]["runs_here"] == Runs.REAL.value  # needs no file
    assert paper["musiq"]["runs_here"] == Runs.SYNTHETIC.value  # its file is not here
    assert paper["visualquality_r1"]["runs_here"] == paper["qalign"]["runs_here"] == Runs.TINY.value
    assert paper["rali"]["runs_here"] == Runs.TINY_CPU_READY.value  # a CLIP model, not a 7B VLM
    for name in ("visualquality_r1", "rali", "qalign"):
        assert paper[name]["license"] and paper[name]["size"] and not paper[name]["available"], name
    assert "MIT" in paper["visualquality_r1"]["license"] and "8.3B" in paper["visualquality_r1"]["size"]
    assert "tokenizer.json" in paper["visualquality_r1"]["how_to_provide"]
    assert (
        "RALI/ckpt.pt" in paper["rali"]["how_to_provide"]
        and "ByteDance/Q-Insight" in paper["rali"]["how_to_provide"]
    )
    assert "Apache-2.0" in paper["rali"]["license"] and "MIT" in paper["qalign"]["license"]
    assert not any(row["in_paper"] for name, row in rows.items() if name in ("musiq-ava", "noise_sigma"))
    snapshot = VISUALQUALITY_R1.folder / "snapshots" / ("abc" * 14)[:40]
    snapshot.mkdir(parents=True)
    (VISUALQUALITY_R1.folder / "refs").mkdir()
    (VISUALQUALITY_R1.folder / "refs" / "main").write_text(snapshot.name)  # as huggingface_hub writes it
    for name in VISUALQUALITY_R1.files:
        (snapshot / name).write_text("{}")
    assert listing(capsys)["visualquality_r1"]["available"]
    assert main(["metrics"]) == 0
    out = capsys.readouterr().out
    text = out.split("The paper's 23 metrics (Table 2) and how each runs here:")[1].split("\n\n")[0]
    assert len([line for line in text.splitlines() if line.startswith("  ") and "licence:" not in line]) == 23
    assert text.count("licence:") == 3


def test_each_metric_names_its_library_and_the_licence_its_metadata_declares(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pyiqa declares PolyForm Noncommercial in License-Expression only, which `pip show` of pip
    23 prints as blank: the listing reads it from the installed metadata, or names the extra."""
    from importlib import metadata

    rows = listing(capsys)
    brisque, example = rows["brisque"], rows["laplacian_variance"]
    assert brisque["library"] == "pyiqa" and brisque["library_extra"] == "pyiqa"
    if installed("pyiqa"):
        assert brisque["library_version"] == metadata.version("pyiqa")
        assert brisque["library_license"] == metadata.metadata("pyiqa")["License-Expression"]
    else:
        assert brisque["library_version"] is None and not brisque["available"]
        assert brisque["how_to_provide"].endswith("pip install 'banana-tests[pyiqa]'")
    assert example["library"] == "banana-tests" and example["library_license"] == "MIT"
    assert main(["metrics"]) == 0
    out = capsys.readouterr().out
    described = (
        f"pyiqa {metadata.version('pyiqa')}: PolyForm-Noncommercial-1.0.0"
        if installed("pyiqa")
        else "pyiqa: not installed (pip install 'banana-tests[pyiqa]')"
    )
    assert any(line.strip().startswith(described) and "brisque" in line for line in out.splitlines()), out


def test_a_licence_is_read_from_the_expression_the_short_field_or_the_classifiers() -> None:
    """numpy declares an SPDX expression; scipy a whole licence text in `License` and a
    classifier: the text is too long to show, the classifier is shown."""
    from importlib import metadata

    from metrics_under_test.extras import declared_licence

    assert declared_licence(metadata.metadata("numpy")) == metadata.metadata("numpy")["License-Expression"]
    scipy = metadata.metadata("scipy")
    if not scipy["License-Expression"]:
        assert "\n" in (scipy["License"] or "\n")
        assert declared_licence(scipy) == "BSD License"
