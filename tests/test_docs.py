"""The documentation as users read it: its marked blocks run, in a clean environment, its links
resolve, its option page is generated, and CI runs the README's test commands. No test here reads
prose, so a prose-only edit to README.md or docs/*.md fails none of them (markers: CONTRIBUTING.md,
tests/doc_blocks.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from banana_tests.data import SEEDS

from tests import costs_doc, layout_doc
from tests.conftest import PROJECT
from tests.doc_blocks import (
    README,
    Block,
    Role,
    all_blocks,
    linked_pages,
    marked_blocks,
    names_it_lacks,
    not_run_reason_holds,
    pages,
    readme_test_commands,
    shell_commands,
    unmarked_python_blocks,
)

README_MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*$", re.MULTILINE)
BLOCK_TIMEOUT_S = 300


def offline_env() -> dict[str, str]:
    """This environment's executables first on PATH, and no hub that could be reached or waited on."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def clean_env(home: Path) -> dict[str, str]:
    """A new user's shell: this environment's executables first on PATH, an empty home, offline,
    and nothing of this project's set-up (no TORCH_HOME, no weights mirror, no PYTHONPATH)."""
    bin_dir = str(Path(sys.executable).parent)
    home.mkdir(exist_ok=True)
    path = bin_dir + os.pathsep + os.environ.get("PATH", "")
    env = {"PATH": path, "HOME": str(home), "HF_HUB_OFFLINE": "1"}
    env.update({k: os.environ[k] for k in ("LANG", "TMPDIR") if k in os.environ})
    return env


# ---- the README and .ci/run ----


def test_the_readme_is_at_most_250_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= README_MAX_LINES


def pytest_invocations(commands: list[list[str]]) -> list[list[str]]:
    """The commands that run pytest, with their leading VAR=value assignments."""
    out = []
    for args in commands:
        program = [a for a in args if not re.match(r"^\w+=", a)]
        if program[:1] == ["pytest"] or program[:3] == ["python", "-m", "pytest"]:
            out.append(args)
    return out


def test_ci_runs_exactly_the_readmes_test_commands() -> None:
    """`.ci/run` runs the README's marked test commands, in their order, and no other pytest."""
    documented = readme_test_commands()
    assert len(documented) >= 2, "the README marks its test commands with <!-- banana: test -->"
    ci = shell_commands((PROJECT / ".ci" / "run").read_text(encoding="utf-8"))
    assert pytest_invocations(ci) == documented


def test_ci_runs_the_fast_tier_first_and_the_wheel_gate_after_both_tiers() -> None:
    """A failure in the unit tests stops CI before the slow tier; the wheel gate follows the tiers.
    The fast tier runs first in a venv with the test tools and no extra (no torch), then with all."""
    ci = shell_commands((PROJECT / ".ci" / "run").read_text(encoding="utf-8"))
    runs = pytest_invocations(ci)
    assert runs[0] == runs[1] == ["pytest", "tests", "-m", "not slow", "-n", "2"]
    assert runs[2] == ["pytest", "tests", "-m", "slow", "-n", "2"]
    assert ci.index(runs[2]) < ci.index(["bash", ".ci/wheel-gate"]) < ci.index(runs[3])
    first = ci.index(runs[0])
    core = [c for c in ci[:first] if "install" in c]
    assert core and all("torch" not in " ".join(c) and "[" not in " ".join(c) for c in core), core
    assert any(c[-2:] == ["--group", "test"] for c in core), core
    between = ci[first + 1 : first + ci[first + 1 :].index(runs[1]) + 1]
    assert any("[dev,all]" in " ".join(c) for c in between), between


def test_the_ci_check_compares_arguments() -> None:
    """One argument more is another command; a word `pytest` that runs no pytest is none."""
    script = "pip install pytest\necho pytest\nBANANA_PAPER_METRICS=1 pytest tests/x.py -n 2 -x  # note\n"
    assert pytest_invocations(shell_commands(script)) == [
        ["BANANA_PAPER_METRICS=1", "pytest", "tests/x.py", "-n", "2", "-x"]
    ]


# ---- markers ----


@pytest.mark.parametrize("page", linked_pages(), ids=lambda p: p.name)
def test_every_marker_is_before_a_block_it_can_run(page: Path) -> None:
    """A marker with a typo, or on a block of a language its runner does not run, would leave that
    block untested without a word: it fails here instead. A block shown and not run says why, and
    the reason must hold of its code."""
    for block in marked_blocks(page):
        if block.role is Role.RUN:
            assert block.language in ("bash", "python"), block.where
        elif block.role in (Role.TRIAL, Role.SHOWN):
            assert block.language == "python", block.where
            assert block.role is Role.TRIAL or not_run_reason_holds(block), f"{block.where}: {block.reason}?"
        else:
            assert block.language == "bash" and block.page == README, block.where


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.name)
def test_every_python_block_of_the_user_docs_runs_or_says_why_not(page: Path) -> None:
    """Each `python` block users read is run by a test (`run`, `trial`) or marked `shown` with a
    reason: an example that breaks (a KeyError on an unset TORCH_HOME) cannot go unnoticed."""
    assert unmarked_python_blocks(page) == []


def test_the_block_checks_find_an_unmarked_block_and_a_false_reason(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\ntrue\n```\n\n```python\nprint(1)\n```\n<!-- banana: run -->\n```python\nprint(2)\n```\n",
        encoding="utf-8",
    )
    assert unmarked_python_blocks(page) == [f"{page}:5"]
    page.write_text("<!-- banana: shown: needs a GPU -->\n```python\nprint(1)\n```\n", encoding="utf-8")
    [block] = marked_blocks(page)
    assert block.role is Role.SHOWN and not not_run_reason_holds(block)  # says GPU, uses none
    assert names_it_lacks("import numpy as np\ndef f(x):\n    return np.sum(x) + len(y)\n") == {"y"}
    whole = "for i in range(3):\n    print(i)\ntry:\n    pass\nexcept OSError as e:\n    e\n"
    assert names_it_lacks(whole) == set()


def test_a_bad_marker_is_an_error_naming_its_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n<!-- banana: rnu -->\n```bash\ntrue\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"page\.md:2: unknown role 'rnu'"):
        marked_blocks(page)
    page.write_text("<!-- banana: run -->\n\n```bash\ntrue\n```\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"page\.md:1: a marker must be followed by a fenced block"):
        marked_blocks(page)
    for marker in ("shown", "shown: it is long", "run: needs a GPU", "trial slow"):
        page.write_text(f"<!-- banana: {marker} -->\n```python\npass\n```\n", encoding="utf-8")
        with pytest.raises(ValueError, match=r"page\.md:1: "):
            marked_blocks(page)


# ---- links ----


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = INLINE_CODE.sub(lambda m: m.group()[1:-1], heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCED.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in HEADING.findall(text)}


def relative_links(page: Path) -> list[str]:
    """Link and image targets outside code, except URLs."""
    text = INLINE_CODE.sub("", FENCED.sub("", page.read_text(encoding="utf-8")))
    return [t for t in LINK.findall(text) if not SCHEME.match(t)]


@pytest.mark.parametrize("page", linked_pages(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no {resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, broken


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# A heading: `code`, too\n", encoding="utf-8")
    page.write_text(
        "[ok](there.md#a-heading-code-too) [gone](missing.md) ![img](nope.png) `[not](a-link.md)`\n"
        "[web](https://example.org/x) [anchor](#nowhere)\n```\n[in code](also-not.md)\n```\n",
        encoding="utf-8",
    )
    assert relative_links(page) == ["there.md#a-heading-code-too", "missing.md", "nope.png", "#nowhere"]
    assert anchors(tmp_path / "there.md") == {"a-heading-code-too"}


# ---- the generated option page ----


@pytest.mark.slow
def test_the_options_page_is_what_the_generator_prints_now() -> None:
    """docs/options.md is generated from pytest's parser; after changing an option, regenerate it
    with `banana-tests options > docs/options.md`."""
    run = subprocess.run(
        [sys.executable, "-m", "banana_tests.cli", "options"],
        capture_output=True,
        text=True,
        cwd=PROJECT / "docs",
        env=offline_env(),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    committed = (PROJECT / "docs" / "options.md").read_text(encoding="utf-8")
    assert committed == run.stdout, "docs/options.md is stale: run `banana-tests options > docs/options.md`"


def test_the_option_page_lists_every_option_of_the_parser() -> None:
    """The generator reads the suite's own parser: each option pytest knows in the banana-tests
    group is a row, with every spelling."""
    from banana_tests.commands.maintenance import GROUP, reference, suite_parser

    parser = suite_parser()
    ref = reference(parser)
    groups = [g for g in parser._groups if g.name.startswith(GROUP)]
    names = {n for g in groups for a in g.options for n in a.names()}
    assert names and sorted(s for o in ref.options for s in o.spellings) == sorted(names)
    assert "--metric" in names or "--banana-metric" in names
    dests = [a.attrs()["dest"] for g in groups for a in g.options]
    assert len(ref.options) == len(set(dests)), "one row per option, whatever its spellings"


# ---- the blocks themselves ----


def block_id(block: Block) -> str:
    return block.where


@pytest.fixture
def user_folder(tmp_path: Path) -> Path:
    """An empty folder a user might run a documented command from, with `seeds/` holding one
    seed image, as the `generate` examples expect."""
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    shutil.copy(SEEDS / "brick.png", seeds / "brick.png")
    return tmp_path


def runnable(block: Block) -> object:
    """A block as a test parameter: slow when it starts processes (every shell block does),
    imports torch or scores a real metric (`run slow`)."""
    slow = block.slow or block.language == "bash"
    return pytest.param(block, id=block_id(block), marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("block", [runnable(b) for b in all_blocks(Role.RUN)])
def test_the_documented_block_runs(block: Block, user_folder: Path) -> None:
    """Each `run` block, in an empty folder, offline, in a new user's environment: no TORCH_HOME,
    no weights mirror, an empty home."""
    if block.language == "bash":
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.text]
    else:
        script = user_folder / "block.py"
        script.write_text(block.text, encoding="utf-8")
        cmd = [sys.executable, str(script)]
    env = clean_env(user_folder.parent / "home")
    run = subprocess.run(
        cmd, capture_output=True, text=True, cwd=user_folder, env=env, timeout=BLOCK_TIMEOUT_S
    )
    assert run.returncode == 0, f"{block.where}\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in pages() if any(b.role is Role.TRIAL for b in marked_blocks(p))])
def test_the_documented_trial_passes(page: Path, tmp_path: Path) -> None:
    """A page's trial blocks, in order, are one test module of a user's project; on PIQE (no
    parameter files) on the embedded data it passes."""
    blocks = [b for b in marked_blocks(page) if b.role is Role.TRIAL]
    (tmp_path / "test_trial.py").write_text("\n\n".join(b.text for b in blocks), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "test_trial.py", "--metric=piqe", "-p", "no:cacheprovider", "-q"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(tmp_path / "home"),
        timeout=BLOCK_TIMEOUT_S,
    )
    assert run.returncode == 0, f"{[b.where for b in blocks]}\n{run.stdout[-4000:]}\n{run.stderr[-3000:]}"
    assert " passed" in run.stdout.splitlines()[-1], run.stdout[-2000:]


def test_the_development_layout_lists_the_tree() -> None:
    """CONTRIBUTING.md's module list is the tree's; refresh: `python -m tests.layout_doc --write`."""
    text = layout_doc.LAYOUT.doc.read_text(encoding="utf-8")
    assert text == layout_doc.LAYOUT.refreshed(text), "stale: run `python -m tests.layout_doc --write`"


def test_the_measured_cost_table_is_the_data_files() -> None:
    """docs/metrics.md's cost table is `measured_costs.json`'s; refresh with
    `python -m tests.costs_doc --write`."""
    text = costs_doc.COSTS.doc.read_text(encoding="utf-8")
    assert text == costs_doc.COSTS.refreshed(text), "stale: run `python -m tests.costs_doc --write`"
