"""`banana-tests metrics`: every metric on trial, and whether it can run here.

Reads the registry and the installed entry points only; pyiqa and torch are never imported, so
the listing is instant. Availability is about parameter files: present in pyiqa's cache
(`$TORCH_HOME/hub`), or in the `--weights-dir` mirror the suite stages them from.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from banana_tests.core.machine import refuse_url
from banana_tests.core.suite_options import add_weights_option
from metrics_under_test import custom, extras
from metrics_under_test.protocol import MetricError
from metrics_under_test.registry import PAPER_METRICS, catalog
from metrics_under_test.spec import Backend, MetricSpec, cpu_seconds_2k
from metrics_under_test.vlm_catalog import BY_METRIC, OUTSIDE_PYIQA, Runs
from metrics_under_test.weights import mirror_from_env, pyiqa_cache_dir

# The paper's Table 2, in its order: 21 pyiqa metrics, then the two VLM metrics outside pyiqa.
PAPER_23 = (*(p.pyiqa_name for p in PAPER_METRICS), *(m.metric for m in OUTSIDE_PYIQA))
# Paper metrics whose plumbing runs here with synthetic parameters when their files are absent
# (tests/test_paper_metrics.py); the VLM metrics say for themselves (vlm_catalog).
SYNTHETIC_HERE = frozenset(PAPER_23) - frozenset(BY_METRIC)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("metrics", help="list every metric: direction, range, backend, weights here")
    p.add_argument("--json", action="store_true", help="machine-readable output: a JSON list of metrics")
    add_weights_option(p.add_argument)
    p.set_defaults(func=run)


def rows(weights_dir: Path | None) -> list[dict[str, Any]]:
    """One dict per metric: the catalog's pyiqa metrics, then installed custom metrics."""
    out = [_row(spec, weights_dir) for spec in catalog().values()]
    for name, target in sorted(custom.entry_points().items()):
        if name.lower() in catalog():
            continue
        try:
            out.append(_row(custom.entry_point_spec(name, target), weights_dir, entry_point=name))
        except MetricError as exc:
            out.append({"name": name, "backend": Backend.CUSTOM, "target": target, "error": str(exc)})
    return out


def _row(spec: MetricSpec, weights_dir: Path | None, entry_point: str | None = None) -> dict[str, Any]:
    files = []
    for w in spec.weights:
        where = "cache" if w.path.exists() else None
        if where is None and weights_dir is not None and (weights_dir / w.file).is_file():
            where = "mirror"
        files.append({"file": w.file, "url": w.url, "path": str(w.path), "found": where})
    missing = [w.file for w, f in zip(spec.weights, files, strict=True) if f["found"] is None]
    vlm = BY_METRIC.get(spec.name) if spec.backend is Backend.VLM else None
    library = extras.library_of(spec)
    if vlm is not None:
        missing = vlm.missing()
        files = [{"file": f, "url": vlm.repo, "path": str(vlm.folder / f), "found": None} for f in missing]
    if vlm is not None:
        how = (
            f"present in {vlm.folder}"
            if not missing
            else (f"{', '.join(missing)} of {vlm.repo} are not in {vlm.folder}: {vlm.how_to_provide()}")
        )
    elif spec.backend is Backend.CUSTOM:
        how = "nothing to provide: runs from its Python package"
    elif missing:
        how = (
            f"put {', '.join(missing)} in {pyiqa_cache_dir()} (or a folder passed as --weights-dir=FOLDER / "
            f"$BANANA_WEIGHTS_DIR), or run once with network access so pyiqa downloads them"
        )
    elif spec.weights_note:
        how = f"needs network access at load time: {spec.weights_note}"
    else:
        how = "nothing to provide" if not spec.weights else "present"
    absent = extras.missing(spec.name, extras.of_metric(spec))
    return {
        "name": spec.name,
        "paper_name": spec.paper_name,
        "backend": spec.backend,
        "target": spec.target,
        "entry_point": entry_point,
        "lower_better": spec.lower_better,
        "range": [spec.low, spec.high],
        "cost": spec.cost,
        "cpu_s_per_2k_image": cpu_seconds_2k().get(spec.name),
        "available": not absent and not missing and (vlm is not None or not spec.weights_note),
        "weights": files,
        "fetches_at_load": spec.weights_note or None,
        "how_to_provide": absent or how,
        "in_paper": spec.name in PAPER_23,
        "runs_here": _runs_here(spec, not missing and not spec.weights_note),
        "license": vlm.license if vlm else None,
        "library": library.name if library else None,
        "library_version": library.version if library else None,
        "library_license": library.licence if library else None,
        "library_extra": library.extra if library else None,
        "size": vlm.size if vlm else None,
    }


def _runs_here(spec: MetricSpec, available: bool) -> str | None:
    """How the paper's metric runs on a machine like the project's (no GPU, no hub access)."""
    if spec.name in BY_METRIC:
        return BY_METRIC[spec.name].runs_here.value
    if spec.name not in PAPER_23:
        return None
    if available:
        return Runs.REAL.value
    return Runs.SYNTHETIC.value if spec.name in SYNTHETIC_HERE else None


def run(args: argparse.Namespace) -> int:
    try:
        refuse_url("--weights-dir", args.weights_dir)
    except ValueError as exc:
        print(f"banana-tests metrics: error: {exc}", file=sys.stderr)
        return 2
    weights_dir = Path(args.weights_dir) if args.weights_dir else mirror_from_env()
    table = rows(weights_dir)
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    head = f"{'metric':<24} {'better':<6} {'range':<16} {'backend':<7} {'cost':<6} {'s/2K':>6}"
    print(f"{head} {'here':<7} files")
    for r in table:
        if "error" in r:
            print(f"{r['name']:<24} broken entry point {r['target']}: {r['error']}")
            continue
        via_mirror = any(w["found"] == "mirror" for w in r["weights"])
        here = ("mirror" if via_mirror else "yes") if r["available"] else "no"
        low, high = r["range"]
        files = ", ".join(w["file"] for w in r["weights"]) or (
            "(fetched at load)" if r["fetches_at_load"] else "-"
        )
        better = "lower" if r["lower_better"] else "higher"
        span = f"{low:g}..{high:g}"
        secs = r["cpu_s_per_2k_image"]
        per = f"{secs:.3g}" if secs is not None else "-"
        row = f"{r['name']:<24} {better:<6} {span:<16} {r['backend']:<7} {r['cost']:<6} {per:>6}"
        print(f"{row} {here:<7} {files}")
    _print_libraries(table)
    _print_paper_metrics(table)
    missing = [r for r in table if not r.get("available", True)]
    print(f"\n{len(table) - len(missing)} of {len(table)} metrics can run here. To provide parameter files:")
    print(f"  put them in {pyiqa_cache_dir()} or in a folder passed as --weights-dir=FOLDER")
    print("  or $BANANA_WEIGHTS_DIR;")
    if extras.PYIQA.absent():
        print(f"  pyiqa's metrics need its extra (see its licence above): {extras.PYIQA.command};")
    print("  `banana-tests metrics --json` gives each file's URL and path.")
    print("s/2K: CPU seconds per 2048x1152 image measured on the project's 2-core machine (docs/metrics.md).")
    return 0


def _print_libraries(table: list[dict[str, Any]]) -> None:
    """Each library behind the metrics, its licence as its installed metadata declares it (or the
    extra that installs it), and the metrics it implements."""
    by_library: dict[str, list[str]] = {}
    for r in table:
        if r.get("library"):
            key = extras.library(r["library"], r["library_extra"]).describe()
            by_library.setdefault(key, []).append(r["name"])
    print("\nThe library behind each metric, and its licence (installed metadata):")
    for described, names in by_library.items():
        print(f"  {described}; {len(names)} metric(s): {', '.join(names)}")


def _print_paper_metrics(table: list[dict[str, Any]]) -> None:
    """The paper's 23 metrics, how each runs here, and the VLM models' licences and sizes."""
    by_name = {r["name"]: r for r in table}
    print(f"\nThe paper's {len(PAPER_23)} metrics (Table 2) and how each runs here:")
    for name in PAPER_23:
        r = by_name[name]
        print(f"  {r['paper_name']:<17} {name:<17} {r['runs_here']}")
        if r["license"]:
            print(f"  {'':<35} licence: {r['license']}; size: {r['size']}")
