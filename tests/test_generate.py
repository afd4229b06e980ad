"""`banana-tests generate`: the set it writes, resuming after SIGKILL, refusals, secrets, progress."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from banana_tests.cli import main
from banana_tests.editors.generation import Progress
from banana_tests.trajectories.imagefolder import read_imagefolder
from tests.conftest import SUITE_MODULE, held_lock, needs, noisy_image, parse_matrix
from tests.gemini_stub import KEY, serve
from tests.known_metrics import install_known_metrics

ROOT = Path(__file__).resolve().parent.parent


def seeds(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    noisy_image("alpha", 0, 0, (60, 80)).save(folder / "alpha.png")
    noisy_image("beta", 0, 0, (72, 48)).save(folder / "beta.jpg")
    return folder


def command(seed_dir: Path, out: Path, *extra: str, runs: int = 2, steps: int = 6) -> list[str]:
    return ["generate", "--editor", "emulate", "--seed-images", str(seed_dir), "--out", str(out),
            "--runs", str(runs), "--steps", str(steps),
            "--option", "reframe.long_side=64", *extra]  # fmt: skip


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "metadata.jsonl").read_text().splitlines()]


def content(out: Path) -> list[tuple[Any, ...]]:
    """What a set holds, minus the wall time: each record and the bytes of its image."""
    return [
        (
            *sorted((k, str(v)) for k, v in r.items() if k != "wall_time_s"),
            (out / r["file_name"]).read_bytes(),
        )
        for r in rows(out)
    ]


@pytest.mark.slow
def test_generated_set_runs_through_the_suite(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert main(command(seeds(tmp_path / "seeds"), data, runs=2, steps=20)) == 0
    got = read_imagefolder(data)
    assert got.problems == () and len(got.records) == 2 * 2 * 20
    first = rows(data)[0]
    assert first["prompt"] == "Produce an exact replica of the provided image, with no alterations."
    assert (first["editor"], first["model"], first["output_size"]) == (
        "emulate",
        "replica-emulator",
        [64, 48],
    )
    assert first["sha256"] == hashlib.sha256((data / first["file_name"]).read_bytes()).hexdigest()
    (tmp_path / "test_suite.py").write_text(SUITE_MODULE)
    # The emulator adds fresh noise at every step (seeded: the same pixels every time), and
    # noise_level reads it: every case passes.
    metric = install_known_metrics(tmp_path) + ":noise_level"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(tmp_path / "torch")}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--dataset=data", f"--metric={metric}"]
    result = subprocess.run([*cmd, "-rA"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    cases = [
        line.split(" ")[:2] for line in result.stdout.splitlines() if line.startswith(("PASSED", "FAILED"))
    ]
    assert sorted(cases) == sorted(
        ["PASSED", f"test_suite.py::test_detects_degradation[noise_level-{seed}-step{step}]"]
        for seed in ("alpha", "beta")
        for step in (5, 10, 20)
    ), result.stdout
    assert result.returncode == 0, result.stdout + result.stderr
    assert parse_matrix(result.stdout) == {
        ("alpha", "noise_level"): "0/3",
        ("beta", "noise_level"): "0/3",
        ("total", "noise_level"): "0/6",
    }


@pytest.mark.slow
def test_the_printed_test_command_runs_as_printed_from_an_empty_folder(tmp_path: Path) -> None:
    """Issue 34: "test it: pytest --dataset=out --variant=replicate" collected nothing outside a
    clone (no `--pyargs banana_tests`)."""
    seed_dir = seeds(tmp_path / "seeds")
    work = tmp_path / "empty"
    work.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(tmp_path / "torch")}
    cli = [sys.executable, "-m", "banana_tests.cli", *command(seed_dir, Path("kill-set"), runs=1, steps=5)]
    made = subprocess.run(cli, cwd=work, env=env, capture_output=True, text=True, check=True)
    (hint,) = [line for line in made.stdout.splitlines() if line.startswith("test it: ")]
    printed = shlex.split(hint.removeprefix("test it: "))
    assert printed[0] == "pytest"
    run = [sys.executable, "-m", "pytest", *printed[1:]]
    result = subprocess.run(run, cwd=work, env=env, capture_output=True, text=True, check=False)
    assert result.returncode in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), (
        result.stdout + result.stderr
    )
    matrix = parse_matrix(result.stdout)
    assert {seed for seed, _ in matrix} == {"alpha", "beta", "total"}, result.stdout


@pytest.mark.slow
def test_sigkill_at_random_moments_then_rerun_loses_and_repeats_nothing(tmp_path: Path) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    # Long enough (120 steps) that several kills land before the run ends, even on a fast machine.
    assert main(command(seed_dir, reference, steps=30)) == 0
    total = len(rows(reference))
    argv = [sys.executable, "-m", "banana_tests.cli", *command(seed_dir, killed, steps=30)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rng = random.Random(5)
    kills = 0
    for _ in range(20):
        done = len(rows(killed)) if (killed / "metadata.jsonl").exists() else 0
        if done >= total - 2 or kills >= 5:
            break
        target = rng.randint(done + 1, min(done + 6, total - 1))
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            meta = killed / "metadata.jsonl"
            if meta.exists() and meta.read_bytes().count(b"\n") >= target:
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.03))  # land anywhere: mid-edit, mid-write, between image and line
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += proc.returncode == -signal.SIGKILL
    assert kills >= 3
    final = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert final.returncode == 0, final.stderr
    keys = [(r["seed_image"], r["run"], r["step"]) for r in rows(killed)]
    assert len(keys) == len(set(keys)) == total
    assert content(killed) == content(reference)
    assert not list(killed.rglob("*.tmp"))
    on_disk = {p.relative_to(killed).as_posix() for p in killed.rglob("*.png")}
    assert on_disk == {r["file_name"] for r in rows(killed)}


def test_a_torn_last_line_and_an_unrecorded_image_are_made_again(tmp_path: Path) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    out, reference = tmp_path / "set", tmp_path / "reference"
    assert main(command(seed_dir, reference)) == 0
    assert main(command(seed_dir, out)) == 0
    meta = out / "metadata.jsonl"
    lines = meta.read_bytes().splitlines(keepends=True)
    meta.write_bytes(b"".join(lines[:-2]) + lines[-2][:25])  # one line torn, one image without a line
    assert main(command(seed_dir, out)) == 0
    assert content(out) == content(reference)


def test_other_settings_into_the_same_folder_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    out = tmp_path / "set"
    assert main(command(seed_dir, out, steps=2)) == 0
    before = (out / "metadata.jsonl").read_bytes()
    capsys.readouterr()
    assert main(command(seed_dir, out, "--prompt", "mirror", steps=2)) == 1
    err = capsys.readouterr().err
    assert "was generated with other settings" in err
    assert "prompt: folder has 'replicate', this command asks for 'mirror'" in err
    noisy_image("changed", 0, 0).save(seed_dir / "alpha.png")
    assert main(command(seed_dir, out, steps=2)) == 1
    assert "seed_images: folder has" in capsys.readouterr().err
    assert (out / "metadata.jsonl").read_bytes() == before
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "metadata.jsonl").write_text("{}\n")
    assert main(command(seed_dir, foreign)) == 1
    assert "no generate.json: it was not made by `banana-tests generate`" in capsys.readouterr().err


def test_a_changed_last_image_stops_the_resume_until_it_is_deleted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    out, reference = tmp_path / "set", tmp_path / "reference"
    assert main(command(seed_dir, reference, steps=2)) == 0
    assert main(command(seed_dir, out, steps=2)) == 0
    last = rows(out)[-1]["file_name"]
    Image.new("RGB", (4, 4)).save(out / last)
    assert main(command(seed_dir, out, steps=2)) == 1
    err = capsys.readouterr().err
    assert f"{last} (beta run 1 step 2) changed since it was recorded" in err
    assert "restore it, or delete it and rerun" in err
    (out / last).unlink()
    assert main(command(seed_dir, out, steps=2)) == 0
    assert content(out) == content(reference)


def test_images_deleted_at_the_end_of_finished_runs_are_made_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    out, reference = tmp_path / "set", tmp_path / "reference"
    assert main(command(seed_dir, reference, steps=4)) == 0
    assert main(command(seed_dir, out, steps=4)) == 0
    by_run = {(r["seed_image"], r["run"], r["step"]): r["file_name"] for r in rows(out)}
    for key in [("alpha", 0, 4), ("beta", 1, 3), ("beta", 1, 4)]:
        (out / by_run[key]).unlink()
    capsys.readouterr()
    assert main(command(seed_dir, out, steps=4)) == 0
    captured = capsys.readouterr()
    assert "3 recorded image(s) missing at the end of their runs; making them again" in captured.out
    assert "3 step(s) made" in captured.out
    assert sorted(content(out)) == sorted(content(reference))


def test_a_missing_image_before_later_steps_names_them_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    out = tmp_path / "set"
    assert main(command(seed_dir, out, runs=1, steps=5)) == 0
    files = {r["step"]: r["file_name"] for r in rows(out) if r["seed_image"] == "alpha"}
    (out / files[2]).unlink()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(command(seed_dir, out, runs=1, steps=5)) == 1
    err = capsys.readouterr().err
    assert f"{files[2]} (alpha run 0 step 2) is missing, but later steps of this run" in err
    assert f"delete the run's later images ({files[3]} to {files[5]}) and rerun: steps 2-5" in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    for step in (3, 4, 5):
        (out / files[step]).unlink()
    assert main(command(seed_dir, out, runs=1, steps=5)) == 0
    assert all((out / name).is_file() for name in files.values())


def test_a_rerun_after_a_first_attempt_that_made_nothing_may_change_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first attempt that failed on its first edit leaves generate.json and an empty
    metadata.jsonl; the corrected command continues instead of being refused."""
    from banana_tests.editors.offline_editors import JpegEditor

    def broken(self: JpegEditor, request: object) -> None:
        raise RuntimeError("the editor's service is down")

    seed_dir, out = seeds(tmp_path / "seeds"), tmp_path / "set"
    argv = ["generate", "--editor", "jpeg", "--seed-images", str(seed_dir), "--out", str(out),
            "--runs", "1", "--steps", "2"]  # fmt: skip
    with monkeypatch.context() as patch:
        patch.setattr(JpegEditor, "edit", broken)
        assert main([*argv, "--option", "quality=50"]) == 1
    assert (out / "metadata.jsonl").read_bytes() == b""
    assert main([*argv, "--option", "quality=60"]) == 0
    assert "no step was made with the settings in generate.json" in capsys.readouterr().out
    assert json.loads((out / "generate.json").read_text())["editor_settings"]["quality"] == 60
    assert [r["model"] for r in rows(out)] == ["jpeg-q60"] * 4


def test_replicate_runs_that_are_copies_warn_once_naming_the_editor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from banana_tests.editors.offline_editors import JpegEditor

    seed_dir = seeds(tmp_path / "seeds")

    def jpeg(out: str, runs: int) -> str:
        argv = ["generate", "--editor", "jpeg", "--seed-images", str(seed_dir), "--out",
                str(tmp_path / out), "--runs", str(runs), "--steps", "3"]  # fmt: skip
        assert main(argv) == 0
        return capsys.readouterr().out

    said = jpeg("declared", 3)
    assert said.count("warning:") == 1
    assert "editor 'jpeg' is deterministic: its 3 runs will be byte-identical" in said
    assert "warning" not in jpeg("one-run", 1)
    monkeypatch.setattr(JpegEditor, "deterministic", False)  # an editor that does not say so
    said = jpeg("found", 2)
    assert said.count("warning:") == 1
    assert "editor 'jpeg' made byte-identical images in runs 0 and 1 of alpha at step 1" in said
    assert main(command(seed_dir, tmp_path / "emulated")) == 0
    assert "byte-identical" not in capsys.readouterr().out  # emulated runs differ


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    seed_dir, out = seeds(tmp_path / "seeds"), tmp_path / "set"
    old = os.umask(umask)
    try:
        assert main(command(seed_dir, out, runs=1, steps=1)) == 0
    finally:
        os.umask(old)
    made = [out / "generate.json", out / "metadata.jsonl", *(out / r["file_name"] for r in rows(out))]
    assert {oct(p.stat().st_mode & 0o777) for p in made} == {oct(0o666 & ~umask)}


def test_write_atomic_fsyncs_the_folder_after_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    from banana_tests import safe_files

    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    safe_files.write_atomic(tmp_path / "sub" / "f.bin", b"data")
    assert events == ["fsync file", "replace", "fsync dir"]
    assert (tmp_path / "sub" / "f.bin").read_bytes() == b"data"
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["f.bin"]


def test_a_short_append_is_an_error_naming_the_file(tmp_path: Path) -> None:
    from banana_tests import safe_files

    read, write = os.pipe()  # a full non-blocking pipe takes part of a write, as a full disk can
    os.set_blocking(write, False)
    try:
        with pytest.raises(OSError, match=r"short write to \S*metadata\.jsonl: \d+ of \d+ bytes"):
            safe_files.append_json_line(write, {"text": "x" * 200_000}, tmp_path / "metadata.jsonl")
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.slow
def test_a_lock_that_refuses_raises_at_once_and_one_that_removes_leaves_no_file(tmp_path: Path) -> None:
    from banana_tests import safe_files
    from banana_tests.trajectories.records import DataError

    lock = tmp_path / "f.lock"
    with (
        held_lock(lock),
        pytest.raises(DataError, match=r"^busy$"),
        safe_files.exclusive_lock(lock, busy=DataError("busy")),  # without `busy` this would wait
    ):
        pytest.fail("entered a lock another process holds")
    with safe_files.exclusive_lock(lock, busy=DataError("busy"), remove=True):
        assert lock.exists()
    assert not lock.exists()


def test_parameters_the_editor_ignores_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(command(seeds(tmp_path / "s"), tmp_path / "o", "--temperature", "0.4")) == 1
    assert "editor 'emulate' does not take --temperature" in capsys.readouterr().err
    assert main(command(seeds(tmp_path / "s"), tmp_path / "o", "--vary-seed")) == 1
    assert "--vary-seed needs --seed" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_mirror_and_rotate_round_trips_with_the_jpeg_editor(tmp_path: Path) -> None:
    seed_dir = seeds(tmp_path / "seeds")
    for prompt, period in (("mirror", 2), ("rotate", 4)):
        out = tmp_path / prompt
        argv = ["generate", "--editor", "jpeg", "--option", "quality=100", "--prompt", prompt,
                "--seed-images", str(seed_dir / "alpha.png"), "--out", str(out), "--runs", "1",
                "--steps", str(period)]  # fmt: skip
        assert main(argv) == 0
        got = rows(out)
        assert {r["variant"] for r in got} == {prompt}
        back = np.asarray(Image.open(out / got[-1]["file_name"]), float)
        start = np.asarray(Image.open(seed_dir / "alpha.png").convert("RGB"), float)
        assert back.shape == start.shape and np.abs(back - start).mean() < 1.5
    sizes = [r["output_size"] for r in rows(tmp_path / "rotate")]
    assert sizes == [[60, 80], [80, 60], [60, 80], [80, 60]]


def test_api_key_never_reaches_disk_or_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    needs("google-genai", "google.genai")
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    seed_dir, out = seeds(tmp_path / "seeds"), tmp_path / "set"
    with serve() as stub:
        argv = ["generate", "--editor", "gemini", "--endpoint", stub.url, "--seed-images", str(seed_dir),
                "--out", str(out), "--runs", "1", "--steps", "2", "--seed", "1",
                "--resolution", "1K"]  # fmt: skip
        assert main(argv) == 0
        assert len(stub.requests) == 4  # two seed images, two steps, through --endpoint
        assert main([*argv[:-6], "--runs", "1", "--steps", "3", *argv[-4:]]) == 1  # a settings refusal
        (out / "generate.json").unlink()
        (out / "metadata.jsonl").unlink()
        stub.script, stub.error_message = [403], f"PERMISSION_DENIED for key={KEY}"
        assert main(argv) == 1  # the service's error quotes the key
    captured = capsys.readouterr()
    assert "PERMISSION_DENIED for key=<redacted>" in captured.err
    assert KEY not in captured.out + captured.err
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path


def test_progress_bar_only_on_a_terminal() -> None:
    quiet = io.StringIO()
    bar = Progress(10, done=4, stream=quiet)
    bar.advance()
    bar.close()
    assert quiet.getvalue() == ""

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    loud = Tty()
    bar = Progress(10, done=4, stream=loud)
    bar.advance()
    assert "5/10 steps" in loud.getvalue() and "ETA 0:00:0" in loud.getvalue()
    assert "4/10 steps" in loud.getvalue() and "ETA ?" in loud.getvalue()


def test_reconstruction_plans_ask_their_prompts_in_turn_and_are_marked_not_for_iqa(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from banana_tests.editors.prompts import resolve

    out = tmp_path / "set"
    assert main(command(seeds(tmp_path / "seeds"), out, "--prompt", "recolour", runs=1, steps=3)) == 0
    got = [r for r in rows(out) if r["seed_image"] == "alpha"]
    plan = resolve("recolour").plan
    assert [r["prompt"] for r in got] == [plan[0], plan[1], plan[0]]
    assert {r["for_iqa"] for r in rows(out)} == {False} and {r["variant"] for r in rows(out)} == {"recolour"}
    said = capsys.readouterr().out
    assert "recolour is a reconstruction plan" in said and "test it" not in said
    assert {r["for_iqa"] for r in rows(_replicated(tmp_path))} == {True}


def _replicated(tmp_path: Path) -> Path:
    out = tmp_path / "replicate"
    assert main(command(seeds(tmp_path / "seeds"), out, runs=1, steps=1)) == 0
    return out


@pytest.mark.slow
def test_the_suite_leaves_out_records_not_for_iqa_unless_asked_for(tmp_path: Path) -> None:
    """A set holding replicate runs and a reconstruction plan's runs under the same variant name
    (`--variant replicate`): the suite tests the replicate runs alone and says how many records it
    left out, once under xdist too; `--banana-where=for_iqa=false` tests the plan's runs alone."""
    seed_dir, data, plans = seeds(tmp_path / "seeds"), tmp_path / "data", tmp_path / "plans"
    assert main(command(seed_dir, data, runs=1, steps=5)) == 0
    assert (
        main(command(seed_dir, plans, "--prompt", "recolour", "--variant", "replicate", runs=1, steps=5)) == 0
    )
    lines = (data / "metadata.jsonl").read_text().splitlines()
    for row in rows(plans):  # the plan's runs become run 1 of the same set
        source = plans / row["file_name"]
        row["run"], row["file_name"] = 1, row["file_name"].replace("/run0/", "/run1/")
        (data / row["file_name"]).parent.mkdir(parents=True, exist_ok=True)
        (data / row["file_name"]).write_bytes(source.read_bytes())
        lines.append(json.dumps(row))
    (data / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "test_suite.py").write_text(SUITE_MODULE)
    metric = install_known_metrics(tmp_path) + ":noise_level"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(tmp_path / "torch")}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--dataset=data", f"--metric={metric}",
           "--steps=5", "--aggregate=per-run", "-rA"]  # fmt: skip

    def cases(*extra: str) -> tuple[list[str], str]:
        done = subprocess.run(
            [*cmd, *extra], cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
        ran = [line.split(" ")[1] for line in done.stdout.splitlines() if line.startswith("PASSED")]
        return sorted(ran), done.stderr

    def ids(run: int) -> list[str]:
        return [
            f"test_suite.py::test_detects_degradation[noise_level-{s}-run{run}-step5]"
            for s in ("alpha", "beta")
        ]

    ran, said = cases("-n", "2")  # the note once a run, not once a worker
    assert ran == ids(0)
    assert said.count("banana-tests: left out 10 record(s) marked for_iqa=false") == 1
    ran, said = cases("--banana-where=for_iqa=false")
    assert ran == ids(1) and "left out" not in said


def test_a_set_of_plans_alone_says_why_nothing_was_selected(tmp_path: Path) -> None:
    from banana_tests.trajectories.selection import Selection
    from banana_tests.trajectories.sources import SourceOptions, load

    plans = tmp_path / "plans"
    assert main(command(seeds(tmp_path / "seeds"), plans, "--prompt", "recolour", runs=1, steps=3)) == 0
    selection = Selection(variant="recolour")
    loaded = load(SourceOptions(str(plans)), selection)
    assert (loaded.records, loaded.not_for_iqa) == ([], 6)
    said = selection.describe_empty(loaded.variants, loaded.seed_images, loaded.not_for_iqa)
    for carried in ("left out 6 record(s)", "for_iqa=false", "--banana-where=for_iqa=false"):
        assert carried in said, (carried, said)  # how many, why, and the option that tests them
    asked = Selection(variant="recolour", where={"for_iqa": "false"})
    assert len(load(SourceOptions(str(plans)), asked).records) == 6


@pytest.mark.parametrize(
    "for_iqa, where, selected",
    [
        (False, {}, False),
        ("FALSE", {}, False),  # a CSV column's text
        (True, {}, True),
        ("true", {}, True),
        (None, {}, True),  # not marked: the suite's own sets and Banana100's
        (False, {"for_iqa": "false"}, True),
        (True, {"for_iqa": "false"}, False),
        (True, {"for_iqa": "true"}, True),
    ],
)
def test_for_iqa_selection(for_iqa: object, where: dict[str, str], selected: bool) -> None:
    from banana_tests.trajectories.selection import Selection

    extra = {} if for_iqa is None else {"for_iqa": for_iqa}
    assert Selection(where=where).matches("alpha", "replicate", extra) is selected


def test_a_for_iqa_that_is_no_boolean_is_refused_by_both_readers() -> None:
    from banana_tests.trajectories.records import DataError, check_for_iqa

    assert [check_for_iqa(v, columnar=True) for v in (None, "", "False", "true", True)] == [
        None,
        None,
        False,
        True,
        True,
    ]
    for value, columnar in (("maybe", True), ("false", False), (0, True)):
        with pytest.raises(DataError, match="for_iqa must be true or false, got"):
            check_for_iqa(value, columnar)


@pytest.mark.slow
def test_a_second_generate_into_a_folder_in_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "set"
    out.mkdir()
    with held_lock(out / ".generate.lock"):
        assert main(command(seeds(tmp_path / "seeds"), out)) != 0
    assert f"another `banana-tests generate` is writing to {out}" in capsys.readouterr().err
    assert not (out / "metadata.jsonl").exists()
    assert main(command(tmp_path / "seeds", out)) == 0  # the holder is gone, and so is its lock
