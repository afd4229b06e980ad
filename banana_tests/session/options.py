"""The suite's options, added the same way to pytest and to the `banana-tests` CLI."""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from metrics_under_test.weights import mirror_from_env

DEFAULT_METRICS = "brisque,niqe,piqe"
DEFAULT_STEPS = "5,10,20"
# Options whose value is a path: written `--opt /path`, pytest takes the path as a test path.
PATH_OPTIONS = (
    "--dataset",
    "--dataset-cache",
    "--weights-dir",
    "--baseline",
    "--cache-dir",
    "--snapshot-dir",
)

AddOption = Callable[..., Any]


def add_data_options(addoption: AddOption) -> None:
    """Which trajectories and which cases."""
    addoption(
        "--dataset",
        default=None,
        metavar="SOURCE",
        help="trajectory set: a folder with metadata.jsonl, hf:<repo_id>, or local parquet/csv/json/"
        "imagefolder files (default: the embedded emulated set)",
    )
    addoption("--dataset-revision", default=None, metavar="REV", help="hub revision (branch, tag, commit)")
    addoption("--dataset-split", default="train", metavar="SPLIT", help="split to read (default: train)")
    addoption(
        "--dataset-streaming",
        action="store_true",
        default=False,
        help="stream a hub set instead of downloading it whole (local files are always streamed)",
    )
    addoption(
        "--dataset-format",
        choices=("auto", "canonical", "imagefolder", "parquet", "csv", "json"),
        default="auto",
        help="how to read a local SOURCE (default: auto; canonical = the fast metadata.jsonl reader)",
    )
    addoption(
        "--dataset-map",
        default=None,
        metavar="KEY=COL,...",
        help="columns of seed_image, step, run, variant (and image), e.g. seed_image=scene,step=turn",
    )
    addoption(
        "--dataset-path-pattern",
        default=None,
        metavar="REGEX",
        help="named groups seed_image, run, step, variant taken from each image path",
    )
    addoption(
        "--dataset-cache",
        default=None,
        metavar="DIR",
        help="where images that come as bytes are written once (default: $BANANA_CACHE_DIR or "
        "~/.cache/banana-tests/images)",
    )
    addoption(
        "--seed-image",
        action="append",
        default=[],
        metavar="NAME",
        help="test only this seed image (repeatable)",
    )
    addoption(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keep records whose metadata KEY equals VALUE, e.g. temperature=0.4 (repeatable)",
    )
    addoption(
        "--runs", type=int, default=None, metavar="N", help="use at most the first N runs of each image"
    )
    addoption(
        "--max-pixels",
        type=int,
        default=64_000_000,
        metavar="N",
        help="refuse images with more pixels than this (decompression bombs; default: 64000000)",
    )
    addoption(
        "--image-budget",
        type=int,
        default=512,
        metavar="MIB",
        help="decoded images kept for reuse across metrics, in MiB (default: 512)",
    )
    addoption(
        "--trend",
        action="store_true",
        default=False,
        help="also test, per metric and seed image, the Spearman trend over all steps selected",
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
    add_weights_option(addoption)
    addoption(
        "--cache-dir",
        default=".banana_cache",
        metavar="DIR",
        help="persistent score cache (SQLite), relative to the rootdir (default: .banana_cache)",
    )
    addoption(
        "--no-cache",
        action="store_true",
        default=False,
        help="score everything afresh and leave the score cache alone",
    )


def add_weights_option(addoption: AddOption) -> None:
    """Where offline parameter files come from; `banana-tests metrics` reads the same option."""
    addoption(
        "--weights-dir",
        default=mirror_from_env(),
        metavar="DIR",
        help="read-only mirror of pyiqa parameter files, linked into pyiqa's cache as needed "
        "(default: $BANANA_WEIGHTS_DIR)",
    )


def spaced_path_options(args: Sequence[str]) -> list[str]:
    """`--opt=value` for each path option given as `--opt value` whose value is an existing path,
    in `args` or $PYTEST_ADDOPTS: pytest chose its rootdir from such a value, before the plugin's
    options were known, and outside the project it then collects the whole folder."""
    given = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *args]
    return [
        f"{option}={value}"
        for option, value in itertools.pairwise(given)
        if option in PATH_OPTIONS and Path(value).exists()
    ]


def add_gate_options(addoption: AddOption) -> None:
    """How a run is gated in CI: against a failure baseline and against score snapshots."""
    addoption(
        "--baseline",
        default=None,
        metavar="FILE",
        help="failure baseline (JSON from `banana-tests report --write-baseline`): its cells are "
        "expected failures; a new failure fails the run",
    )
    addoption(
        "--strict-baseline",
        action="store_true",
        default=False,
        help="with --baseline: a baseline cell that now passes fails the run (strict xfail)",
    )
    addoption(
        "--snapshot-dir",
        default=None,
        metavar="DIR",
        help="where an installed suite writes score snapshots, relative to the rootdir (default: "
        "ini banana_snapshot_dir, else banana_snapshots); the shipped ones are only read",
    )
    addoption(
        "--snapshot-rtol",
        type=float,
        default=1e-3,
        metavar="RTOL",
        help="relative tolerance of score snapshots (default: 1e-3); scores within 0.1 normalised "
        "points of the snapshot match too",
    )
