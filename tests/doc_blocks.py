"""The fenced blocks of README.md and docs/*.md that tests run, found by a marker comment.

A marker is a line `<!-- banana: ROLE -->` right before a fenced block; the role says which test
runs it (CONTRIBUTING.md lists them). `<!-- banana: run slow -->` runs it in the slow tier, and
`<!-- banana: shown: REASON -->` marks a block that cannot run, for a reason this module can
check. Tests take commands and code from the docs this way, never their prose, so a prose-only
edit to any doc fails no test.
"""

from __future__ import annotations

import ast
import builtins
import enum
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import PROJECT

README = PROJECT / "README.md"
DOCS = PROJECT / "docs"
MARKER = re.compile(r"^<!-- banana: (?P<role>[a-z]+)(?P<slow> slow)?(?:: (?P<reason>.*?))? -->$")
FENCE = re.compile(r"^```(?P<language>\w*)$")


class Role(enum.Enum):
    RUN = "run"  # tests/test_docs.py runs it (bash or python), in an empty folder
    TRIAL = "trial"  # tests/test_docs.py runs a page's trial blocks as one test module
    SUITE = "suite"  # tests/test_embedded_suite.py runs it
    TEST = "test"  # the project's test commands: .ci/run runs exactly these
    INSTALL = "install"  # tests/test_install_anywhere.py runs it beside a checkout
    SHOWN = "shown"  # not run, for a reason in NOT_RUN_REASONS that not_run_reason_holds checks


# Why a block may be shown and not run, each with what the block must show for the reason to hold.
NOT_RUN_REASONS = {
    "needs a GPU": "cuda",
    "needs an API key": "API_KEY",
    "needs a network": "hf:",
    "a fragment of the code above": "",  # checked by names_it_lacks instead
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    role: Role
    language: str
    text: str
    slow: bool = False  # `run slow`: the block imports torch, scores a real metric or starts processes
    reason: str = ""  # `shown: REASON`

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
    """The user docs: the README and docs/*.md, not docs/research/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def linked_pages() -> list[Path]:
    """Every page whose links must resolve: the user docs, CONTRIBUTING.md and the research notes."""
    return [*pages(), PROJECT / "CONTRIBUTING.md", *sorted((DOCS / "research").glob("*.md"))]


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
        reason = marker["reason"] or ""
        if marker["slow"] and role is not Role.RUN:
            raise ValueError(f"{where}: only a run block can be marked slow")
        if (role is Role.SHOWN) != bool(reason) or (reason and reason not in NOT_RUN_REASONS):
            raise ValueError(f"{where}: a block not run says why, one of {sorted(NOT_RUN_REASONS)}")
        fence = FENCE.match(lines[at + 1]) if at + 1 < len(lines) else None
        if not fence:
            raise ValueError(f"{where}: a marker must be followed by a fenced block")
        end = next((i for i in range(at + 2, len(lines)) if lines[i] == "```"), None)
        if end is None:
            raise ValueError(f"{where}: the fenced block is never closed")
        text = "\n".join(lines[at + 2 : end]) + "\n"
        blocks.append(Block(page, at + 2, role, fence["language"], text, bool(marker["slow"]), reason))
    return blocks


def unmarked_python_blocks(page: Path) -> list[str]:
    """Where a page opens a `python` block that no marker precedes: such a block would be shown
    to users and never run."""
    lines = page.read_text(encoding="utf-8").splitlines()
    fences = [i for i, line in enumerate(lines) if line.startswith("```")]
    openings = fences[::2]  # fences alternate: an opening, then its closing
    return [
        f"{shown(page)}:{i + 1}"
        for i in openings
        if lines[i] == "```python" and not (i > 0 and MARKER.match(lines[i - 1].strip()))
    ]


def names_it_lacks(code: str) -> set[str]:
    """The names a block reads but neither defines, imports nor gets from builtins: a fragment
    of code shown elsewhere has some, a whole program none."""
    tree = ast.parse(code)
    bound = set(dir(builtins))
    read: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound


def not_run_reason_holds(block: Block) -> bool:
    """A `shown` block's reason is true of its code: it names what it needs (cuda, an API key, a
    hub set), or, as a fragment, reads a name it does not define."""
    if block.reason == "a fragment of the code above":
        return bool(names_it_lacks(block.text))
    return NOT_RUN_REASONS[block.reason] in block.text


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
