"""The suite's options, added the same way to pytest and to the `banana-tests` CLI."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

DEFAULT_METRICS = "brisque,niqe,piqe"
DEFAULT_STEPS = "5,10,20"

AddOption = Callable[..., Any]


def add_data_options(addoption: AddOption) -> None:
    """Which trajectories and which cases."""
    addoption(
        "--dataset",
        default=None,
        metavar="PATH",
        help="trajectory set: a folder with metadata.jsonl (default: the embedded emulated set)",
    )
    addoption("--variant", default="replicate", help="trajectory variant to test (default: replicate)")
    addoption(
        "--steps",
        default=DEFAULT_STEPS,
        help=f"comma list of steps i to test Δi at, or 'all' (default: {DEFAULT_STEPS})",
    )
    addoption(
        "--reference-step",
        type=int,
        default=1,
        metavar="N",
        help="the step Δ is measured against (default: 1; the first output, as in the paper)",
    )
    addoption(
        "--aggregate",
        choices=("mean", "per-run"),
        default="mean",
        help="mean: one case per seed image on the run mean of raw scores (default); per-run: one per run",
    )


def add_metric_options(addoption: AddOption) -> None:
    """Which metrics, where they run, where their parameters come from."""
    addoption(
        "--metric",
        default=DEFAULT_METRICS,
        metavar="NAMES",
        help=f"comma list of metric names, 'offline' (weights present) or 'all' (default: {DEFAULT_METRICS})",
    )
    addoption(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where metrics run (default: auto, CUDA when available)",
    )
    addoption(
        "--weights-dir",
        default=os.environ.get("BANANA_WEIGHTS_DIR"),
        metavar="DIR",
        help="read-only mirror of pyiqa parameter files, linked into pyiqa's cache as needed "
        "(default: $BANANA_WEIGHTS_DIR)",
    )
