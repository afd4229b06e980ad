"""Every paper metric runs the suite's real scoring path here (issue 14).

Offline, only BRISQUE, NIQE, ILNIQE and PIQE have their real parameters. The other networks are
built by `metrics_under_test.synthetic` exactly as pyiqa builds them, with seeded random
parameters where pyiqa would fetch files: the scores mean nothing, but the adapter (PyiqaMetric),
ScoreBook's batching and image decoding, and pyiqa's own forward all run.

Each metric is built and scored in a process of its own (this module run as a script), which
exits when done: one pytest worker that built them in turn grew to 10 GB under `-n 2` and was
killed; a process per metric peaked at 2.8 GB (ILNIQE). The plumbing cases took 10-24 min under
`-n 2` on the loaded 2-core machine, so `pytest tests -n 2` skips them and CI runs them with a
second command (COMMAND, the README's); the missing-file cases run in the first only.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import resource
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from banana_tests.scoring.score_book import ScoreBook
from banana_tests.trajectories.images import ImageStore
from metrics_under_test import synthetic
from metrics_under_test.protocol import MetricError
from metrics_under_test.pyiqa_backend import UNDECLARED_IMPORTS, MissingWeights, PyiqaMetric
from metrics_under_test.registry import PAPER_METRICS, lookup
from metrics_under_test.weights import stage
from tests.conftest import PROJECT, needs, unavailable, weights_mirror, write_crops

pytestmark = pytest.mark.slow  # a process per paper metric, with real parameters: the slow tier

ASKED = "BANANA_PAPER_METRICS"  # run the per-metric processes
COMMAND = f"{ASKED}=1 pytest tests/test_paper_metrics.py tests/test_gpu_check.py -n 2"  # README, .ci/run
heavy = pytest.mark.skipif(
    not os.environ.get(ASKED), reason=f"a process per paper metric (10-24 min here): run by {COMMAND}"
)
REAL = ("brisque", "niqe", "ilniqe", "piqe")  # real parameters from the mirror (or none needed)
# The slowest first (seconds per process at load ~11), so that under -n 2 none starts last.
SLOWEST = ("ilniqe", "maniqa", "hyperiqa", "tres")  # 886, 337, 258, 85 s
PAPER = sorted(
    (p.pyiqa_name for p in PAPER_METRICS if p.pyiqa_name not in synthetic.UNSUPPORTED),
    key=lambda name: SLOWEST.index(name) if name in SLOWEST else len(SLOWEST),
)
# max |in a batch - alone|, per metric, from differences measured here on the crops below (3
# images: two of one size in one batch, one alone). A float32 network is handed a (2, 3, H, W)
# batch instead of (1, 3, H, W): oneDNN may pick another convolution/GEMM blocking, which changes
# the order of float32 sums, so a score may move by a few float32 ulps of its activations. 1e-5 is
# 1e-5 of a [0, 1] range (1e-7 normalised points on TReS's and MUSIQ's 0-100), 8x the largest
# measured (TReS 1.2e-6, LIQE 4.8e-7; TOPIQ 1.3e-7, CNNIQA 1.3e-8). Exact for the float64 classical metrics;
# BRISQUE and ILNIQE are scored one image per call by the adapter (pyiqa_backend.ONE_AT_A_TIME).
TOLERANCE = {name: 1e-5 for name in PAPER} | {"brisque": 0.0, "ilniqe": 0.0, "piqe": 1e-9, "niqe": 1e-6}
# (seed image, step, top, left, height, width): two crops of one size (one batch) and another size.
CROPS = (
    ("astronaut", 5, 40, 60, 128, 128),
    ("brick", 20, 10, 10, 128, 128),
    ("chelsea", 10, 0, 0, 112, 160),
)  # at least 104 px: PI crops a 4 px border, then NIQE needs a 96 px block
# LIQE refuses a short side under 224 px (an assertion in pyiqa's forward): larger crops for it.
LARGE_CROPS = (
    ("astronaut", 5, 40, 60, 224, 224),
    ("brick", 20, 10, 10, 224, 224),
    ("hubble_deep_field", 10, 0, 0, 240, 288),
)
LARGE = ("liqe",)
# MANIQA scores 20 uniform 224 px crops, each a ViT-B/8 pass (~10 s an image here), TReS 50, each
# a ResNet-50 pass (~4 min for the seven scorings): 2 crops run the same code much faster.
FEWER_CROPS: dict[str, dict[str, Any]] = {"maniqa": {"test_sample": 2}, "tres": {"test_sample": 2}}
CHILD_TIMEOUT_S = 3600  # a hang, not a slow metric: ILNIQE, the slowest, took 410-886 s at load 7-11


def _build(name: str, mirror: Path | None) -> PyiqaMetric:
    """The metric on CPU: real parameters from the mirror, else synthetic ones."""
    spec = lookup(name)
    if name in REAL:
        if mirror is not None:
            stage(mirror, ((w.file, w.path) for w in spec.weights))
        if spec.missing_weights():
            unavailable(f"{name}: real parameters not in the mirror ({mirror})")
        return PyiqaMetric(spec, "cpu")
    if name == "pi" and mirror is not None:  # PI's NIQE half reads NIQE's real file
        stage(mirror, ((w.file, w.path) for w in lookup("niqe").weights))
    create = functools.partial(synthetic.create_metric, **FEWER_CROPS.get(name, {}))
    return PyiqaMetric(spec, "cpu", create_metric=create)


def score(name: str, folder: Path, mirror: Path | None) -> dict[str, Any]:
    """In this process: build `name`, score the crops alone, in the suite's batches, and the first
    again; where its tensors are; and what it cost."""
    start = time.perf_counter()
    records = write_crops(folder, LARGE_CROPS if name in LARGE else CROPS)
    try:
        metric = _build(name, mirror)
    except pytest.skip.Exception as exc:
        return {"skip": str(exc)}
    model = metric._model
    store = ImageStore()
    sizes: list[int] = []

    def spy(images: list[np.ndarray]) -> list[float]:
        sizes.append(len(images))
        return metric(images)

    alone = [metric([store.get(r)])[0] for r in records]
    book = ScoreBook("cpu", ImageStore(), loader=lambda spec, device: spy)  # type: ignore[arg-type,return-value]
    return {
        "alone": alone,
        "batched": book.scores(lookup(name), records),
        "again": metric([store.get(records[0])])[0],
        "sizes": sorted(sizes),
        "devices": sorted({t.device.type for t in (*model.parameters(), *model.buffers())}),
        "model_device": str(model.device),
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time(),  # the whole process's, imports included
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run_alone(name: str, folder: Path) -> dict[str, Any]:
    """`score` in a fresh process (this module as a script), offline, with a pyiqa cache of its own."""
    mirror = weights_mirror()
    env = {k: v for k, v in os.environ.items() if k != "BANANA_WEIGHTS_DIR"}
    env |= {"HF_HUB_OFFLINE": "1", "TORCH_HOME": str(folder / "torch"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "tests.test_paper_metrics", name, str(folder), str(mirror or "")]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=PROJECT, timeout=CHILD_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: not scored within {CHILD_TIMEOUT_S} s")
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
        pytest.fail(f"{name}: the scoring process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    if "skip" in result:
        pytest.skip(result["skip"])
    print(
        f"{name}: {result['seconds']:.1f} s, {result.get('cpu_seconds', 0):.1f} s CPU, "
        f"peak RSS {result['peak_rss_mib']:.0f} MiB"
    )
    return result


@heavy
@pytest.mark.parametrize("name", PAPER)
def test_the_scoring_path_holds(name: str, tmp_path: Path) -> None:
    """One test per metric, not one per property: each would score the metric in a process of its
    own again, as xdist spreads a metric's tests over the workers (`--dist loadgroup`, which would
    keep them together, silently does not on pytest 9.2: pytest-xdist#1386)."""
    result = run_alone(name, tmp_path)
    batched, alone = result["batched"], result["alone"]
    assert len(batched) == len(CROPS) and np.isfinite(batched).all(), f"finite, one per image: {batched}"
    assert result["sizes"] == [1, 2], "the two crops of one size were not scored together"
    diff = float(np.abs(np.subtract(batched, alone)).max())
    print(f"{name}: max |batched - alone| = {diff:.3g}")
    assert diff <= TOLERANCE[name], f"a batch moved a score by {diff:.3g}: {batched} vs alone {alone}"
    assert result["again"] == alone[0], "a second call gave another score"
    assert result["devices"] == ["cpu"] and result["model_device"] == "cpu", "--device cpu not honoured"


@pytest.mark.skipif(
    bool(os.environ.get(ASKED)),
    reason="run by `pytest tests -n 2`; here each worker would hold pyiqa's ~0.7 GB beside the metrics",
)
@pytest.mark.parametrize("name", [p.pyiqa_name for p in PAPER_METRICS if p.pyiqa_name != "piqe"])
def test_missing_parameters_fail_fast_naming_the_file(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Offline, no files, no synthetic mode: MissingWeights naming what is missing, without ever
    waiting on the network (the hub's retries took ~40 s): no connection is even tried. Not a
    timer: MANIQA builds its ViT-B/8 before timm asks the hub, 9.7 s at load 11, 56 s at load 15."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.delenv("BANANA_WEIGHTS_DIR", raising=False)
    spec = lookup(name)
    needs("pyiqa")
    if name == "qalign":
        needs("transformers")
    tried: list[object] = []

    def refuse(sock: socket.socket, address: object) -> None:
        tried.append(address)
        raise OSError(f"no network in this test (tried {address})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    absent = [m for m in UNDECLARED_IMPORTS if importlib.util.find_spec(m) is None]
    with pytest.raises((MissingWeights, MetricError)) as info:
        PyiqaMetric(spec, "cpu")
    if isinstance(info.value, MetricError):  # only where an extra the model imports is absent
        assert any(f"imports {m}," in str(info.value) for m in absent), info.value
    else:
        named = [w.file for w in spec.weights] or [".pt", ".pth", "huggingface", "hub"]
        assert any(n.lower() in str(info.value).lower() for n in named), info.value
    assert tried == []


@pytest.mark.parametrize(("module", "extra"), sorted(UNDECLARED_IMPORTS.items()))
def test_a_model_import_pyiqa_does_not_declare_names_the_extra(
    module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed without the extra, a CLIP metric or Q-Align says which one to install, not
    pyiqa's ModuleNotFoundError from deep inside its model."""
    monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ModuleNotFoundError
    with pytest.raises(
        MetricError, match=rf"clipiqa: .*imports {module},.*pip install 'banana-tests\[{extra}\]'"
    ):
        PyiqaMetric(lookup("clipiqa"), "cpu", create_metric=lambda *_, **__: importlib.import_module(module))


def test_any_other_missing_module_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "a_module_nobody_ships", None)
    with pytest.raises(ModuleNotFoundError):
        PyiqaMetric(
            lookup("clipiqa"),
            "cpu",
            create_metric=lambda *_, **__: importlib.import_module("a_module_nobody_ships"),
        )


def test_the_readme_has_the_command_that_runs_the_skipped_cases() -> None:
    """`pytest tests -n 2` skips the per-metric processes: the README's test commands, which
    .ci/run runs (tests/test_docs.py), must include the one that runs them."""
    from tests.doc_blocks import readme_test_commands

    assert shlex.split(COMMAND) in readme_test_commands()


def main(argv: list[str]) -> int:
    """The scoring process: `python -m tests.test_paper_metrics NAME FOLDER MIRROR` prints one JSON line."""
    name, folder, mirror = argv
    print(json.dumps(score(name, Path(folder), Path(mirror) if mirror else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
