"""A suite run's settings: the one validator that turns every option into typed values.

Built at the boundary, from pytest's options (banana_tests.session.run_state) or the api's keyword
arguments, and passed down; nothing else reads, splits or re-checks an option, so the data,
scoring and verdict code takes plain values and runs without pytest. Error messages quote the
short spelling (`--steps`), the one the docs and the design card use.
"""

from __future__ import annotations

import argparse
import enum
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from banana_tests.core.machine import DeviceChoice, parse_device, refuse_url
from banana_tests.core.suite_options import DEFAULT_STEPS, dest_of, suite_options
from banana_tests.counts import MAX_SECONDS, decimal_number, whole_number
from banana_tests.data import EMBEDDED
from banana_tests.families.family import FamilySettings, Place
from banana_tests.families.family_list import FAMILIES
from banana_tests.scheduler.sharding import Shard, parse_shard
from banana_tests.scoring.metric_calls import DEFAULT_LOAD_LIMIT, Limit
from banana_tests.trajectories.case_plans import parse_steps
from banana_tests.trajectories.records import Artifact, parse_artifacts
from banana_tests.trajectories.row_records import parse_map
from banana_tests.trajectories.selection import Selection, parse_where
from banana_tests.trajectories.sources import DatasetFormat, SourceOptions, default_cache_dir
from metrics_under_test.registry import MetricRequest, metric_requests
from metrics_under_test.weights import mirror_from_env


class Aggregate(enum.StrEnum):
    MEAN = "mean"  # one case per seed image, on the run mean of raw scores
    PER_RUN = "per-run"  # one case per run


@dataclass(frozen=True)
class Settings:
    """What a suite run was asked for. Paths are absolute (relative ones are taken from the rootdir)."""

    metrics: tuple[MetricRequest, ...]  # as given, in order: names, module:callable targets, groups
    device: DeviceChoice
    weights_dir: Path | None  # read-only mirror of parameter files, staged into pyiqa's cache
    cache_dir: Path | None  # the persistent score cache; None: --no-cache
    source: SourceOptions
    selection: Selection
    aggregate: Aggregate
    max_pixels: int
    image_budget_mib: int
    baseline: Path | None
    strict_baseline: bool
    heartbeat: float | None  # seconds between "still scoring" lines of a long batch; None: never
    batch_timeout: float | None  # seconds a batch may take; None: no limit
    load_limit: Limit  # how long a metric's import, construction and probe may take
    shard: Shard | None  # this job's part of the suite (--shard=K/N); None: all of it
    narrowed: tuple[str, ...]  # the selection options, as typed, that keep only part of the data set
    import_dirs: tuple[Path, ...]  # where `module:callable` metrics import from (cwd, rootdir)
    command: str  # the run's command line, as the report's Run table shows it
    artifacts: tuple[Artifact, ...] = ()  # --artifact: the trial sets to build and test; (): none
    # each registered family's own settings, read by its package (banana_tests.families.family)
    families: Mapping[str, FamilySettings] = field(default_factory=dict)

    @property
    def per_run(self) -> bool:
        return self.aggregate is Aggregate.PER_RUN

    @property
    def embedded(self) -> bool:
        return not self.artifacts and Path(self.source.source) == EMBEDDED

    @classmethod
    def from_values(
        cls,
        value: Callable[[str], Any],
        rootdir: Path,
        invocation_dir: Path,
        ini: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        case_timeout: float | None = None,
    ) -> Settings:
        """From each option's value by its short name (`value("dataset-cache")`); ValueError
        naming the option for one that can never be satisfied. `case_timeout`: pytest-timeout's
        `--timeout`, the load limit when `--load-timeout` is not given; `ini`: pytest's values of
        the families' ini keys."""
        metrics = metric_requests(value("metric"))
        if not metrics:
            raise ValueError(f"--metric {value('metric')!r} names no metric")
        steps = steps_of(value("steps"))
        runs = None if value("runs") is None else whole_number("--runs", value("runs"), 1)
        max_pixels, image_budget = (
            whole_number(f"--{option}", value(option), 1) for option in ("max-pixels", "image-budget")
        )
        reference = whole_number("--reference-step", value("reference-step"), 0, what="a step number")
        if steps is not None and reference in steps:
            raise ValueError(
                f"--steps={steps_text(value('steps'))} includes the reference step {reference}: "
                "its Δ is 0 by definition, which can never pass"
            )
        place = Place(rootdir, ini or {})
        families = {family.name: family.read_settings(value, place) for family in FAMILIES}
        heartbeat = decimal_number(
            "--heartbeat", value("heartbeat"), 0, MAX_SECONDS, "a number of seconds (0: never)"
        )
        batch_timeout = seconds_of("--batch-timeout", value("batch-timeout"))
        load_limit = load_limit_of(seconds_of("--load-timeout", value("load-timeout")), case_timeout)
        refuse_url(
            "--cache-dir",
            value("cache-dir"),
            "the score cache is one local SQLite file (SQLite's WAL is unsafe on network filesystems: "
            "keep one cache per machine and merge them, docs/speed.md)",
        )
        for option in suite_options():
            if option.local_path:
                refuse_url(option.short, value(option.name))
        dataset = None if value("dataset") is None else str(value("dataset"))
        refuse_url("--dataset", dataset, "give a local folder or files, or hf:<repo_id> for the hub")
        image_cache, mirror, baseline = value("dataset-cache"), value("weights-dir"), value("baseline")
        artifacts = parse_artifacts(value("artifact")) if value("artifact") is not None else ()
        if artifacts and dataset:
            raise ValueError(
                f"--artifact={value('artifact')}: the trial sets are built from the embedded seed images; "
                f"leave out --dataset={dataset}"
            )
        source = SourceOptions(
            source=dataset or str(EMBEDDED),
            revision=value("dataset-revision"),
            split=value("dataset-split"),
            streaming=value("dataset-streaming"),
            format=DatasetFormat(value("dataset-format")),
            field_map=parse_map(value("dataset-map")),
            path_pattern=value("dataset-path-pattern"),
            cache_dir=Path(image_cache) if image_cache else default_cache_dir(),
        )
        selection = Selection(
            variant=value("variant"),
            seed_images=tuple(value("seed-image") or ()),
            where=parse_where(value("where")),
            runs=runs,
            steps=steps,
            reference_step=reference,
        )
        return cls(
            metrics=metrics,
            device=device_of(value("device")),
            weights_dir=Path(mirror) if mirror else mirror_from_env(),
            cache_dir=None if value("no-cache") else rootdir / value("cache-dir"),
            source=source,
            selection=selection,
            aggregate=Aggregate(value("aggregate")),
            max_pixels=max_pixels,
            image_budget_mib=image_budget,
            baseline=Path(baseline) if baseline else None,
            strict_baseline=value("strict-baseline"),
            heartbeat=heartbeat or None,
            batch_timeout=batch_timeout,
            load_limit=load_limit,
            shard=shard_of(value("shard")),
            narrowed=narrowing_options(value),
            import_dirs=tuple(dict.fromkeys((invocation_dir, rootdir))),
            command=shlex.join(["pytest", *args]),
            artifacts=artifacts,
            families=families,
        )


def load_limit_of(load_timeout: float | None, case_timeout: float | None) -> Limit:
    """`--load-timeout` when given, else pytest-timeout's `--timeout`, else LOAD_SECONDS."""
    if load_timeout is not None:
        return Limit(load_timeout, f"--load-timeout={load_timeout:g}")
    if case_timeout is not None:
        return Limit(case_timeout, f"--timeout={case_timeout:g}")
    return DEFAULT_LOAD_LIMIT


def seconds_of(option: str, given: object) -> float | None:
    """A time limit: None when not given, else above 0 and at most MAX_SECONDS (a week)."""
    if given is None:
        return None
    return decimal_number(option, given, 0, MAX_SECONDS, "a number of seconds", above_low=True)


def check_writable(option: str, path: Path) -> None:
    """ValueError unless a file can be written at `path` (its missing folders created): pytest
    writes the JUnit file only after the last case, so a run of hours ended in a traceback."""
    folder = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not folder.is_dir():  # (pytest itself refuses a path that is a folder)
        problem = f"{folder} is a file, not a folder"
    elif not os.access(path if path.exists() else folder, os.W_OK):
        problem = f"{path if path.exists() else folder} is not writable"
    else:
        return
    raise ValueError(f"{option}={path}: cannot write the report there: {problem}")


def narrowing_options(value: Callable[[str], Any]) -> tuple[str, ...]:
    """The options, as typed, that select only part of the data set's records."""
    steps = value("steps")
    given = {
        "--seed-image": value("seed-image"),
        "--where": value("where"),
        "--runs": value("runs"),
        "--steps": steps_text(steps) if steps_of(steps) != steps_of(DEFAULT_STEPS) else None,
    }
    out = []
    for option, chosen in given.items():
        for v in [] if chosen is None else [chosen] if isinstance(chosen, str | int) else chosen:
            out.append(f"{option}={v}")
    return tuple(out)


def steps_of(given: str | Sequence[int] | None) -> tuple[int, ...] | None:
    """`--steps` as typed (`5,10,20`, `all`) or as step numbers (the api's; None: every step),
    sorted without duplicates; ValueError naming the option for anything else."""
    if isinstance(given, str):
        parsed = parse_steps(given)
        return None if parsed is None else tuple(parsed)
    if given is None:
        return None
    steps = tuple(sorted({whole_number("--steps", s, 0, what="a step number") for s in given}))
    if not steps:
        raise ValueError("--steps takes step numbers or 'all', got none")
    return steps


def steps_text(given: str | Sequence[int] | None) -> str:
    """`--steps` as the command line writes it: as typed, or the api's step numbers."""
    if isinstance(given, str):
        return given
    steps = steps_of(given)
    return "all" if steps is None else ",".join(map(str, steps))


def device_of(given: str | DeviceChoice) -> DeviceChoice:
    """`--device` as typed (a Device is one of its words) or the api's DeviceChoice."""
    return given if isinstance(given, DeviceChoice) else parse_device(str(given))


def shard_of(given: str | Shard | None) -> Shard | None:
    """`--shard` as typed (`K/N`) or the api's Shard."""
    return given if isinstance(given, Shard) or given is None else parse_shard(given)


def settings_from_args(args: Sequence[str] = (), rootdir: Path | None = None) -> Settings:
    """The settings `pytest ARGS` would give a suite run (short spellings), without pytest: for
    scripts and tests that drive the suite's code directly."""
    parser = argparse.ArgumentParser(prog="pytest")
    for option in suite_options():
        parser.add_argument(option.short, dest=option.dest, **option.attrs)
    namespace = parser.parse_args(list(args))
    root = rootdir or Path.cwd()
    return Settings.from_values(lambda name: getattr(namespace, dest_of(name)), root, root, args=args)
