"""`banana-tests`: the command line beside the pytest suite.

Each module under `banana_tests.commands` holds one subcommand or a few of one concept and exposes
`add_parser(subparsers)`, which registers them and sets `func(args) -> int` as each one's handler.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import version

COMMANDS = ("metrics", "report", "generate", "maintenance", "judge", "score_step")
"""The modules of the subcommands, in the order `--help` lists them."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="banana-tests", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {version('banana-tests')}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"banana_tests.commands.{name}").add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; SIGTERM stops it as Ctrl-C does (banana_tests.termination)."""
    from banana_tests.termination import sigterm_stops

    args = parser().parse_args(argv)
    absent = missing_extra(args)
    if absent is not None:
        print(f"banana-tests {args.command}: error: {absent}", file=sys.stderr)
        return 4
    with sigterm_stops():
        return int(args.func(args))


def missing_extra(args: argparse.Namespace) -> str | None:
    """The line naming the extra a command's editor or judge needs, when it is not installed:
    said before the command starts, with pytest's exit code for a usage error (4)."""
    from metrics_under_test import extras

    editor = getattr(args, "editor", None) if args.command == "generate" else None
    judge = getattr(args, "judge", None) if args.command == "judge" else None
    if editor is not None:
        return extras.missing(f"--editor={editor}", extras.EDITORS.get(editor))
    if judge is not None:
        return extras.missing(f"--judge={judge}", extras.JUDGES.get(judge))
    return None


if __name__ == "__main__":
    sys.exit(main())
