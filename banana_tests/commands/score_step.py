"""The scoring step outside pytest (docs/cluster.md): `banana-tests score` fills a score cache
(banana_tests.api), so a verdict pass with the same options and `--cache-dir` builds no model and
scores nothing; `banana-tests plan` says what that costs before it starts, for the same
selection, building no metric and importing no torch (it reads only the images' headers, or none
with --assume-size); `banana-tests cache merge A B ... --into C` joins caches made on several
machines."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from banana_tests.core.machine import local_path
from banana_tests.core.suite_options import SuiteOption
from banana_tests.counts import decimal_number_type, whole_number_type
from banana_tests.trajectories.records import DataError, Record

MAX_JOB_HOURS = 720.0  # 30 days
MAX_JOB_CORES = 1024
_SIZE = re.compile(r"^(?P<w>[1-9]\d*)x(?P<h>[1-9]\d*)$")


def selection_options() -> list[SuiteOption]:
    """`score`'s options but the cache: a plan opens none."""
    return [o for o in scoring_options() if o.name != "cache-dir"]


def _add_plan(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "plan",
        help="the images, CPU-hours and shard count of a selection, before scoring it",
        description="Each metric's images to score for the suite's Δ cases of this selection, their "
        "CPU-hours from the per-image costs `banana-tests metrics` shows (scaled by each image's "
        "pixels), and the fewest --shard=K/N jobs of --job-cores cores whose slowest fits --job-hours. "
        "Exit 0; 1: an image cannot be read, or a record cannot be used (a path that escapes the set, a bad "
        "line) (named, one line each; its cases would error, and the plan counts the others); 2: bad "
        "options or data set.",
    )
    for option in selection_options():
        p.add_argument(option.short, dest=option.dest, **option.attrs)
    p.add_argument(
        "--job-hours",
        type=decimal_number_type(0, MAX_JOB_HOURS, above_low=True),
        default=6.0,
        help=f"a job's time limit in hours, above 0 and at most {MAX_JOB_HOURS:g} (default 6)",
    )
    p.add_argument(
        "--job-cores",
        type=whole_number_type(1, MAX_JOB_CORES),
        default=2,
        help=f"cores, so xdist workers, per job, 1 to {MAX_JOB_CORES} (default 2)",
    )
    p.add_argument(
        "--assume-size",
        metavar="WxH",
        help="count every image as W×H pixels instead of reading its header (plan before the images exist)",
    )
    p.set_defaults(func=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    from banana_tests.api import ScoreSetupError, selection_to_score, settings_from_options
    from banana_tests.scheduler.sharding import Unit, plan_cost
    from metrics_under_test.spec import cpu_seconds_2k

    values = {o.name: getattr(args, o.dest) for o in selection_options()}
    try:
        size = _size(args.assume_size)
        settings = settings_from_options({**values, "no-cache": True}, Path.cwd())
        groups, problems = selection_to_score(settings)
    except ScoreSetupError as exc:
        print(f"banana-tests plan: error: {exc}", file=sys.stderr)
        return 2
    for problem in problems:  # their cases would error: named, one line each, as an unreadable image
        print(f"banana-tests plan: unusable record: {problem}", file=sys.stderr)
    pixels = _Pixels(settings.max_pixels, size)
    units = [Unit(metric, seed, pixels.readable(records)) for (metric, seed), records in groups.items()]
    plan = plan_cost(units, cpu_seconds_2k(), args.job_hours, args.job_cores)
    seeds = len({u.seed_image for u in units})
    print(f"banana-tests plan: {len(plan.metrics)} metric(s), {seeds} seed image(s), {len(units)} units")
    for line in plan.lines():
        print(line)
    return 1 if pixels.unreadable or problems else 0


def _size(text: str | None) -> int | None:
    from banana_tests.api import ScoreSetupError

    if text is None:
        return None
    m = _SIZE.match(text.strip())
    if m is None:
        raise ScoreSetupError(f"--assume-size takes WxH in pixels (e.g. 2048x1152), got {text!r}")
    return int(m["w"]) * int(m["h"])


class _Pixels:
    """Each record's pixels (`assumed`, or its image's header, read once whatever the metrics that
    need it). A record whose file cannot be read (banana_tests.trajectories.images.header_pixels)
    is named in one line on stderr, once, and left out: its cases would error, scoring nothing."""

    def __init__(self, max_pixels: int, assumed: int | None) -> None:
        self.max_pixels, self.assumed = max_pixels, assumed
        self.known: dict[Record, int] = {}
        self.unreadable = 0

    def readable(self, records: list[Record]) -> tuple[int, ...]:
        return tuple(n for n in map(self.of, records) if n)

    def of(self, record: Record) -> int:
        from banana_tests.trajectories.images import header_pixels

        if self.assumed is not None:
            return self.assumed
        if record not in self.known:
            try:
                self.known[record] = header_pixels(record, self.max_pixels)
            except DataError as exc:
                print(f"banana-tests plan: DataError: {exc}", file=sys.stderr)
                self.known[record] = 0
                self.unreadable += 1
        return self.known[record]


NOT_SCORING = frozenset({"suite", "aggregate", "no-cache"})
"""Suite options that choose tests or verdicts, not the images scored; the gate's options too."""


def scoring_options() -> list[SuiteOption]:
    """The suite's data and metric options that choose what is scored, as the suite defines them."""
    from banana_tests.core.suite_options import add_data_options, add_metric_options

    found: list[SuiteOption] = []
    for add in (add_data_options, add_metric_options):
        add(lambda short, **attrs: found.append(SuiteOption(short, attrs)))
    return [o for o in found if o.name not in NOT_SCORING]


def _add_score(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "score",
        help="fill a score cache for a selection, without pytest (docs/cluster.md)",
        description="Score every image the suite's Δ cases of this selection need, with each metric, "
        "into --cache-dir, plus the oracle's PSNR/SSIM figures. A later `pytest --pyargs banana_tests` "
        "with the same options and --cache-dir builds no model for them. Exit 0: every image scored "
        "(or cached); 1: an image or a named metric could not be scored, or a record cannot be used "
        "(a path that escapes the set, a bad line) (listed); 2: bad options or data set.",
    )
    for option in scoring_options():
        p.add_argument(option.short, dest=option.dest, **option.attrs)
    p.set_defaults(func=run_score)


def run_score(args: argparse.Namespace) -> int:
    from banana_tests.api import Progress, ScoreSetupError, score_selection, settings_from_options

    def progress(step: Progress) -> None:
        print(
            f"banana-tests score: [{step.done}/{step.total}] {step.metric} {step.seed_image}: "
            f"{step.images} images ({step.seconds:.1f} s)",
            file=sys.stderr,
            flush=True,
        )

    values = {o.name: getattr(args, o.dest) for o in scoring_options()}
    try:
        summary = score_selection(settings_from_options(values, Path.cwd()), progress)
    except ScoreSetupError as exc:
        print(f"banana-tests score: error: {exc}", file=sys.stderr)
        return 2
    for problem in summary.problems:  # their cases would error, as in pytest
        print(f"banana-tests score: unusable record: {problem}", file=sys.stderr)
    for line in summary.lines():
        print(line)
    print(f"{summary.cache} in {summary.seconds:.1f} s")
    return 0 if summary.complete else 1


def _add_cache(subparsers: Any) -> None:
    p = subparsers.add_parser("cache", help="the persistent score cache")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    merge = actions.add_parser(
        "merge",
        help="copy the scores of caches A, B, ... into C (docs/cluster.md)",
        description="Copy every score of the caches given (folders as --cache-dir names them, or "
        "their scores.sqlite) into the cache folder --into, created if missing, in one transaction. "
        "Running it again changes nothing. Exit 0: merged; 1: the same image and metric with two "
        "different scores (named; nothing is written); 2: a source that is no score cache, or that holds a "
        "value that is no score (text, or beyond the score bound), or a loaded_libraries.json that is no "
        "memo (named, nothing is written). What each metric loads (loaded_libraries.json) is merged too.",
    )
    merge.add_argument("sources", nargs="+", type=local_path, metavar="CACHE")
    merge.add_argument(
        "--into", required=True, type=local_path, metavar="DIR", help="the cache folder to fill"
    )
    merge.set_defaults(func=run_merge)


def run_merge(args: argparse.Namespace) -> int:
    from banana_tests.scoring.score_cache import MergeConflict, MergeError, merge

    try:
        merged = merge(args.sources, args.into)
    except MergeConflict as exc:
        print(f"banana-tests cache merge: {exc}", file=sys.stderr)
        return 1
    except MergeError as exc:
        print(f"banana-tests cache merge: error: {exc}", file=sys.stderr)
        return 2
    print(f"{merged.added} new scores into {merged.into} ({merged.known} already there)")
    return 0


def add_parser(subparsers: Any) -> None:
    """`score`, `plan` and `cache`, in that order in `--help`."""
    for add in (_add_score, _add_plan, _add_cache):
        add(subparsers)
