"""A trajectory set's judgments: judging its reasoning summaries step by step, resumable and
loss-free, and summarising them (the paper's measure: the first-acknowledgement step per run, its
mean ± std per seed image, from Holi at 20 ± 4 to Rice at 37 ± 8).

Each run's steps are judged in order until the first one that acknowledges the noise: the later
ones cannot change the first-acknowledgement step, so they cost no request. Judgments go to a
JSON-lines file, one line per step written with one `write` and an fsync, as `generate` writes
its metadata: a kill leaves at most a torn last line, trimmed on resume, and a rerun of the same
command continues where it stopped. One writer per file: a filelock beside it (`<file>.lock`),
which the kernel drops with the process.
"""

from __future__ import annotations

import json
import os
import stat
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from banana_tests.editors.generation import Progress
from banana_tests.judging.judges import PROMPT_ID, Judge, Verdict, read_answer
from banana_tests.safe_files import (
    NotReadable,
    append_json_line,
    exclusive_lock,
    fsync_dir,
    read_regular,
    require_regular,
)
from banana_tests.table_text import table
from banana_tests.trajectories.imagefolder import read_imagefolder
from banana_tests.trajectories.records import DataError, Record

JUDGMENTS = "judgments.jsonl"
MAX_JUDGMENTS_BYTES = 256 * 2**20  # ~1 million judgments of a few hundred bytes


@dataclass(frozen=True)
class Judgment:
    """One step's verdict, as stored."""

    seed_image: str
    run: int
    step: int
    verdict: Verdict
    answer: str
    judge: str
    model: str
    prompt: str = PROMPT_ID

    def row(self) -> dict[str, object]:
        return {
            "seed_image": self.seed_image,
            "run": self.run,
            "step": self.step,
            "verdict": self.verdict.value,
            "answer": self.answer,
            "judge": self.judge,
            "model": self.model,
            "prompt": self.prompt,
        }


@dataclass(frozen=True)
class Summary:
    judged: int  # steps judged by this process
    requests: int
    already: int  # judgments found from an earlier run


def runs_of(root: Path, variant: str | None = None) -> dict[tuple[str, int], list[Record]]:
    """The set's runs, each its records by step; one variant (the only one, or `variant`)."""
    trajectories = read_imagefolder(root)
    variants = trajectories.variants
    if variant is None and len(variants) > 1:
        raise DataError(f"{root} holds several variants ({', '.join(variants)}); choose one with --variant")
    chosen = variant or variants[0]
    runs: dict[tuple[str, int], list[Record]] = {}
    for r in sorted(trajectories.select(chosen), key=lambda r: (r.seed_image, r.run, r.step)):
        runs.setdefault((r.seed_image, r.run), []).append(r)
    if not runs:
        raise DataError(f"{root}: no records of variant {chosen!r} (it has {', '.join(variants)})")
    return runs


def read_judgments(path: Path) -> list[Judgment]:
    """The file's judgments, read without changing it (`report` reads a file it does not own): a
    torn last line (a kill mid-write: no newline and no judgment) is left out, a complete one
    without its newline counts. Only `judge_set`, the file's writer, trims a torn line."""
    if not path.exists():
        return []
    try:
        data = read_regular(path, MAX_JUDGMENTS_BYTES)
    except NotReadable as exc:
        raise DataError(f"{path}: {exc}") from exc
    return _parsed(path, data)[0]


def _parsed(path: Path, data: bytes) -> tuple[list[Judgment], int]:
    """The judgments in `data` and how many of its bytes they fill (less than all: a torn last line)."""
    out = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line and number == len(lines):
            break
        try:
            row = json.loads(line)
            fields = ("seed_image", "run", "step", "verdict", "answer", "judge", "model", "prompt")
            seed, run, step, verdict, answer, judge, model, prompt = (row[k] for k in fields)
            out.append(
                Judgment(
                    str(seed),
                    int(run),
                    int(step),
                    Verdict(verdict),
                    str(answer),
                    str(judge),
                    str(model),
                    str(prompt),
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if number == len(lines):  # no newline after it: a write cut short
                return out, len(data) - len(line)
            raise DataError(f"{path}:{number}: not a judgment ({exc}); fix or remove this line") from exc
    return out, len(data)


def _append_to(out: Path) -> int:
    """`out` open for appending, made if missing; a FIFO or device there is refused, not opened
    (opening a FIFO to write waits for a reader forever)."""
    try:
        if out.exists():
            require_regular(out)
    except NotReadable as exc:
        raise DataError(f"{out}: {exc}; choose another --out") from exc
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped in since the check
        os.close(fd)
        raise DataError(f"{out}: not a regular file; choose another --out")
    return fd


def _resumed(out: Path, fd: int) -> list[Judgment]:
    """The judgments `out` holds, its end made a line end for the next append (`fd`, O_APPEND): a
    torn last line is cut off, a complete one without its newline gets it."""
    try:
        data = read_regular(out, MAX_JUDGMENTS_BYTES)
    except NotReadable as exc:
        raise DataError(f"{out}: {exc}") from exc
    done, kept = _parsed(out, data)
    if kept < len(data):
        os.truncate(out, kept)
    elif data and not data.endswith(b"\n"):
        os.write(fd, b"\n")
    return done


def judge_set(
    root: Path,
    judge: Judge,
    out: Path,
    *,
    variant: str | None = None,
    stream: TextIO | None = None,
    log: Callable[[str], None] = print,
) -> Summary:
    """Judge every run of `root` up to its first acknowledgement, continuing `out` if it exists.
    The file is locked while written (one writer; the lock file goes when the call ends); a file
    this call made is removed if it fails before its first judgment, so an error leaves nothing
    behind."""
    runs = runs_of(root, variant)
    out.parent.mkdir(parents=True, exist_ok=True)
    busy = DataError(f"another `banana-tests judge` is writing to {out}")
    lock_file = out.with_name(out.name + ".lock")  # beside it: filelock truncates the file it locks
    with exclusive_lock(lock_file, busy=busy, remove=True):
        existed = out.exists()
        fd = _append_to(out)
        judged = requests = 0
        try:
            done = _resumed(out, fd)
            _check_same_judge(out, done, judge)
            fsync_dir(out.parent)
            known = {(j.seed_image, j.run, j.step): j for j in done}
            todo = [(key, records) for key, records in runs.items() if not _finished(key, records, known)]
            progress = Progress(sum(len(r) for _, r in todo), 0, stream)
            try:
                for (seed, run), records in todo:
                    for index, record in enumerate(records):
                        if (seed, run, record.step) in known:
                            progress.advance()
                            continue
                        judgment, cost = _judge_step(judge, record)
                        append_json_line(fd, judgment.row(), out)
                        judged, requests = judged + 1, requests + cost
                        progress.advance()
                        if judgment.verdict is Verdict.UNCLEAR:
                            said = judgment.answer[:120]
                            log(f"{record.source}: the judge's answer is neither yes nor no: {said!r}")
                        if judgment.verdict is Verdict.ACKNOWLEDGES:  # the later steps need no judging
                            for _ in records[index + 1 :]:
                                progress.advance()
                            break
            finally:
                progress.close()
        except BaseException:
            if not existed and judged == 0:
                out.unlink(missing_ok=True)
            raise
        finally:
            os.close(fd)
    return Summary(judged, requests, len(done))


def _judge_step(judge: Judge, record: Record) -> tuple[Judgment, int]:
    text = record.extra.get("text")
    if not isinstance(text, str) or not text.strip():
        verdict, answer, cost = Verdict.NO_TEXT, "", 0
    else:
        reply = judge.answer(text)
        verdict, answer, cost = read_answer(reply.text), reply.text.strip(), reply.requests
    return Judgment(
        record.seed_image, record.run, record.step, verdict, answer, judge.name, judge.model
    ), cost


def _finished(
    key: tuple[str, int], records: list[Record], known: dict[tuple[str, int, int], Judgment]
) -> bool:
    seen = [known.get((*key, r.step)) for r in records]
    return any(j is not None and j.verdict is Verdict.ACKNOWLEDGES for j in seen) or all(seen)


def _check_same_judge(out: Path, done: list[Judgment], judge: Judge) -> None:
    """One file, one judge: mixing judges or prompts would make the first step meaningless."""
    settings = {(j.judge, j.model, j.prompt) for j in done}
    mine = (judge.name, judge.model, PROMPT_ID)
    if settings - {mine}:
        theirs = ", ".join(f"{j} {m} (prompt {p})" for j, m, p in sorted(settings))
        raise DataError(
            f"{out} holds judgments by {theirs}, not {mine[0]} {mine[1]} (prompt {mine[2]}); "
            "rerun with that judge to continue it, or choose a new --out file"
        )


@dataclass(frozen=True)
class RunResult:
    seed_image: str
    run: int
    first: int | None  # the first step that acknowledges the noise; None: none of those judged
    judged_up_to: int  # the last step judged in this run
    unclear: tuple[int, ...] = ()  # steps whose answer was neither yes nor no

    @property
    def first_text(self) -> str:
        return str(self.first) if self.first is not None else "none"

    @property
    def unclear_text(self) -> str:
        return ", ".join(map(str, self.unclear)) or "-"


@dataclass(frozen=True)
class SeedResult:
    seed_image: str
    firsts: tuple[int, ...]  # first-acknowledgement steps of the runs that have one
    runs: int

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.firsts) if self.firsts else None

    @property
    def std(self) -> float | None:
        """Sample standard deviation over runs (n − 1); 0 for a single run."""
        return statistics.stdev(self.firsts) if len(self.firsts) > 1 else (0.0 if self.firsts else None)

    def text(self) -> str:
        if self.mean is None or self.std is None:
            return "never acknowledged"
        return f"{self.mean:.1f} ± {self.std:.1f}"


def per_run(judgments: Iterable[Judgment]) -> list[RunResult]:
    runs: dict[tuple[str, int], list[Judgment]] = {}
    for j in judgments:
        runs.setdefault((j.seed_image, j.run), []).append(j)
    out = []
    for (seed, run), steps in sorted(runs.items()):
        steps.sort(key=lambda j: j.step)
        acks = [j.step for j in steps if j.verdict is Verdict.ACKNOWLEDGES]
        unclear = tuple(j.step for j in steps if j.verdict is Verdict.UNCLEAR)
        out.append(RunResult(seed, run, min(acks) if acks else None, steps[-1].step, unclear))
    return out


def per_seed(runs: Iterable[RunResult]) -> list[SeedResult]:
    by_seed: dict[str, list[RunResult]] = {}
    for r in runs:
        by_seed.setdefault(r.seed_image, []).append(r)
    return [
        SeedResult(seed, tuple(r.first for r in rs if r.first is not None), len(rs))
        for seed, rs in sorted(by_seed.items())
    ]


def markdown(judgments: list[Judgment]) -> str:
    """The report section: mean ± std per seed image, then each run's first step."""
    runs = per_run(judgments)
    judges = sorted({f"{j.judge} ({j.model})" for j in judgments})
    lines = [
        "## Generator self-evaluation: first step whose reasoning summary acknowledges the noise",
        "",
        f"Judge: {', '.join(judges)}. Mean ± sample std over the runs that acknowledge it.",
        "",
        *table(
            ["seed image", "first acknowledgement", "runs acknowledging"],
            [[s.seed_image, s.text(), f"{len(s.firsts)} of {s.runs}"] for s in per_seed(runs)],
        ),
        "",
        *table(
            ["seed image", "run", "first step", "judged up to", "unclear answers at"],
            [[r.seed_image, r.run, r.first_text, r.judged_up_to, r.unclear_text] for r in runs],
        ),
    ]
    return "\n".join(lines) + "\n"
