"""The fenced blocks of README.md and docs/*.md that tests run, found by a marker comment.

A marker is a line `<!-- banana: ROLE -->` right before a fenced block; the role says which test
runs it (docs/development.md lists them). Tests take commands and code from the docs this way,
never their prose, so a prose-only edit to any doc fails no test.
"""

from __future__ import annotations

import enum
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import PROJECT

README = PROJECT / "README.md"
MARKER = re.compile(r"^<!-- banana: (?P<role>[a-z]+) -->$")
FENCE = re.compile(r"^```(?P<language>\w*)$")


class Role(enum.Enum):
    RUN = "run"  # tests/test_docs.py runs it (bash or python), in an empty folder
    TRIAL = "trial"  # tests/test_docs.py runs a page's trial blocks as one test module
    SUITE = "suite"  # tests/test_embedded_suite.py runs it
    TEST = "test"  # the project's test commands: .ci/run runs exactly these
    INSTALL = "install"  # tests/test_install_anywhere.py runs it beside a checkout


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    role: Role
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{shown(self.page)}:{self.line}"

    def commands(self) -> list[list[str]]:
        """A shell block's commands as arguments: continuation lines joined, comments and blank
        lines dropped."""
        return shell_commands(self.text)


def shown(page: Path) -> str:
    return str(page.relative_to(PROJECT)) if page.is_relative_to(PROJECT) else str(page)


def shell_commands(script: str) -> list[list[str]]:
    joined = script.replace("\\\n", " ")
    return [args for line in joined.splitlines() if (args := shlex.split(line, comments=True))]


def pages() -> list[Path]:
    return [README, *sorted((PROJECT / "docs").glob("*.md"))]


def marked_blocks(page: Path) -> list[Block]:
    """Every marked block of a page. A marker with an unknown role, or not followed by a fenced
    block, is an error naming the line: a typo must not silently leave a block untested."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks = []
    for at, line in enumerate(lines):
        marker = MARKER.match(line.strip())
        if not marker:
            continue
        where = f"{shown(page)}:{at + 1}"
        try:
            role = Role(marker["role"])
        except ValueError:
            raise ValueError(
                f"{where}: unknown role {marker['role']!r} (one of {[r.value for r in Role]})"
            ) from None
        fence = FENCE.match(lines[at + 1]) if at + 1 < len(lines) else None
        if not fence:
            raise ValueError(f"{where}: a marker must be followed by a fenced block")
        end = next((i for i in range(at + 2, len(lines)) if lines[i] == "```"), None)
        if end is None:
            raise ValueError(f"{where}: the fenced block is never closed")
        blocks.append(Block(page, at + 2, role, fence["language"], "\n".join(lines[at + 2 : end]) + "\n"))
    return blocks


def all_blocks(role: Role) -> list[Block]:
    return [b for page in pages() for b in marked_blocks(page) if b.role is role]


def suite_command() -> list[str]:
    """The README's command that runs the suite on the embedded data, as arguments."""
    [block] = [b for b in marked_blocks(README) if b.role is Role.SUITE]
    [command] = block.commands()
    return command


def readme_test_commands() -> list[list[str]]:
    """The README's test commands as arguments, in order."""
    return [c for b in marked_blocks(README) if b.role is Role.TEST for c in b.commands()]
