"""The suite's options, added the same way to pytest and to the `banana-tests` CLI.

They are written here by their short spelling (`--metric`), the suite's own vocabulary and the
CLI's. In pytest every option is registered as `--banana-metric` (dest `banana_metric`), as
syrupy (`--snapshot-*`) and hypothesis (`--hypothesis-*`) do, so it can never clash with a
user's conftest or another plugin; the short spellings are aliases where they are free
(banana_tests.session.ownership).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from banana_tests.families.family import AddOption
from banana_tests.families.family_list import FAMILIES
from banana_tests.scheduler.sharding import MAX_SHARDS
from banana_tests.trajectories.sources import DatasetFormat
from metrics_under_test.registry import DEFAULT_METRICS, option_text

DEFAULT_METRIC_OPTION = option_text(DEFAULT_METRICS)
DEFAULT_STEPS = "5,10,20"
PREFIX = "--banana-"
LOCAL_PATHS = ("DIR", "FILE")
"""The metavars of options that take a local path (no URL)."""


@dataclass(frozen=True)
class SuiteOption:
    """One of the suite's options: its short spelling and argparse attributes."""

    short: str  # e.g. "--metric"
    attrs: dict[str, Any] = field(hash=False, compare=False)

    @property
    def name(self) -> str:
        return self.short.removeprefix("--")

    @property
    def long(self) -> str:
        """The spelling that always works in pytest: `--banana-metric`."""
        return PREFIX + self.name

    @property
    def local_path(self) -> bool:
        """It takes a local file or folder (`LOCAL_PATHS`)."""
        return self.attrs.get("metavar") in LOCAL_PATHS

    @property
    def dest(self) -> str:
        """Where pytest keeps its value: `banana_metric`, whichever spelling was given."""
        return dest_of(self.name)


def dest_of(name: str) -> str:
    """The pytest dest of the suite option `name` (short name without dashes, e.g. `metric`)."""
    return "banana_" + name.removeprefix("--").replace("-", "_")


def suite_options() -> tuple[SuiteOption, ...]:
    """Every option of a suite run, in the order `--help` lists them."""
    found: list[SuiteOption] = []
    for add in (add_data_options, add_metric_options, add_gate_options):
        add(lambda short, **attrs: found.append(SuiteOption(short, attrs)))
    return tuple(found)


def add_namespaced(addoption: AddOption, options: Iterable[SuiteOption]) -> None:
    """Register each option under its `--banana-` spelling."""
    for option in options:
        addoption(option.long, dest=option.dest, **option.attrs)


def add_data_options(addoption: AddOption) -> None:
    """Which trajectories and which cases."""
    addoption(
        "--suite",
        action="store_true",
        default=False,
        help="add the installed suite's tests to the paths given, from any folder: "
        "`pytest tests --banana-suite --metric=brisque` runs your tests and the suite together",
    )
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
        choices=[f.value for f in DatasetFormat],
        default=DatasetFormat.AUTO.value,
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
        "--runs",
        default=None,
        metavar="N",
        help="use at most the first N runs of each image (N >= 1)",
    )
    addoption(
        "--max-pixels",
        default=64_000_000,
        metavar="N",
        help="refuse images with more pixels than this (decompression bombs; N >= 1; default: 64000000)",
    )
    addoption(
        "--image-budget",
        default=512,
        metavar="MIB",
        help="decoded images kept for reuse across metrics, in MiB (MIB >= 1; default: 512)",
    )
    for family in FAMILIES:  # each family's own, as its package defines them
        family.add_options(addoption)
    addoption("--variant", default="replicate", help="trajectory variant to test (default: replicate)")
    addoption(
        "--artifact",
        default=None,
        metavar="NAME[,NAME...]",
        help="test the per-artifact trial sets instead of the embedded set: replicate, soften, "
        "resynthesis, tint, static, scatter, or all (built from the shipped seeds on first use)",
    )
    addoption(
        "--steps",
        default=DEFAULT_STEPS,
        help=f"comma list of steps i to test Δi at, or 'all' (default: {DEFAULT_STEPS})",
    )
    addoption(
        "--reference-step",
        default=1,
        metavar="N",
        help="the step Δ is measured against (N >= 0; default: 1; the first output, as in the paper)",
    )
    addoption(
        "--shard",
        default=None,
        metavar="K/N",
        help=f"run shard K of N (1 <= K <= N <= {MAX_SHARDS}): every N-th (metric, seed image) group of "
        "the selection, "
        "a metric's controls, invariance and snapshot cases in one shard only; -k and --lf narrow "
        "it after dealing; a shard dealt none exits 0. Merge the JUnit files with `banana-tests "
        "report`, which checks that every planned case ran once, in runs of the same options",
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
        default=DEFAULT_METRIC_OPTION,
        metavar="NAMES",
        help="comma list of metric names, 'offline' (weights present) or 'all' "
        f"(default: {DEFAULT_METRIC_OPTION})",
    )
    addoption(
        "--device",
        default="auto",
        metavar="DEVICE",
        help="where metrics run: auto, cpu, cuda or cuda:N (default: auto, CUDA when available); "
        "under xdist, with cuda or auto, worker gwI takes GPU I mod the visible GPUs; cuda:N puts "
        "every process on GPU N",
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
    addoption(
        "--heartbeat",
        default="30",
        metavar="SECONDS",
        help="while one batch of images is scored longer than this, print a line this often naming "
        "the metric, the batch size and the time so far (default: 30; 0: never; at most a week, 604800)",
    )
    addoption(
        "--batch-timeout",
        default=None,
        metavar="SECONDS",
        help="stop a metric's batch of images after this long: those images' cases error, naming "
        "the limit, and the other batches still run (above 0, at most a week, 604800; default: no limit)",
    )
    addoption(
        "--load-timeout",
        default=None,
        metavar="SECONDS",
        help="stop a metric whose import, construction or load-time probe takes longer: it is hung "
        "for the run and its cases error at once (above 0, at most a week, 604800; default: pytest-timeout's "
        "--timeout, else 600)",
    )


def add_weights_option(addoption: AddOption) -> None:
    """Where offline parameter files come from; `banana-tests metrics` reads the same option."""
    addoption(
        "--weights-dir",
        default=None,
        metavar="DIR",
        help="read-only mirror of pyiqa parameter files, hard-linked (or copied) into pyiqa's cache as "
        "needed (default: $BANANA_WEIGHTS_DIR)",
    )


def add_gate_options(addoption: AddOption) -> None:
    """How a run is gated in CI: against a failure baseline, and how its verdicts are read."""
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
