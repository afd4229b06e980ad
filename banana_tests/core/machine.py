"""This machine as a suite run meets it: the device a process scores on, the local paths its
options name, and the installed versions of the packages behind the run.

`--device` is typed (auto, cpu, cuda, cuda:N) and resolved here, each xdist worker taking a GPU of
its own, so `-n k` on k GPUs uses every one instead of piling onto cuda:0. Every option that names
a local file or folder, of pytest and of every `banana-tests` command, goes through `refuse_url`
or `local_path`: taken as a path, `s3://bucket/y` is the local folder `./s3:/bucket/y`, and
`cache merge --into` wrote one and exited 0. The versions (the suite's own, the backends its
metrics ran on, the libraries its custom metrics import) are read from package metadata, so
nothing heavy (torch, pyiqa) is imported to learn them.
"""

from __future__ import annotations

import argparse
import enum
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from metrics_under_test.protocol import MetricError
from metrics_under_test.spec import Backend, MetricSpec

_DEVICE = re.compile(r"^(?P<kind>auto|cpu|cuda)(?::(?P<index>\d+))?$")
_WORKER = re.compile(r"^gw(?P<index>\d+)$")


class Device(enum.StrEnum):
    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"


@dataclass(frozen=True)
class DeviceChoice:
    """`--device`: a kind, and for `cuda:N` the GPU the user pinned every process to."""

    kind: Device
    index: int | None = None

    def __str__(self) -> str:
        return self.kind.value if self.index is None else f"{self.kind.value}:{self.index}"


def parse_device(text: str) -> DeviceChoice:
    """`auto`, `cpu`, `cuda` or `cuda:N`; ValueError naming the option otherwise."""
    m = _DEVICE.match(text.strip().lower())
    if m is None or (m["index"] is not None and m["kind"] != Device.CUDA):
        raise ValueError(f"--device takes auto, cpu, cuda or cuda:N (N a GPU index, as cuda:1), got {text!r}")
    return DeviceChoice(Device(m["kind"]), None if m["index"] is None else int(m["index"]))


def worker_index(worker: str | None) -> int | None:
    """N of xdist's worker name `gwN` ($PYTEST_XDIST_WORKER); None in a serial run or the controller."""
    m = _WORKER.match(worker or "")
    return None if m is None else int(m["index"])


def gpu_for(choice: DeviceChoice, worker: int | None, visible: int) -> str:
    """The GPU a process scores on, among `visible` ones: `cuda:N` as pinned; otherwise worker i
    takes cuda:(i mod visible), a serial run cuda:0. RuntimeError for a pinned GPU that is not
    there, or none at all."""
    if visible < 1:
        raise RuntimeError(f"--device={choice}: no GPU visible to torch")
    if choice.index is not None:
        if choice.index >= visible:
            raise RuntimeError(
                f"--device={choice}: this machine shows torch {visible} GPU(s), cuda:0 to cuda:{visible - 1}"
            )
        return f"cuda:{choice.index}"
    return f"cuda:{(worker or 0) % visible}"


def no_cuda(device: DeviceChoice) -> str:
    return f"--device={device}: CUDA is not available on this machine; use --device=cpu or --device=auto"


def resolve_device(device: DeviceChoice) -> str:
    """The device this process scores on: `auto` → a GPU when available, else cpu; with GPUs,
    this xdist worker's (`gpu_for`); asking for cuda where there is none is an error. Without a
    GPU driver the answer is cpu without importing torch, so a fully cached run never loads it."""
    if device.kind is Device.CPU or (device.kind is Device.AUTO and not gpu_driver_loaded()):
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        if device.kind is Device.AUTO:
            return "cpu"
        raise RuntimeError(no_cuda(device))
    return gpu_for(device, worker_index(os.environ.get("PYTEST_XDIST_WORKER")), torch.cuda.device_count())


def gpu_driver_loaded() -> bool:
    """An NVIDIA or ROCm kernel driver is loaded; torch cannot see a GPU without one."""
    return Path("/proc/driver/nvidia/version").exists() or Path("/dev/kfd").exists() or os.name != "posix"


URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
"""`scheme://...`; two letters or more, so a Windows drive (`C:/`) stays a path."""
WHY = "a local path is needed (copy the files here first, or mount the storage)"


def refuse_url(option: str, value: str | Path | None, why: str = WHY) -> None:
    """ValueError naming `option` when `value` is a URL."""
    if value is not None and URL.match(str(value)):
        raise ValueError(f"{option}={value}: a URL is not supported; {why}")


def local_path(text: str) -> Path:
    """An argparse `type` for a path argument: argparse names the option in the error."""
    if URL.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a URL; {WHY}")
    return Path(text)


SUITE = "banana-tests"
BACKEND_PACKAGES: dict[Backend, tuple[str, ...]] = {
    Backend.PYIQA: ("pyiqa", "torch"),
    Backend.VLM: ("pyiqa", "torch", "transformers"),
}
"""What each built-in backend runs on; a custom metric's libraries are `metric_libraries`."""


def run_versions(specs: Iterable[MetricSpec]) -> str:
    """`package_versions` of the suite and of the backends of the metrics `specs` only."""
    names = [SUITE, *(name for spec in specs for name in BACKEND_PACKAGES.get(spec.backend, ()))]
    return package_versions(tuple(dict.fromkeys(names)))


@cache
def package_versions(names: tuple[str, ...] = (SUITE,)) -> str:
    """`name version` for each installed package, joined by "; "; missing packages are left out."""
    found = []
    for name in names:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    return "; ".join(found)


def metric_libraries(specs: Iterable[MetricSpec]) -> str:
    """`name version` of every installed distribution the custom metrics' code imports (the
    versions their score cache keys hold), joined by "; "; empty when no custom metric has one.
    A metric that cannot be imported errors its own cases: it adds nothing here."""
    from metrics_under_test import custom

    found: dict[str, str] = {}
    for spec in specs:
        if spec.backend is Backend.CUSTOM:
            try:
                found.update(custom.libraries(spec))
            except MetricError:
                continue
    return "; ".join(f"{name} {found[name]}" for name in sorted(found))
