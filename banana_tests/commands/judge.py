"""`banana-tests judge`: find the first step where the generator's reasoning acknowledges the noise."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from banana_tests.core.machine import local_path
from banana_tests.counts import whole_number_type
from banana_tests.judging.judges import BACKENDS
from banana_tests.termination import interrupt_status


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "judge",
        help="ask a judge which step's reasoning summary first acknowledges the noise, per run",
        description="Judge each step's stored reasoning summary (the `text` field) of a trajectory set"
        " made by `banana-tests generate`, in step order until the first acknowledgement. Rerunning the"
        " same command after an interruption continues where it stopped. Prints the first step per run"
        " and its mean ± std per seed image; `banana-tests report --judgments FILE` adds them to a report.",
    )
    p.add_argument("dataset", type=local_path, metavar="SET", help="trajectory folder (with metadata.jsonl)")
    p.add_argument(
        "--judge", required=True, choices=BACKENDS, help="gemini, openai (any compatible URL), keywords"
    )
    p.add_argument("--model", default=None, help="judge model (gemini default: gemini-2.5-flash)")
    p.add_argument(
        "--base-url", default=None, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"
    )
    p.add_argument("--variant", default=None, help="the set's variant to judge (needed if it has several)")
    p.add_argument(
        "--out", type=local_path, default=None, help="judgments file (default: SET/judgments-<judge>.jsonl)"
    )
    p.add_argument(
        "--max-requests",
        type=whole_number_type(1),
        default=None,
        help="stop after this many API calls (1 or more)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from banana_tests.judging.judges import make
    from banana_tests.judging.judgments import judge_set, markdown, read_judgments

    out = args.out or args.dataset / f"judgments-{args.judge}.jsonl"
    try:
        judge = make(args.judge, model=args.model, base_url=args.base_url, max_requests=args.max_requests)
        summary = judge_set(args.dataset, judge, out, variant=args.variant)
        text = markdown(read_judgments(out))
    except KeyboardInterrupt as stop:
        print(
            "\ninterrupted: finished judgments are kept; rerun the same command to continue", file=sys.stderr
        )
        return interrupt_status(stop)
    except Exception as exc:  # one clean line, secrets scrubbed
        print(f"banana-tests judge: error: {_safe(exc)}", file=sys.stderr)
        return 1
    print(text)
    print(
        f"{summary.judged} step(s) judged now ({summary.requests} request(s)), {summary.already} before; "
        f"judgments in {out}"
    )
    return 0


def _safe(exc: BaseException) -> str:
    import os

    from banana_tests.editors.base import redact
    from banana_tests.judging.judges import GEMINI_KEY_ENV, OPENAI_KEY_ENV

    secrets = [os.environ.get(name, "") for name in (*GEMINI_KEY_ENV, OPENAI_KEY_ENV)]
    return redact(f"{exc}" or type(exc).__name__, secrets)
