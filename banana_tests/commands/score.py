"""`banana-tests score`: fill a score cache without pytest (banana_tests.api), so a verdict pass
with the same options and `--cache-dir` builds no model and scores nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from banana_tests.core.suite_options import SuiteOption

NOT_SCORING = frozenset({"suite", "trend", "aggregate", "no-cache"})
"""Suite options that choose tests or verdicts, not the images scored; the gate's options too."""


def scoring_options() -> list[SuiteOption]:
    """The suite's data and metric options that choose what is scored, as the suite defines them."""
    from banana_tests.core.suite_options import add_data_options, add_metric_options

    found: list[SuiteOption] = []
    for add in (add_data_options, add_metric_options):
        add(lambda short, **attrs: found.append(SuiteOption(short, attrs)))
    return [o for o in found if o.name not in NOT_SCORING]


def add_parser(subparsers: Any) -> None:
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
