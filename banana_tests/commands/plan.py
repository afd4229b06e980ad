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
from banana_tests.session.options import SuiteOption

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
        "Exit 0, or 2 for bad options or data set.",
    )
    for option in selection_options():
        p.add_argument(option.short, dest=option.dest, **option.attrs)
    p.add_argument("--job-hours", type=float, default=6.0, help="a job's time limit in hours (default 6)")
    p.add_argument("--job-cores", type=int, default=2, help="cores, so xdist workers, per job (default 2)")
    p.add_argument(
        "--assume-size",
        metavar="WxH",
        help="count every image as W×H pixels instead of reading its header (plan before the images exist)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from banana_tests.api import ScoreSetupError, records_to_score, settings_from_options
    from banana_tests.commands.metrics import CPU_SECONDS_2K
    from banana_tests.scheduler.cost_plan import Unit, plan_cost

    values = {o.name: getattr(args, o.dest) for o in selection_options()}
    try:
        if args.job_hours <= 0 or args.job_cores < 1:
            raise ScoreSetupError("--job-hours must be above 0 and --job-cores at least 1")
        size = _size(args.assume_size)
        groups = records_to_score(settings_from_options({**values, "no-cache": True}, Path.cwd()))
        units = [
            Unit(metric, seed, tuple(size or _pixels(r.path, r.source) for r in records))
            for (metric, seed), records in groups.items()
        ]
    except ScoreSetupError as exc:
        print(f"banana-tests plan: error: {exc}", file=sys.stderr)
        return 2
    plan = plan_cost(units, CPU_SECONDS_2K, args.job_hours, args.job_cores)
    seeds = len({u.seed_image for u in units})
    print(f"banana-tests plan: {len(plan.metrics)} metric(s), {seeds} seed image(s), {len(units)} units")
    for line in plan.lines():
        print(line)
    return 0


def _size(text: str | None) -> int | None:
    from banana_tests.api import ScoreSetupError

    if text is None:
        return None
    m = _SIZE.match(text.strip())
    if m is None:
        raise ScoreSetupError(f"--assume-size takes WxH in pixels (e.g. 2048x1152), got {text!r}")
    return int(m["w"]) * int(m["h"])


def _pixels(path: Path, source: str) -> int:
    """The image's pixels from its header alone."""
    from PIL import Image, UnidentifiedImageError

    from banana_tests.api import ScoreSetupError

    try:
        with Image.open(path) as image:
            width, height = image.size
    except (OSError, UnidentifiedImageError) as exc:
        raise ScoreSetupError(f"{source} ({path}): cannot read the image's size: {exc}") from exc
    return width * height
