"""`banana-tests cache merge A B ... --into C`: join score caches made on several machines."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from banana_tests.core.local_paths import local_path


def add_parser(subparsers: Any) -> None:
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
