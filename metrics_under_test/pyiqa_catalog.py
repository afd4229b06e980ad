"""Refresh `pyiqa_catalog.json` from the installed pyiqa: `python -m metrics_under_test.pyiqa_catalog`.

For each NR metric it records direction and score range from pyiqa's configuration and the
parameter file the metric fetches first, found by building the metric with every download
refused (an empty torch cache, HF_HUB_OFFLINE=1, sockets closed). Run it after a pyiqa upgrade;
a test checks the snapshot against the installed pyiqa.

Each metric's `cost` class comes from what was measured, not from a list here: the seconds per
2K image in `measured_costs.json` (`metrics_under_test.spec`) when the metric has them, else
the class the snapshot already records (someone set or measured it), else a first guess from its
kind. So a refresh never undoes a measurement.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from metrics_under_test.registry import CATALOG
from metrics_under_test.spec import Cost, cpu_seconds_2k

SET_BASED = ("fid", "fid_dinov2", "sfid", "inception_score")
TEXT_CONDITIONED = ("clipscore",)
# First guesses for metrics never measured: classical (no network, CPU-only) ones, fast or slow.
FAST = ("brisque", "niqe", "piqe", "entropy", "brisque_matlab", "niqe_matlab")
SLOW = ("ilniqe", "nrqm", "pi")
CLASSICAL = (*FAST, *SLOW)
VLM = re.compile(r"^(qalign|qrealign|compare2score|visualquality)")
# `fast`: under 5 s per 2048×1152 image on the project's loaded 2-core CPU, so the paper's
# protocol (240 such images per metric) takes under 20 minutes there.
FAST_S_2K = 5.0


def cost_class(name: str, seconds_2k: float) -> Cost:
    """The class a measured metric gets (docs/metrics.md, "What each metric costs")."""
    if VLM.match(name):
        return Cost.VLM
    if seconds_2k < FAST_S_2K:
        return Cost.FAST
    return Cost.SLOW if name in CLASSICAL else Cost.NEURAL


def first_guess(name: str) -> Cost:
    if name in FAST:
        return Cost.FAST
    if name in SLOW:
        return Cost.SLOW
    return Cost.VLM if VLM.match(name) else Cost.NEURAL


def choose_cost(name: str, measured: dict[str, float], recorded: dict[str, Cost]) -> Cost:
    """Measured beats recorded beats guessed: a refresh keeps what the snapshot learnt."""
    if name in measured:
        return cost_class(name, measured[name])
    return recorded.get(name) or first_guess(name)


def recorded_costs(path: Path = CATALOG) -> dict[str, Cost]:
    """The cost classes the current snapshot holds ({} before the first one)."""
    if not path.is_file():
        return {}
    return {m["name"]: Cost(m["cost"]) for m in json.loads(path.read_text(encoding="utf-8"))["metrics"]}


def parse_range(text: str) -> tuple[float, float] | None:
    """pyiqa writes ranges like '~0, ~150' (~ marks a soft bound) or '~0, ~' (no upper bound)."""
    low, high = (p.strip().lstrip("~") for p in text.split(","))
    if not low or not high:
        return None
    return float(low), float(high)


def first_download(name: str) -> dict[str, str] | None:
    """The first file `name` fetches when built here, or None when it needs none."""
    import pyiqa

    try:
        pyiqa.create_metric(name, device="cpu")
    except Exception as exc:
        tb, found = exc.__traceback__, None
        while tb is not None:
            url = tb.tb_frame.f_locals.get("url")
            if isinstance(url, str) and found is None:
                found = url
            tb = tb.tb_next
        if found is not None:
            cache = "pyiqa" if "IQA-PyTorch-Weights" in found or "pyiqa" in found else "other"
            if "download.pytorch.org" in found:
                cache = "torch"
            return {"file": found.rsplit("/", 1)[-1].split("?")[0], "url": found, "cache": cache}
        return {"file": "", "url": f"{type(exc).__name__}: {str(exc)[:200]}", "cache": "error"}
    return None


def build() -> dict[str, Any]:
    import pyiqa
    from pyiqa.default_model_configs import DEFAULT_CONFIGS

    metrics, refused = [], {}
    measured = cpu_seconds_2k()
    recorded = recorded_costs()
    for name in pyiqa.list_models(metric_mode="FR"):
        refused[name] = "a full-reference metric (it needs a pristine reference image)"
    for name in SET_BASED:
        refused[name] = "a set-based distribution metric (FID-type), not a per-image score"
    for name in TEXT_CONDITIONED:
        refused[name] = "a text-image alignment score (it needs a caption)"
    for name in pyiqa.list_models(metric_mode="NR"):
        if name in refused:
            continue
        cfg = DEFAULT_CONFIGS[name]
        rng = parse_range(cfg.get("score_range", "~0, ~"))
        fetch = first_download(name)
        row: dict[str, Any] = {
            "name": name,
            "lower_better": bool(cfg.get("lower_better", False)),
            "score_range": cfg.get("score_range", ""),
            "range": list(rng) if rng else None,
            "cost": choose_cost(name, measured, recorded),
            "weights": [],
        }
        if fetch and fetch["cache"] in ("pyiqa", "torch"):
            row["weights"] = [{k: fetch[k] for k in ("file", "url", "cache")}]
        elif fetch:
            row["weights_note"] = f"fetches {fetch['url']} at load time"
        metrics.append(row)
        print(name, row["weights"] or row.get("weights_note", "no files"), file=sys.stderr)
    return {"pyiqa_version": pyiqa.__version__, "metrics": metrics, "refused": refused}


def _refuse_connections(*_: object, **__: object) -> None:
    raise ConnectionRefusedError("downloads are refused while the catalog is built")


def main() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TORCH_HOME"] = tempfile.mkdtemp(prefix="banana-catalog-")
    socket.socket.connect = _refuse_connections  # type: ignore[method-assign]
    CATALOG.write_text(json.dumps(build(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {Path(CATALOG)}", file=sys.stderr)


if __name__ == "__main__":
    main()
