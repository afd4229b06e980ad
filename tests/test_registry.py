from __future__ import annotations

import os
from pathlib import Path

import pytest

from metrics_under_test.registry import PAPER_METRICS, UnknownMetric, catalog, lookup, resolve
from metrics_under_test.spec import Cost
from metrics_under_test.vlm_catalog import OUTSIDE_PYIQA
from metrics_under_test.weights import mirror_from_env
from tests.conftest import needs


@pytest.mark.parametrize(
    "name, canonical",
    [
        ("BRISQUE", "brisque"),
        ("paq-2-piq", "paq2piq"),
        ("TOPIQ NR", "topiq_nr"),
        ("q-align", "qalign"),
        ("WaDIQaM", "wadiqam_nr"),
        ("musiq-koniq", None),
    ],
)
def test_paper_names_answer_case_insensitively(name: str, canonical: str | None) -> None:
    if canonical is None:
        with pytest.raises(UnknownMetric):
            lookup(name)
    else:
        assert lookup(name).name == canonical


def test_table2_ranges_and_directions_win_for_the_paper_metrics() -> None:
    for p in PAPER_METRICS:
        spec = catalog()[p.pyiqa_name]
        assert (spec.low, spec.high, spec.lower_better, spec.paper_name) == (
            p.low,
            p.high,
            p.lower_better,
            p.paper_name,
        )


def test_other_metrics_use_pyiqa_ranges() -> None:
    assert (catalog()["entropy"].low, catalog()["entropy"].high) == (0.0, 8.0)
    assert catalog()["musiq-ava"].lower_better is False


@pytest.mark.parametrize(
    "name, why", [("fid", "set-based"), ("psnr", "full-reference"), ("lpips", "full-reference")]
)
def test_non_metrics_are_refused_with_a_reason(name: str, why: str) -> None:
    with pytest.raises(UnknownMetric, match=why):
        lookup(name)


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(UnknownMetric, match=r"unknown metric 'brisk'.*offline, all, .*brisque"):
        resolve("brisque,brisk")


def test_resolve_keeps_order_and_drops_duplicates() -> None:
    assert [s.name for s in resolve("piqe, BRISQUE,piqe")] == ["piqe", "brisque"]
    assert len(resolve("all")) == len(catalog())


def test_catalog_matches_the_installed_pyiqa() -> None:
    pyiqa = needs("pyiqa")
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    from metrics_under_test.pyiqa_catalog import SET_BASED, TEXT_CONDITIONED, parse_range

    nr = set(pyiqa.list_models(metric_mode="NR")) - set(SET_BASED) - set(TEXT_CONDITIONED)
    assert set(catalog()) - {m.metric for m in OUTSIDE_PYIQA} == nr
    table2 = {p.pyiqa_name for p in PAPER_METRICS}
    for name in nr - table2:
        cfg = DEFAULT_CONFIGS[name]
        spec = catalog()[name]
        assert spec.lower_better == cfg.get("lower_better", False), name
        assert (spec.low, spec.high) == parse_range(cfg["score_range"]), name


def test_offline_counts_files_in_the_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # a fresh machine: pyiqa's cache is empty
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    for name in ("brisque", "niqe", "ilniqe"):
        for w in catalog()[name].weights:
            (mirror / w.file).write_bytes(b"parameters")
    without = {s.name for s in resolve("offline")}
    with_mirror = {s.name for s in resolve("offline", mirror)}
    assert not without & {"brisque", "niqe", "ilniqe"} and {"piqe", "entropy"} <= without
    assert with_mirror - without == {"brisque", "niqe", "ilniqe"}


def test_a_relative_weights_dir_is_resolved_once_where_the_run_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shared" / "pyiqa-weights").mkdir(parents=True)
    (tmp_path / "main").mkdir()
    monkeypatch.chdir(tmp_path / "main")
    monkeypatch.setenv("BANANA_WEIGHTS_DIR", "../shared/pyiqa-weights")
    mirror = mirror_from_env()
    assert mirror == (tmp_path / "shared" / "pyiqa-weights").resolve() and mirror.is_dir()
    monkeypatch.chdir(tmp_path)  # a pytest started elsewhere inherits the absolute path
    assert os.environ["BANANA_WEIGHTS_DIR"] == str(mirror) and mirror_from_env() == mirror
    monkeypatch.setenv("BANANA_WEIGHTS_DIR", "")
    assert mirror_from_env() is None


def test_cost_classes_follow_the_measured_costs() -> None:
    """Every paper metric but Q-Align is measured, and its class in the catalog is the one its
    measured seconds give."""
    from metrics_under_test.pyiqa_catalog import cost_class
    from metrics_under_test.spec import cpu_seconds_2k

    measured = cpu_seconds_2k()
    assert set(measured) == {p.pyiqa_name for p in PAPER_METRICS} - {"qalign"}
    assert {name: catalog()[name].cost for name in measured} == {
        name: cost_class(name, seconds) for name, seconds in measured.items()
    }


def test_measured_beats_recorded_beats_guessed() -> None:
    from metrics_under_test.pyiqa_catalog import choose_cost

    assert choose_cost("nima", {"nima": 2.46}, {"nima": Cost.NEURAL}) is Cost.FAST  # a fast network
    assert choose_cost("niqe", {"niqe": 16.5}, {"niqe": Cost.FAST}) is Cost.SLOW  # classical, over 5 s
    assert choose_cost("dbcnn", {"dbcnn": 36.9}, {}) is Cost.NEURAL
    assert choose_cost("qalign", {"qalign": 1.0}, {}) is Cost.VLM
    assert choose_cost("maniqa", {}, {"maniqa": Cost.SLOW}) is Cost.SLOW  # recorded, not measured
    assert choose_cost("maniqa", {}, {}) is Cost.NEURAL and choose_cost("nrqm", {}, {}) is Cost.SLOW


def test_a_catalog_refresh_keeps_every_cost_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m metrics_under_test.pyiqa_catalog` rebuilds each row; the classes must survive
    (a refresh from fixed lists once turned the measured fast CNNIQA and NIMA back into neural)."""
    needs("pyiqa")
    from metrics_under_test import pyiqa_catalog

    monkeypatch.setattr(pyiqa_catalog, "first_download", lambda name: None)  # no metric built
    rebuilt = {m["name"]: m["cost"] for m in pyiqa_catalog.build()["metrics"]}
    assert rebuilt == pyiqa_catalog.recorded_costs()
