"""`banana-tests judge` end to end: a set made by `generate --editor gemini` against the local stub
of the Gemini REST API (tests/gemini_stub.py; the real google-genai SDK talks to it), whose canned
reasoning summaries admit the noise at known steps; then each judge backend reads them, the LLM
ones through the same stub (Gemini) or its OpenAI-compatible route, and must report exactly those
steps."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from syrupy.assertion import SnapshotAssertion

from banana_tests.cli import main
from banana_tests.http_retry import RetryPolicy
from banana_tests.judging import judges
from banana_tests.judging.judges import Verdict, question, read_answer
from banana_tests.judging.judgments import judge_set, per_run, per_seed, read_judgments
from banana_tests.trajectories.records import DataError
from tests.conftest import default_stops, held_lock, needs
from tests.gemini_stub import REFUSAL, Stub, question_of, serve

STEPS, RUNS = 6, 2
# The first step whose summary admits the noise, per (seed image, run); None: never within STEPS.
FIRST = {("holi", 0): 3, ("holi", 1): 5, ("rice", 0): 6, ("rice", 1): None}
KEY = "AIzaFAKE-judge-key-0123456789"
OPENAI_KEY = "sk-FAKE-judge-key"


def summary(seed: str, run: int, step: int) -> str:
    """What the editing model 'thinks' at a step: clean until its first acknowledgement, then it
    keeps noticing; the clean ones mention noise only to say it avoids adding any."""
    first = FIRST[(seed, run)]
    if first is not None and step >= first:
        return f"**Inspecting the input** I notice visible static noise and a green tint in {seed}'s shadows."
    return (
        f"**Replicating {seed}** I copy the composition exactly and avoid adding noise or changing colours."
    )


def admits(prompt: str) -> str:
    """The judge model's answer: YES when the summary in the question says 'I notice'."""
    said = prompt.split("<<<", 1)[1].rsplit(">>>", 1)[0]
    return "YES." if "I notice" in said else "No"


@dataclass(frozen=True)
class Question:
    """One judge request the stub received."""

    api: str  # "gemini" or "openai"
    model: str
    prompt: str
    path: str
    body: dict[str, Any]
    headers: dict[str, str]  # names in lower case


def questions(stub: Stub) -> list[Question]:
    """The judge requests among all the stub received (the edits carry an image), failed ones too."""
    out = []
    for body, path, headers in zip(stub.requests, stub.paths, stub.headers, strict=True):
        if path.endswith("/chat/completions"):
            out.append(Question("openai", body["model"], body["messages"][0]["content"], path, body, headers))
        elif (text := question_of(body)) is not None:
            model = re.search(r"models/([^:]+):generateContent", path)
            assert model is not None, path
            out.append(Question("gemini", model.group(1), text, path, body, headers))
    return out


@pytest.fixture
def stub() -> Iterator[Stub]:
    """tests/gemini_stub.py: edits answer with the canned summaries in generate's order (seed
    images sorted, runs, steps); judge questions are answered by `admits`."""
    with serve() as server:
        server.thoughts = [
            summary(s, r, k) for s in ("holi", "rice") for r in range(RUNS) for k in range(1, STEPS + 1)
        ]
        server.judge = admits
        yield server


@pytest.fixture
def made_set(stub: Stub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`banana-tests generate --editor gemini` against the stub: 2 seed images x 2 runs x 6 steps."""
    needs("google-genai", "google.genai")
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", stub.url)
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    rng = np.random.default_rng(0)
    for name in ("holi", "rice"):
        Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(seeds / f"{name}.png")
    out = tmp_path / "set"
    argv = ["generate", "--editor", "gemini", "--seed-images", str(seeds), "--out", str(out)]
    assert main([*argv, "--runs", str(RUNS), "--steps", str(STEPS)]) == 0
    assert stub.thoughts == [], "every canned summary was used"
    return out


def firsts(path: Path) -> dict[tuple[str, int], int | None]:
    return {(r.seed_image, r.run): r.first for r in per_run(read_judgments(path))}


# What the judge section must say about the canned set (FIRST): holi's runs at 3 and 5, rice's at
# 6 and never; each run's row: seed image, run, first step, judged up to, unclear answers at.
PER_SEED = [("holi", "4.0 ± 1.4", "2 of 2"), ("rice", "6.0 ± 0.0", "1 of 2")]
PER_RUN = [("holi", "0", "3", "3", "-"), ("holi", "1", "5", "5", "-"), ("rice", "0", "6", "6", "-"),
           ("rice", "1", "none", "6", "-")]  # fmt: skip


def judge_tables(text: str) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """The judge section's two tables (per seed image, per run), their body rows cell by cell."""
    section = text.split("## Generator self-evaluation", 1)[1]
    tables: list[list[tuple[str, ...]]] = []
    previous = ""
    for line in section.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            if not previous.startswith("|"):
                tables.append([])  # a header row starts a table
            else:
                tables[-1].append(tuple(cell.strip() for cell in line.strip("|").split("|")))
        previous = line
    per_seed, runs = tables[:2]
    return per_seed, runs


@pytest.mark.slow
def test_gemini_judge_reports_exactly_the_admitting_steps(
    made_set: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["judge", str(made_set), "--judge", "gemini", "--model", "gemini-judge-x"]) == 0
    out = capsys.readouterr().out
    path = made_set / "judgments-gemini.jsonl"
    assert firsts(path) == FIRST
    assert judge_tables(out) == (PER_SEED, PER_RUN)
    # each run judged in step order up to its first acknowledgement, never past it
    judged = questions(stub)
    assert len(judged) == 3 + 5 + 6 + 6 and {q.model for q in judged} == {"gemini-judge-x"}
    stored = f"{summary('holi', 0, 1)}\n\nHere is the replica."  # the record's `text`: thoughts, then reply
    assert judged[0].prompt == question(stored) and judged[0].headers["x-goog-api-key"] == KEY
    assert judged[0].body["generationConfig"] == {"temperature": 0.0}
    said = re.search(r"(\d+) step\(s\) judged now \((\d+) request\(s\)\), (\d+) before", out)
    assert said is not None and said.groups() == ("20", "20", "0")
    # and `report` shows the same section
    assert main(["report", "--paper-only", "--out", str(made_set / "r"), "--judgments", str(path)]) == 0
    assert judge_tables((made_set / "r" / "summary.md").read_text(encoding="utf-8")) == (PER_SEED, PER_RUN)


def test_judging_resumes_after_the_budget_and_a_torn_line(
    made_set: Path, stub: Stub, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["judge", str(made_set), "--judge", "gemini"]
    assert main([*argv, "--max-requests", "7"]) == 1
    assert "request budget of 7 used up" in capsys.readouterr().err
    path = made_set / "judgments-gemini.jsonl"
    assert len(read_judgments(path)) == 7
    with path.open("ab") as f:  # a kill mid-write
        f.write(b'{"seed_image": "rice", "ru')
    assert main(argv) == 0
    assert firsts(path) == FIRST and len(questions(stub)) == 20, "no step judged twice"
    assert main(argv) == 0 and len(questions(stub)) == 20, "a finished file costs no request"
    assert "0 step(s) judged now (0 request(s)), 20 before" in capsys.readouterr().out


def test_an_openai_compatible_endpoint_by_base_url(
    made_set: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    argv = [
        "judge",
        str(made_set),
        "--judge",
        "openai",
        "--base-url",
        f"{stub.url}/v1",
        "--model",
        "judge-7b",
    ]
    assert main(argv) == 0
    assert firsts(made_set / "judgments-openai.jsonl") == FIRST
    judged = questions(stub)
    assert {q.api for q in judged} == {"openai"} and len(judged) == 20
    stored = f"{summary('holi', 0, 1)}\n\nHere is the replica."
    first = judged[0]
    assert first.path == "/v1/chat/completions"
    sent = {name: first.headers.get(name) for name in ("authorization", "content-type")}
    assert sent == {"authorization": f"Bearer {OPENAI_KEY}", "content-type": "application/json"}
    assert first.body == {
        "model": "judge-7b",
        "messages": [{"role": "user", "content": question(stored)}],
        "temperature": 0,
    }


def llm_judge(api: str, stub: Stub, monkeypatch: pytest.MonkeyPatch) -> judges.Judge:
    """The judge `banana-tests judge --judge {api}` builds, sent to the stub, without backoff waits."""
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", stub.url)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    if api == "gemini":
        needs("google-genai", "google.genai")
    return judges.make(api, model="m", base_url=f"{stub.url}/v1", backoff=0.0)


@pytest.mark.parametrize("api", ["gemini", "openai"])
def test_rate_limits_server_errors_and_dropped_connections_are_retried(
    api: str, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub.script = [429, "drop", 503]
    answer = llm_judge(api, stub, monkeypatch).answer("I notice static.")
    assert answer == judges.Answer("YES.", 4) and len(questions(stub)) == 4


def test_a_refusal_of_the_openai_route_is_an_unclear_answer(
    made_set: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal (null content, a `refusal` text) is neither yes nor no: recorded, not an acknowledgement."""
    stub.script = ["block"]
    out = made_set / "j.jsonl"
    judge_set(made_set, llm_judge("openai", stub, monkeypatch), out, log=lambda _: None)
    first = read_judgments(out)[0]
    assert (first.seed_image, first.run, first.step, first.verdict) == ("holi", 0, 1, Verdict.UNCLEAR)
    assert first.answer == REFUSAL and firsts(out) == FIRST


@pytest.mark.parametrize("api", ["gemini", "openai"])
def test_a_client_error_stops_at_once_with_the_apis_message_and_no_key(
    api: str, made_set: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    llm_judge(api, stub, monkeypatch)  # the environment
    stub.script, stub.error_message = [400], "model 'm' is not served here"
    argv = ["judge", str(made_set), "--judge", api, "--model", "m", "--base-url", f"{stub.url}/v1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert len(questions(stub)) == 1 and "failed after 1 attempt(s)" in err
    assert "model 'm' is not served here" in err
    assert KEY not in err and OPENAI_KEY not in err
    assert not (made_set / f"judgments-{api}.jsonl").exists(), "a failed first call leaves no file"


def test_the_offline_keyword_judge_on_the_same_set(made_set: Path, stub: Stub) -> None:
    out = made_set / "kw.jsonl"
    assert main(["judge", str(made_set), "--judge", "keywords", "--out", str(out)]) == 0
    assert firsts(out) == FIRST and questions(stub) == []


def test_a_file_of_another_judge_is_not_mixed_in(made_set: Path) -> None:
    out = made_set / "kw.jsonl"
    judge_set(made_set, judges.KeywordJudge(), out)
    other = judges.OpenAIJudge(
        "http://127.0.0.1:9", "other", None, judges.Retrying(judges.RequestBudget(0), "x")
    )
    with pytest.raises(DataError, match="holds judgments by keywords keywords-v1"):
        judge_set(made_set, other, out)


def test_a_bad_judgments_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"seed_image": "a", "run": 0, "step": 1}\n')
    with pytest.raises(DataError, match=re.escape(f"{path}:1: not a judgment")):
        read_judgments(path)


@pytest.mark.parametrize(
    "answer, verdict",
    [
        ("YES", Verdict.ACKNOWLEDGES),
        ("yes, it mentions static", Verdict.ACKNOWLEDGES),
        ("**No**", Verdict.SILENT),
        ("no.", Verdict.SILENT),
        ("Maybe", Verdict.UNCLEAR),
        ("", Verdict.UNCLEAR),
    ],
)
def test_answers_are_read_by_their_first_word(answer: str, verdict: Verdict) -> None:
    assert read_answer(answer) is verdict


@pytest.mark.parametrize(
    "text, says",
    [
        ("I notice grainy static in the sky.", "YES"),
        ("Avoid adding noise.", "NO"),
        ("There is no visible noise.", "NO"),
        ("No blur here, but heavy noise in the shadows.", "YES"),
        ("A faithful copy.", "NO"),
    ],
)
def test_the_keyword_judge(text: str, says: str) -> None:
    assert judges.KeywordJudge().answer(text) == judges.Answer(says, 0)


def test_retries_back_off_and_every_attempt_counts() -> None:
    import urllib.error

    sleeps: list[float] = []
    retrying = judges.Retrying(judges.RequestBudget(3), "m", RetryPolicy(backoff=1.0, sleep=sleeps.append))
    calls = iter([judges.EndpointError(429, "slow"), urllib.error.URLError(ConnectionRefusedError())])

    def once() -> str:
        error = next(calls, None)
        if error is not None:
            raise error
        return "YES"

    assert retrying.call(once) == judges.Answer("YES", 3) and sleeps == [1.0, 2.0]
    with pytest.raises(judges.BudgetExhausted):
        retrying.call(once)


def test_per_seed_statistics() -> None:
    from banana_tests.judging.judgments import RunResult

    seeds = per_seed(
        [RunResult("holi", 0, 16, 16), RunResult("holi", 1, 24, 24), RunResult("rice", 0, None, 50)]
    )
    assert [(s.seed_image, s.text()) for s in seeds] == [
        ("holi", "20.0 ± 5.7"),
        ("rice", "never acknowledged"),
    ]


@pytest.mark.slow
def test_report_adds_the_judge_section(
    made_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    out = made_set / "kw.jsonl"
    judge_set(made_set, judges.KeywordJudge(), out)
    assert main(["report", "--paper-only", "--out", str(tmp_path / "r"), "--judgments", str(out)]) == 0
    summary_md = (tmp_path / "r" / "summary.md").read_text(encoding="utf-8")
    assert judge_tables(summary_md) == (PER_SEED, PER_RUN)
    assert summary_md[summary_md.index("## Generator self-evaluation") :] == snapshot
    capsys.readouterr()
    assert (
        main(["report", "--paper-only", "--out", str(tmp_path / "r2"), "--judgments", str(tmp_path / "no")])
        == 2
    )
    assert "no such judgments file" in capsys.readouterr().err


@pytest.mark.slow
def test_sigkill_at_random_moments_then_rerun_loses_and_repeats_nothing(made_set: Path, stub: Stub) -> None:
    """Judging in a process killed (SIGKILL) at random moments, rerun each time: the file ends as a
    run never killed writes it, each step once, and no request is repeated but the one a kill cut
    short."""
    reference = made_set / "reference.jsonl"
    judge_set(
        made_set,
        judges.OpenAIJudge(f"{stub.url}/v1", "m", None, judges.Retrying(judges.RequestBudget(None), "m")),
        reference,
    )
    killed = made_set / "killed.jsonl"
    argv = [sys.executable, "-m", "banana_tests.cli", "judge", str(made_set), "--judge", "openai",
            "--base-url", f"{stub.url}/v1", "--model", "m", "--out", str(killed)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    stub.delay = 0.02
    before = len(questions(stub))
    rng, kills = random.Random(5), 0
    for _ in range(12):
        done = killed.read_bytes().count(b"\n") if killed.exists() else 0
        if done >= 18 or kills >= 4:
            break
        target = rng.randint(done + 1, done + 4)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if killed.exists() and killed.read_bytes().count(b"\n") >= target:
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.03))  # anywhere: mid-request, mid-write, between two steps
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += proc.returncode == -signal.SIGKILL
    assert kills >= 2
    final = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert final.returncode == 0, final.stderr
    rows = [json.loads(line) for line in killed.read_text().splitlines()]
    keys = [(r["seed_image"], r["run"], r["step"]) for r in rows]
    assert len(keys) == len(set(keys)) == 20
    assert rows == [json.loads(line) for line in reference.read_text().splitlines()]
    assert 20 <= len(questions(stub)) - before <= 20 + kills


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stop", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["sigint", "sigterm"]
)
def test_an_interrupt_keeps_the_judgments_and_the_rerun_asks_only_the_rest(
    made_set: Path, stub: Stub, stop: signal.Signals, status: int
) -> None:
    """Ctrl-C (SIGINT) or SIGTERM mid-run: exit 130 or 143 with what to do, the finished
    judgments kept; the same command then asks only for the steps not judged (and at most the
    one request cut short). The stub holds the sixth request until the signal has landed, so the
    run cannot finish first however loaded the machine; the child starts with the signals at
    their defaults, whatever this process inherited."""
    out = made_set / "interrupted.jsonl"
    argv = [sys.executable, "-m", "banana_tests.cli", "judge", str(made_set), "--judge", "openai",
            "--base-url", f"{stub.url}/v1", "--model", "m", "--out", str(out)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    stub.script = [*["image"] * 5, "hang"]
    held = len(stub.requests) + 6
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_stops
    )
    deadline = time.monotonic() + 300
    while len(stub.requests) < held and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=300)
    stub.released.set()
    assert proc.returncode == status, err
    assert "interrupted: finished judgments are kept; rerun the same command to continue" in err
    kept = len(read_judgments(out))
    assert kept == 5
    final = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert final.returncode == 0, final.stderr
    said = re.search(r"(\d+) step\(s\) judged now \((\d+) request\(s\)\), (\d+) before", final.stdout)
    assert said is not None and said.groups() == (str(20 - kept), str(20 - kept), str(kept))
    assert firsts(out) == FIRST and 20 <= len(questions(stub)) <= 21


@pytest.mark.slow
def test_a_second_writer_is_refused_while_another_process_holds_the_file(made_set: Path) -> None:
    out = made_set / "kw.jsonl"
    busy = re.escape(f"another `banana-tests judge` is writing to {out}")
    with held_lock(out.with_name(out.name + ".lock")), pytest.raises(DataError, match=busy):
        judge_set(made_set, judges.KeywordJudge(), out)
    assert not out.exists()  # the refused call made the file, and removed it
    judge_set(made_set, judges.KeywordJudge(), out)  # the lock died with its holder
    assert firsts(out) == FIRST
