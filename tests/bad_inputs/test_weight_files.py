"""A parameter file runs no code (issue 56): one row per bad weight file we know of.

pyiqa reads its `.pth` files with `torch.load(weights_only=False)`, a pickle that runs what it
names. A file of the `--weights-dir` mirror or of pyiqa's cache whose name has a published sha256
(metrics_under_test.weights) is refused unless its bytes match, in one line naming the
file, the sha256 found and the one expected; that metric's cases error, the others run. A user's
metric that calls pyiqa inside finds the mirror staged whatever else runs, and without one its
failed download names the file, its URL and how to provide it. A FIFO in place of a TAEF2 weight
file is refused at once instead of blocking the read.
"""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from metrics_under_test.registry import lookup
from metrics_under_test.weights import PUBLISHED, UNPUBLISHED, stage
from tests.conftest import needs, weights_mirror, write_set

BRISQUE, NIQE = "brisque_svm_weights.pth", "niqe_modelparameters.mat"
NIQE_URL = "https://huggingface.co/chaofengc/IQA-PyTorch-Weights/resolve/main/niqe_modelparameters.mat"


class RunsCode:
    """Unpickled, it creates `marker`: what any code in a pickle could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return open, (str(self.marker), "w")


def pickle_mirror(folder: Path, marker: Path) -> Path:
    """A mirror whose brisque parameter file is a pickle that creates `marker` when unpickled."""
    folder.mkdir(parents=True)
    (folder / BRISQUE).write_bytes(pickle.dumps(RunsCode(marker)))
    return folder


def tampered_copy(path: Path, good: bytes, mtime_from: Path) -> bytes:
    """`good` with one byte flipped at `path`: the same size, and the mtime of `mtime_from`, as
    `cp -p` leaves it, so only the content tells it apart."""
    bad = good[:-1] + bytes([good[-1] ^ 1])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bad)
    status = mtime_from.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    return bad


def sha256(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def needs_mirror() -> Path:
    mirror = weights_mirror()
    if mirror is None or not (mirror / NIQE).is_file():
        pytest.skip("no pyiqa weights mirror beside the clone or in $BANANA_WEIGHTS_DIR")
    return mirror


# ---- in-process: the checks before pyiqa is imported ----


def test_a_pickle_in_the_mirror_is_not_staged_and_its_metric_is_refused_naming_both_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metrics_under_test.pyiqa_backend import check_weights
    from metrics_under_test.weights import NotPublished

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    marker = tmp_path / "code-ran"
    mirror = pickle_mirror(tmp_path / "mirror", marker)
    spec = lookup("brisque")
    try:
        assert stage(mirror, ((w.file, w.path) for w in spec.weights)) == []
        assert not spec.weights[0].path.exists()
        with pytest.raises(NotPublished) as refused:
            check_weights(spec)
    finally:
        UNPUBLISHED.pop(spec.weights[0].path, None)
    line = str(refused.value)
    found = sha256((mirror / BRISQUE).read_bytes())
    assert "\n" not in line and line.startswith(f"brisque: {mirror / BRISQUE}: not the published {BRISQUE}")
    assert f"sha256 {found}" in line and f"expected {PUBLISHED[BRISQUE]}" in line
    assert not marker.exists()


def test_a_tampered_copy_already_in_the_cache_is_refused_by_its_bytes_each_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from metrics_under_test.pyiqa_backend import check_weights
    from metrics_under_test.weights import NotPublished

    mirror = needs_mirror()
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    spec = lookup("niqe")
    cached = spec.weights[0].path
    assert stage(mirror, ((w.file, w.path) for w in spec.weights)) == [NIQE]
    check_weights(spec)  # the published file: accepted
    cached.unlink()  # a hard link into the mirror: replaced, never written through
    bad = tampered_copy(cached, (mirror / NIQE).read_bytes(), mirror / NIQE)
    assert stage(mirror, ((w.file, w.path) for w in spec.weights)) == []  # a file there is left alone
    with pytest.raises(NotPublished) as refused:
        check_weights(spec)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(f"niqe: {cached}: not the published {NIQE}")
    assert f"sha256 {sha256(bad)}" in line and f"expected {PUBLISHED[NIQE]}" in line


def test_a_fifo_in_place_of_a_taef2_weight_file_is_refused_without_blocking(tmp_path: Path) -> None:
    needs("torch")
    from banana_tests.editors import tiny_vae

    shutil.copyfile(tiny_vae.weights_dir() / tiny_vae.ENCODER.name, tmp_path / tiny_vae.ENCODER.name)
    fifo = tmp_path / tiny_vae.DECODER.name
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            tiny_vae.load(tmp_path)
            outcome.append(None)
        except BaseException as exc:  # the outcome is asserted below
            outcome.append(exc)

    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # blocked opening the FIFO: give it an end so the thread can finish
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=30)
        pytest.fail(f"loading TAEF2 blocked on the FIFO {fifo}")
    assert len(outcome) == 1 and isinstance(outcome[0], tiny_vae.WeightFileError), outcome
    line = str(outcome[0])
    assert "\n" not in line and line.startswith(f"{fifo}: cannot read TAEF2 weights (not a regular file")
    assert f"expected sha256 {tiny_vae.DECODER.sha256}" in line


# ---- child pytest runs: pyiqa opens the files ----

ROUTER = """
import numpy as np
import pyiqa
import torch


class Router:
    \"\"\"A user's metric over pyiqa's NIQE, built inside.\"\"\"

    name, lower_better, score_range = "router", True, (0.0, 100.0)

    def __init__(self, device="cpu"):
        self.niqe = pyiqa.create_metric("niqe", device=torch.device(device))

    def __call__(self, images):
        batch = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float().div(255)
        return [float(s) for s in self.niqe(batch).reshape(-1)]
"""


Cases = dict[str, tuple[str, str]]  # case id -> (outcome, message)


def suite_run(here: Path, metrics: str, mirror: Path | None, *extra: str) -> tuple[int, Cases]:
    """A suite run in a child pytest over a small set, offline, with `mirror` as
    $BANANA_WEIGHTS_DIR (None: none) and pyiqa's cache in `here/torch`; its exit code and
    each case's (outcome, message)."""
    write_set(here / "data", seeds=("alpha",), runs=(0,), steps=(1, 5))
    cmd = [
        sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "--pyargs",
        "banana_tests", "--dataset=data", f"--metric={metrics}", "--steps=5", "--junitxml=j.xml",
        "-k", "test_detects_degradation", *extra,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "BANANA_WEIGHTS_DIR"}
    env.update(HF_HUB_OFFLINE="1", TORCH_HOME=str(here / "torch"), PYTHONPATH=str(here))
    if mirror is not None:
        env["BANANA_WEIGHTS_DIR"] = str(mirror)
    done = subprocess.run(cmd, cwd=here, env=env, capture_output=True, text=True, timeout=900)
    assert "INTERNALERROR" not in done.stdout + done.stderr, done.stdout[-3000:]
    cases = {}
    for case in ET.parse(here / "j.xml").iter("testcase"):
        kid = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        name = str(case.get("name"))
        message = "" if kid is None else kid.get("message", "")
        if message.endswith(TRUNCATED):  # pytest cuts a long message: its whole report is the text
            message = (kid.text or "").strip() if kid is not None else ""
        cases[name[name.index("[") + 1 : -1]] = ("passed" if kid is None else kid.tag, message)
    return done.returncode, cases


def of(cases: Cases, metric: str) -> Cases:
    return {case: verdict for case, verdict in cases.items() if case.startswith(f"{metric}-")}


@pytest.mark.slow
def test_a_pickle_in_the_mirror_and_a_tampered_cached_copy_error_their_metrics_and_run_no_code(
    tmp_path: Path,
) -> None:
    """brisque's mirror file is a pickle that would create a marker, niqe's cached copy is
    tampered (size and mtime kept); piqe, which needs no file, runs."""
    mirror = needs_mirror()
    marker = tmp_path / "code-ran"
    evil = pickle_mirror(tmp_path / "mirror", marker)
    shutil.copyfile(mirror / NIQE, evil / NIQE)
    cached = tmp_path / "torch" / "hub" / "pyiqa" / NIQE
    bad = tampered_copy(cached, (mirror / NIQE).read_bytes(), mirror / NIQE)

    code, cases = suite_run(tmp_path, "brisque,niqe,piqe", evil, "--no-cache")

    assert code == pytest.ExitCode.TESTS_FAILED
    assert not marker.exists()
    brisque, niqe, piqe = of(cases, "brisque"), of(cases, "niqe"), of(cases, "piqe")
    assert brisque and niqe and piqe, cases
    for outcome, message in brisque.values():
        assert outcome == "error" and "\n" not in message
        assert f"{evil / BRISQUE}: not the published {BRISQUE}" in message
        assert f"sha256 {sha256((evil / BRISQUE).read_bytes())}" in message
        assert f"expected {PUBLISHED[BRISQUE]}" in message
    for outcome, message in niqe.values():
        assert outcome == "error" and "\n" not in message
        assert (
            f"{cached}: not the published {NIQE} (sha256 {sha256(bad)}, expected {PUBLISHED[NIQE]})"
            in message
        )
    assert {outcome for outcome, _ in piqe.values()} <= {"passed", "failure"}
    assert cached.read_bytes() == bad  # refused, never replaced or deleted


@pytest.mark.slow
def test_a_users_metric_that_calls_pyiqa_finds_the_mirror_in_a_clean_cache(tmp_path: Path) -> None:
    """No suite metric stages niqe's file first: the run stages the mirror itself, in the
    controller and in the loaded-library discovery's child (the run keeps a score cache)."""
    mirror = needs_mirror()
    (tmp_path / "router_metric.py").write_text(ROUTER)

    code, cases = suite_run(tmp_path, "router_metric:Router", mirror, "--cache-dir=cache")

    router = of(cases, "router")
    assert router and {outcome for outcome, _ in router.values()} <= {"passed", "failure"}, router
    assert code in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert (tmp_path / "torch" / "hub" / "pyiqa" / NIQE).read_bytes() == (mirror / NIQE).read_bytes()


TRUNCATED = "[truncated; full report in element text]"  # pytest's cut of a long JUnit message


@pytest.mark.slow
def test_a_users_metric_that_calls_pyiqa_without_a_mirror_names_the_file_and_how_to_provide_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "router_metric.py").write_text(ROUTER)

    code, cases = suite_run(tmp_path, "router_metric:Router", None, "--no-cache")

    assert code == pytest.ExitCode.TESTS_FAILED
    router = of(cases, "router")
    assert router, cases
    for outcome, message in router.values():
        assert outcome == "error" and "\n" not in message
        assert NIQE in message and NIQE_URL in message
        assert "--weights-dir=FOLDER" in message and "BANANA_WEIGHTS_DIR" in message
