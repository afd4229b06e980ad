"""`generate --workers N`: the same set at any N (and as 0abd72f, before workers, made it), an
interrupt then a rerun resumes every chain, and a worker killed under the command is one line and
a nonzero exit, not a hang. Each test forks workers or runs the CLI in a child: slow tier."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import needs, noisy_image

ROOT = Path(__file__).resolve().parent.parent
RECORDED = json.loads((ROOT / "tests/data/generate_0abd72f.json").read_text())
"""The digests 0abd72f's `generate` gave for COMMANDS on `seeds()` (one process, no --workers)."""

COMMANDS = {
    "emulate": ["--editor", "emulate", "--runs", "2", "--steps", "3", "--option", "reframe.long_side=64"],
    "flux2-tiny-vae": ["--editor", "flux2-tiny-vae", "--runs", "2", "--steps", "2",
                       "--option", "strength=0.35", "--option", "latent_noise=0.05"],
}  # fmt: skip


def seeds(folder: Path) -> Path:
    """Two small PNG seeds (PNG: no JPEG encoder between the trees compared)."""
    folder.mkdir(parents=True, exist_ok=True)
    noisy_image("alpha", 0, 1, (60, 80)).save(folder / "alpha.png")
    noisy_image("beta", 0, 1, (72, 48)).save(folder / "beta.png")
    return folder


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metadata.jsonl").read_text().splitlines()]


def digest(out: Path) -> str:
    """The set's bytes in one hash: each record (but its wall time) with its image, in chain order,
    then generate.json. Line order in metadata.jsonl is left out: workers append as steps finish."""
    found = hashlib.sha256()
    for row in sorted(rows(out), key=lambda r: (r["seed_image"], r["run"], r["step"])):
        found.update(
            json.dumps({k: v for k, v in row.items() if k != "wall_time_s"}, sort_keys=True).encode()
        )
        found.update((out / row["file_name"]).read_bytes())
    found.update((out / "generate.json").read_bytes())
    return found.hexdigest()


def cli(seed_dir: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "banana_tests.cli", "generate", "--seed-images", str(seed_dir),
            "--out", str(out), *extra]  # fmt: skip


ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
@pytest.mark.parametrize("editor", sorted(COMMANDS))
def test_the_set_is_the_same_bytes_at_one_and_two_workers_and_as_0abd72f_made_it(
    editor: str, tmp_path: Path
) -> None:
    if editor == "flux2-tiny-vae":
        needs("torch", "torch")
    seed_dir = seeds(tmp_path / "seeds")
    made = {}
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        result = subprocess.run(
            cli(seed_dir, out, *COMMANDS[editor], "--workers", workers),
            env=ENV, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        made[workers] = digest(out)
    assert made["1"] == made["2"] == RECORDED[editor]


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def start(argv: list[str], out: Path, lines: int) -> subprocess.Popen[str]:
    """The command in its own process group, once `lines` steps are recorded and two workers run."""
    proc = subprocess.Popen(argv, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    meta = out / "metadata.jsonl"
    while time.monotonic() < deadline and proc.poll() is None:
        if meta.exists() and meta.read_bytes().count(b"\n") >= lines and len(children(proc.pid)) >= 2:
            return proc
        time.sleep(0.005)
    proc.kill()
    raise AssertionError(f"no {lines} steps with two workers in 120 s: {proc.communicate()}")


EMULATE = ["--editor", "emulate", "--runs", "2", "--steps", "40", "--option", "reframe.long_side=64"]
TOTAL = 2 * 2 * 40


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "group", "code"),
    [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)],
    ids=["sigint-to-the-group", "sigterm-to-the-command"],
)
def test_an_interrupt_then_a_rerun_resumes_every_chain_from_its_last_step(
    signum: signal.Signals, group: bool, code: int, tmp_path: Path
) -> None:
    """Ctrl-C reaches the command and its workers (one process group); SIGTERM reaches the command
    alone, which ends its workers. The rerun makes only the steps not recorded, the same bytes."""
    seed_dir = seeds(tmp_path / "seeds")
    reference, stopped = tmp_path / "reference", tmp_path / "stopped"
    subprocess.run(cli(seed_dir, reference, *EMULATE), env=ENV, capture_output=True, check=True)
    argv = cli(seed_dir, stopped, *EMULATE, "--workers", "2")
    proc = start(argv, stopped, 10)
    workers = children(proc.pid)
    os.killpg(proc.pid, signum) if group else proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "finished steps are kept; rerun the same command to continue" in err and "Traceback" not in err
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()], "a worker outlived the command"
    kept = rows(stopped)
    assert 10 <= len(kept) < TOTAL
    last = {}
    for row in kept:  # each chain's steps are recorded in order, from step 1
        key = (row["seed_image"], row["run"])
        assert row["step"] == last.get(key, 0) + 1, row
        last[key] = row["step"]
    rerun = subprocess.run(argv, env=ENV, capture_output=True, text=True, check=False)
    assert rerun.returncode == 0, rerun.stderr
    assert f"{TOTAL - len(kept)} step(s) made" in rerun.stdout
    assert digest(stopped) == digest(reference)
    assert not list(stopped.rglob("*.tmp"))


@pytest.mark.slow
def test_a_worker_killed_under_the_command_is_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    out = tmp_path / "set"
    proc = start(cli(seed_dir, out, *EMULATE, "--workers", "2"), out, 5)
    victim, other = children(proc.pid)[:2]
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)  # no hang: the command sees its worker's pipe close
    assert proc.returncode == 1, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("banana-tests generate: error: ")
    assert "its worker process ended (killed by SIGKILL: out of memory?); finished steps are kept" in lines[0]
    assert " run " in lines[0] and " step " in lines[0]
    assert not Path(f"/proc/{other}").exists(), "the other worker outlived the command"
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*.png")}
    assert on_disk == {r["file_name"] for r in rows(out)}  # every step sent was written, line and all
