"""CONTRIBUTING.md's module list, generated from the tree: each module and the first line of
its docstring. Refresh it after adding or merging modules with `python -m tests.layout_doc --write`;
tests/test_docs.py fails while it is stale."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.generated_block import GeneratedBlock

PROJECT = Path(__file__).resolve().parent.parent
PACKAGES = ("banana_tests", "metrics_under_test")
WIDTH = 110


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    line = doc.strip().splitlines()[0] if doc.strip() else ""
    room = WIDTH - 34
    return line if len(line) <= room else line[: room - 1].rstrip() + "…"


def _lines(folder: Path, indent: str) -> list[str]:
    out = []
    for path in sorted(p for p in folder.glob("*.py") if p.name != "__init__.py"):
        out.append(f"{indent}{path.name:<{34 - len(indent)}}{_summary(path)}".rstrip())
    for sub in sorted(p for p in folder.iterdir() if (p / "__init__.py").exists()):
        out.append(f"{indent}{sub.name + '/':<{34 - len(indent)}}{_summary(sub / '__init__.py')}".rstrip())
        out.extend(_lines(sub, indent + "  "))
    return out


def layout() -> str:
    """The generated block's body: every module of the two packages, in tree order."""
    body = []
    for package in PACKAGES:
        body.append(f"{package}/")
        body.extend(_lines(PROJECT / package, "  "))
    return "```\n" + "\n".join(body) + "\n```\n"


LAYOUT = GeneratedBlock(
    PROJECT / "CONTRIBUTING.md",
    "<!-- layout: python -m tests.layout_doc --write -->\n",
    "<!-- end of layout -->\n",
    layout,
)

if __name__ == "__main__":
    LAYOUT.main()
