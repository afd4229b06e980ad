"""`banana-tests fixtures refresh`: rebuild the embedded emulated set from its recipe, and the
sha256 manifest of the per-artifact trial sets built from it."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from banana_tests.core.machine import local_path
from banana_tests.data import EMBEDDED, SEEDS


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("fixtures", help="the embedded emulated trajectory set")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    refresh = actions.add_parser(
        "refresh", help="regenerate the set from its recorded recipe (byte for byte on the same libraries)"
    )
    refresh.add_argument("--recipe", type=local_path, default=None, help="default: the committed recipe.json")
    refresh.add_argument("--out", type=local_path, default=EMBEDDED, help="default: %(default)s")
    refresh.add_argument(
        "--seeds-out",
        type=local_path,
        default=SEEDS,
        help="the clean step-0 images (default: %(default)s)",
    )
    refresh.add_argument(
        "--skip-trials",
        action="store_true",
        help="leave the per-artifact trial sets' sha256 manifest as it is (building it takes minutes)",
    )
    refresh.set_defaults(func=run_refresh)


def run_refresh(args: argparse.Namespace) -> int:
    from banana_tests.editors.embedded_sets import (
        RECIPE,
        build,
        load_recipe,
        shipped_seeds,
        write_manifest,
        write_seeds,
    )

    recipe = args.recipe or EMBEDDED / RECIPE
    if not recipe.is_file():
        print(f"banana-tests fixtures refresh: error: no recipe at {recipe}", file=sys.stderr)
        return 1
    loaded = load_recipe(recipe)
    rows = build(loaded, args.out)
    size = sum((args.out / r["file_name"]).stat().st_size for r in rows)
    print(f"{len(rows)} images, {size / 1e6:.1f} MB of PNG in {args.out}")
    seeds = write_seeds(loaded, args.seeds_out)
    print(f"{len(seeds)} clean seed images in {args.seeds_out}")
    if not args.skip_trials:
        trials = write_manifest(loaded, shipped_seeds(loaded, args.seeds_out), args.out)
        print(f"the per-artifact trial sets' sha256s in {trials}")
    return 0
