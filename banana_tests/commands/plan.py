"""`banana-tests plan`: a run's cost before it starts (banana_tests.scheduler.cost_plan), for
the same selection `banana-tests score` and the suite take. Builds no metric, imports no torch;
reads only the images' headers (or none, with --assume-size)."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from banana_tests.commands.score import scoring_options
from banana_tests.core.suite_options import SuiteOption
from banana_tests.counts import decimal_number_type, whole_number_type
from banana_tests.trajectories.records import DataError, Record

MAX_JOB_HOURS = 720.0  # 30 days
MAX_JOB_CORES = 1024
_SIZE = re.compile(r"^(?P<w>[1-9]\d*)x(?P<h>[1-9]\d*)$")


def selection_options() -> list[SuiteOption]:
    """`score`'s options but the cache: a plan opens none."""
    return [o for o in scoring_options() if o.name != "cache-dir"]


def add_parser(subparsers: Any) -> None:
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from banana_tests.api import ScoreSetupError, selection_to_score, settings_from_options
    from banana_tests.scheduler.cost_plan import Unit, plan_cost
    from metrics_under_test.measured import cpu_seconds_2k

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
