"""`banana-tests generate`: make a trajectory set with an editing model."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

from banana_tests.core.machine import local_path
from banana_tests.counts import decimal_number_type, whole_number_type
from banana_tests.editors import base
from banana_tests.editors.prompts import VARIANTS
from banana_tests.termination import interrupt_status

RESOLUTIONS = ("1K", "2K", "4K")
MAX_RUNS = 1000
MAX_STEPS = 1000  # the paper's runs have 100; step files are named step<NNN>.png
MAX_SEED = 2**31 - 1  # the editing APIs' seeds are 32-bit
MAX_PRICE = 1000.0  # USD per call
DEVICE_EXIT = 4
"""The exit status when the --device asked for is not on this machine: the environment's fault,
as a usage error of the suite exits 4."""

SECRET_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "HF_TOKEN")
"""Values that must never be printed, whichever editor or library put them in a message."""


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "generate",
        help="make a trajectory set: each step feeds the editor's previous output back in",
        description="Make (or continue) a trajectory set in --out. Rerunning the same command after an"
        " interruption continues every run from its last finished step.",
    )
    p.add_argument("--editor", required=True, help=f"editor name ({', '.join(base.BUILTIN)} or a plugin's)")
    p.add_argument(
        "--seed-images", required=True, nargs="+", type=local_path, metavar="PATH", help="files or folders"
    )
    p.add_argument("--out", required=True, type=local_path, metavar="DIR", help="output imagefolder")
    p.add_argument(
        "--runs",
        type=whole_number_type(1, MAX_RUNS),
        default=5,
        help=f"runs per seed image, 1 to {MAX_RUNS} (default: 5)",
    )
    p.add_argument(
        "--steps",
        type=whole_number_type(1, MAX_STEPS),
        default=20,
        help=f"edits per run, 1 to {MAX_STEPS} (default: 20)",
    )
    p.add_argument("--prompt", default="replicate", help=f"prompt variant: {', '.join(VARIANTS)}")
    p.add_argument("--prompt-text", default=None, help="a prompt of your own (prompt name: custom)")
    p.add_argument("--variant", default=None, help="the set's `variant` field (default: the prompt's name)")
    p.add_argument(
        "--seed",
        type=whole_number_type(0, MAX_SEED),
        default=None,
        help=f"request seed, 0 to {MAX_SEED} (default: none passed)",
    )
    p.add_argument("--vary-seed", action="store_true", help="a different seed for every run and step")
    p.add_argument(
        "--temperature",
        type=decimal_number_type(0, 2),
        default=None,
        help="sampling temperature, 0 to 2 (gemini)",
    )
    p.add_argument(
        "--resolution",
        type=_resolutions,
        default=(),
        metavar="SIZE[,SIZE...]",
        help="output size (gemini: 1K, 2K, 4K); a list is used in turn, one per step (1K,2K,4K interleaves)",
    )
    p.add_argument("--model", default=None, help="model id (gemini: nano-banana-pro, nano-banana-2, ...)")
    p.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N|auto",
        help="processes making chains (seed image x run) side by side, at most the cores; auto: all"
        " of them (default: 1). The set's bytes are the same at any N",
    )
    p.add_argument(
        "--device",
        default="auto",
        help="torch device, diffusers and flux2-tiny-vae (default: auto; the CPU for flux2-tiny-vae)",
    )
    p.add_argument("--dtype", default="bfloat16", help="torch dtype for the diffusers editor")
    p.add_argument(
        "--endpoint",
        default=None,
        metavar="URL",
        help="base URL of the editor's service (gemini; default: the SDK's, or $GOOGLE_GEMINI_BASE_URL)",
    )
    p.add_argument(
        "--max-requests",
        type=whole_number_type(1),
        default=None,
        help="stop after this many API calls (1 or more)",
    )
    p.add_argument(
        "--price-per-image",
        type=decimal_number_type(0, MAX_PRICE),
        default=None,
        help=f"USD per call, 0 to {MAX_PRICE:g}, for the cost estimate",
    )
    p.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="editor-specific setting"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from banana_tests.editors.chains import Job, find_seed_images
    from banana_tests.editors.generation import Summary, generate
    from banana_tests.editors.prompts import resolve

    try:
        if args.vary_seed and args.seed is None:
            raise ValueError("--vary-seed needs --seed (the first seed of the sequence)")
        prompt = resolve("custom" if args.prompt_text is not None else args.prompt, args.prompt_text)
        config = base.EditorConfig(
            model=args.model,
            device=args.device,
            dtype=args.dtype,
            max_requests=args.max_requests,
            price_per_image=args.price_per_image,
            endpoint=args.endpoint,
            options=_options(args.option),
        )
        editor = base.create(args.editor, config)
        asked = {k: getattr(args, k) for k in base.OPTIONAL}
        unused = sorted(k for k, v in asked.items() if v not in (None, ()) and k not in editor.accepts)
        if unused:
            raise ValueError(f"editor {args.editor!r} does not take --{', --'.join(unused)}")
        if args.workers > 1 and args.max_requests is not None:
            raise ValueError("--max-requests counts one process's calls: use it with --workers 1")
        job = Job(
            editor=args.editor,
            prompt=prompt,
            variant=args.variant or prompt.name,
            runs=args.runs,
            steps=args.steps,
            seed_images=find_seed_images(args.seed_images),
            seed=args.seed,
            vary_seed=args.vary_seed,
            temperature=args.temperature,
            resolution=args.resolution,
        )
        summary: Summary = generate(job, editor, args.out, workers=args.workers)
    except base.DeviceUnavailable as exc:
        print(f"banana-tests generate: error: {exc}", file=sys.stderr)
        return DEVICE_EXIT
    except KeyboardInterrupt as stop:
        print("\ninterrupted: finished steps are kept; rerun the same command to continue", file=sys.stderr)
        return interrupt_status(stop)
    except Exception as exc:  # every failure ends as one clean line, with secrets scrubbed
        print(f"banana-tests generate: error: {_safe(exc)}", file=sys.stderr)
        return 1
    done = summary.already_done + summary.made
    print(
        f"{summary.made} step(s) made ({summary.requests} request(s)); {done}/{summary.total} in {args.out}"
    )
    if summary.stopped:
        print(
            f"banana-tests generate: {len(summary.stopped)} run(s) stopped at a step without an image;"
            " rerun the same command to ask again:\n  " + "\n  ".join(summary.stopped),
            file=sys.stderr,
        )
        return 1
    if not prompt.for_iqa:
        print(f"{prompt.name} is a reconstruction plan: its set is not for the IQA suite, as in the paper")
    else:
        # '=': see session.ownership.PATH_OPTIONS; `--pyargs`: the suite is collected from any folder
        test = [
            "pytest",
            "--pyargs",
            "banana_tests",
            f"--banana-dataset={args.out}",
            f"--banana-variant={job.variant}",
        ]
        print(f"test it: {shlex.join(test)}")
    return 0


def _options(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--option takes KEY=VALUE, got {item!r}")
        out[key.strip()] = value  # kept as typed: `negative_prompt= ` is one space
    return out


def _workers(text: str) -> int:
    """`auto` is every core this process may use; a number above them is refused: each worker runs
    one torch thread, so more workers than cores only take turns."""
    from banana_tests.scheduler.worker_count import usable_cores

    available = usable_cores()
    if text.strip().lower() == "auto":
        return available
    count = whole_number_type(1)(text)
    if count > available:
        raise argparse.ArgumentTypeError(
            f"{count} is more than the {available} core(s) here (auto uses them all)"
        )
    return count


def _resolutions(text: str) -> tuple[str, ...]:
    sizes = tuple(size.strip() for size in text.split(","))
    wrong = [size for size in sizes if size not in RESOLUTIONS]
    if wrong:
        raise argparse.ArgumentTypeError(f"{', '.join(map(repr, wrong))} not in {', '.join(RESOLUTIONS)}")
    return sizes


def _safe(exc: BaseException) -> str:
    secrets = [os.environ.get(name, "") for name in SECRET_ENV]
    return base.redact(f"{exc}" or type(exc).__name__, secrets)
