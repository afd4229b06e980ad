"""`banana-tests`: the command line beside the pytest suite.

Each subcommand lives in its own module under `banana_tests.commands` and exposes
`add_parser(subparsers)`, which registers it and sets `func(args) -> int` as its handler.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import version

COMMANDS = ("metrics", "report", "generate", "fixtures", "options", "judge", "score", "plan", "cache")


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
    with sigterm_stops():
        return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
