"""Make a trajectory set with an editor: resumable, loss-free, refusing mixed settings.

Layout (a canonical imagefolder, see `trajectories`): `images/<seed>/run<r>/step<NNN>.png`,
one `metadata.jsonl` line per image, and `generate.json` with the settings that decide the
pixels. Each step feeds the previous output back to the editor as a fresh request.

Crash safety: an image is written to a temporary sibling, fsynced and renamed into place; only
then is its metadata line appended with one `write` and an fsync. So a line exists only for a
complete image, and a kill at any moment leaves at most a stray temp file, an image without a
line (made again on resume) or a partial last line (trimmed on resume). A rerun of the same
command continues every run from its last recorded step; recorded images missing at the end of
a run are made again. Until a first step is recorded, a rerun may change the settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from banana_tests.editors.base import Editor
from banana_tests.editors.chains import ASPECT_TOLERANCE, Chain, Job, Made, Stopped, steps
from banana_tests.editors.generate_settings import check_settings
from banana_tests.editors.progress import Progress
from banana_tests.editors.resume import read_resume, remove_temp_files
from banana_tests.editors.seed_images import check_image
from banana_tests.editors.twin_runs import Twins
from banana_tests.safe_files import append_json_line, exclusive_lock, fsync_dir, write_atomic
from banana_tests.trajectories.records import METADATA, DataError

LOCK = ".generate.lock"


@dataclass(frozen=True)
class Summary:
    total: int
    already_done: int
    made: int
    requests: int
    stopped: tuple[str, ...] = ()
    """Runs that stopped at a step the editor answered without an image (`NoImage`)."""


def generate(
    job: Job,
    editor: Editor,
    out: Path,
    *,
    stream: TextIO | None = None,
    log: Callable[[str], None] = print,
    workers: int = 1,
) -> Summary:
    """Make (or continue) the set in `out`; finished steps are never redone or lost. With
    `workers` > 1 the chains are made in that many processes (banana_tests.editors.workers), with
    the same bytes; this process stays the set's one writer."""
    out = Path(out)
    for path in job.seed_images.values():  # a bad seed is refused before any step of any chain
        check_image(path)
    out.mkdir(parents=True, exist_ok=True)
    busy = DataError(f"another `banana-tests generate` is writing to {out}")  # one writer per folder
    with exclusive_lock(out / LOCK, busy=busy, remove=True):  # the set is left as it was made
        check_settings(out, job.settings(editor), log)
        remove_temp_files(out)
        resume = read_resume(out, log)
        chains = [
            Chain(name, run, start, path if start == 0 else out / file_name)
            for name, path in sorted(job.seed_images.items())
            for run in range(job.runs)
            for start, file_name in [resume.last.get((name, run), (0, ""))]
            if start < job.steps
        ]
        total = len(job.seed_images) * job.runs * job.steps
        done = total - sum(job.steps - chain.start for chain in chains)
        note = editor.cost_estimate(total - done, max(job.resolution, default=None))  # a cycle: its largest
        if note and done < total:
            log(note)
        twins = Twins(job.editor, resume.made_by, log)
        if job.runs > 1 and done < total and getattr(editor, "deterministic", False):
            twins.warn(f"editor {job.editor!r} is deterministic: its {job.runs} runs will be byte-identical")
        progress = Progress(total, done, stream)
        counts = {"made": 0, "requests": 0}
        stopped: list[str] = []
        fd = os.open(out / METADATA, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        fsync_dir(out)  # a new metadata.jsonl must survive with its first line

        def take(event: Made | Stopped) -> None:
            """Record one finished step (image, then its line), or a chain that stopped."""
            if isinstance(event, Stopped):
                stopped.append(event.message)
                counts["requests"] += event.requests
                log(f"warning: {event.message}; this run stops here, the others go on")
                return
            row = event.row
            if row["aspect_changed"]:
                log(
                    f"warning: {row['seed_image']} run {row['run']} step {row['step']}: {job.editor!r}"
                    f" changed the aspect ratio ({row['input_size']} -> {row['output_size']}) beyond the"
                    f" paper's {ASPECT_TOLERANCE:.1%} crop; recorded as aspect_changed"
                )
            write_atomic(out / row["file_name"], event.data)
            append_json_line(fd, row, out / METADATA)
            twins.check(row["seed_image"], row["run"], row["step"], row["sha256"])
            counts["made"] += 1
            counts["requests"] += row["requests"]
            progress.advance()

        try:
            if workers > 1 and len(chains) > 1:
                from banana_tests.editors.workers import run_parallel

                run_parallel(job, editor, chains, workers, take)
            else:
                for chain in chains:
                    for event in steps(job, editor, chain):
                        take(event)
        finally:
            os.close(fd)
            progress.close()
    return Summary(total, done, counts["made"], counts["requests"], tuple(stopped))
