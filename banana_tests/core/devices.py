"""Where a suite process scores: `--device` as typed (auto, cpu, cuda, cuda:N), the device it
resolves to on this machine, and which GPU each xdist worker takes, so `-n k` on k GPUs uses
every one instead of piling onto cuda:0."""

from __future__ import annotations

import enum
import os
import re
from dataclasses import dataclass
from pathlib import Path

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
