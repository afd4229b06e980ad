"""Every GPU: `--device=cuda:N` is accepted, and under xdist worker gwI takes GPU I mod k of the k
visible ones (the count simulated: `gpu_for` takes it as an argument). The run facts name the
device each worker used."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from banana_tests.core.machine import Device, DeviceChoice, gpu_for, parse_device, worker_index
from banana_tests.core.run_facts import devices_fact
from banana_tests.core.settings import settings_from_args
from tests.conftest import suite_folder
from tests.known_metrics import install_known_metrics


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("auto", DeviceChoice(Device.AUTO)),
        ("cpu", DeviceChoice(Device.CPU)),
        ("cuda", DeviceChoice(Device.CUDA)),
        ("cuda:0", DeviceChoice(Device.CUDA, 0)),
        ("cuda:12", DeviceChoice(Device.CUDA, 12)),
        ("CUDA:1", DeviceChoice(Device.CUDA, 1)),
    ],
)
def test_device_option_is_parsed(typed: str, expected: DeviceChoice) -> None:
    assert settings_from_args([f"--device={typed}"]).device == expected
    assert str(expected) == typed.lower()


@pytest.mark.parametrize("typed", ["cuda:x", "cuda:", "cuda:-1", "cpu:0", "auto:1", "gpu", "cuda:0:1"])
def test_a_device_that_is_none_of_the_forms_is_refused_naming_the_option(typed: str) -> None:
    with pytest.raises(ValueError, match=r"--device takes auto, cpu, cuda or cuda:N .*got '" + typed):
        parse_device(typed)


@pytest.mark.parametrize(
    ("worker", "index"), [("gw0", 0), ("gw7", 7), ("gw12", 12), (None, None), ("", None), ("main", None)]
)
def test_the_worker_index_comes_from_xdists_worker_name(worker: str | None, index: int | None) -> None:
    assert worker_index(worker) == index


@pytest.mark.parametrize(
    ("visible", "expected"),
    [
        (1, ["cuda:0", "cuda:0", "cuda:0", "cuda:0", "cuda:0"]),
        (2, ["cuda:0", "cuda:0", "cuda:1", "cuda:0", "cuda:1"]),
        (3, ["cuda:0", "cuda:0", "cuda:1", "cuda:2", "cuda:0"]),
        (8, ["cuda:0", "cuda:0", "cuda:1", "cuda:2", "cuda:3"]),
    ],
)
def test_worker_i_takes_gpu_i_mod_k(visible: int, expected: list[str]) -> None:
    workers = [None, 0, 1, 2, 3]  # a serial run, then gw0 to gw3
    for kind in (Device.CUDA, Device.AUTO):
        assert [gpu_for(DeviceChoice(kind), w, visible) for w in workers] == expected


def test_a_pinned_gpu_is_every_workers_and_must_be_visible() -> None:
    assert {gpu_for(DeviceChoice(Device.CUDA, 1), w, 2) for w in (None, 0, 1, 2)} == {"cuda:1"}
    with pytest.raises(
        RuntimeError, match=r"--device=cuda:2: this machine shows torch 2 GPU\(s\), cuda:0 to cuda:1"
    ):
        gpu_for(DeviceChoice(Device.CUDA, 2), 0, 2)
    with pytest.raises(RuntimeError, match="--device=cuda: no GPU visible to torch"):
        gpu_for(DeviceChoice(Device.CUDA), 0, 0)


def test_the_run_facts_name_each_workers_device() -> None:
    assert devices_fact({"gw0": "cpu", "gw1": "cpu"}) == "cpu"
    two_gpus = {"gw10": "cuda:0", "gw1": "cuda:1", "gw0": "cuda:0", "gw2": "cuda:0"}
    assert devices_fact(two_gpus) == "gw0 cuda:0, gw1 cuda:1, gw2 cuda:0, gw10 cuda:0"


@pytest.mark.slow
def test_workers_report_their_device_to_the_run_facts(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite_folder(pytester, monkeypatch, seeds=("alpha", "beta"), runs=(0,), steps=(1, 5, 10, 20))
    module = install_known_metrics(pytester.path)
    result = pytester.runpytest_subprocess(
        "--dataset=data", f"--metric={module}:noise_level", "-n", "2", "--device=cpu", "--no-cache",
        "--junitxml=j.xml", "-o", "junit_family=xunit1",
    )  # fmt: skip
    result.assert_outcomes(passed=6)
    suite = ET.parse(pytester.path / "j.xml").find("testsuite")
    assert suite is not None
    facts = {p.get("name"): p.get("value") for p in suite.iterfind("properties/property")}
    assert facts["device"] == "cpu"  # as the two workers reported it
