"""A small AST mutation tester for the verdict core: `python -m tests.mutation` (tox -e mutation).

Why hand-rolled: it mutates in memory and never touches the working tree (other developers edit
it at the same time), needs no configuration file, and runs the fast tier's tests only (`-m "not slow"`),
with no torch. Each mutant is one change to one node of a target function:

- comparisons: `<` ↔ `<=`, `>` ↔ `>=`, `==` ↔ `!=`, `in` ↔ `not in`, `is` ↔ `is not`;
- arithmetic: `+` ↔ `-`, `*` ↔ `/`, `//` → `/`, `%` → `*`; `and` ↔ `or`; `not x` → `x`;
- constants: a number n → n + 1, `True` ↔ `False`, `None` → `""`; a non-empty string → `"XX"`
  (docstrings and f-string pieces are left alone: a changed message is not a changed verdict);
- `return x` → `return None`.

The parent process imports pytest, numpy, PIL and hypothesis once and forks one child per
mutant; the child puts the mutated module in front of every other import finder and runs the
target's tests with `-x`. A mutant is killed when they fail (or time out), survives when they
pass. Equivalent survivors are listed with their reasons in tests/MUTATION.md.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.abc
import importlib.util
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

PROJECT = Path(__file__).resolve().parent.parent

# target file -> (functions to mutate, "Class.method", "function" or a module-level "NAME = ..."; None =
# the whole module), tests
TARGETS: dict[str, tuple[frozenset[str] | None, tuple[str, ...]]] = {
    "banana_tests/verdicts/gaps.py": (
        None,
        (
            "tests/test_gaps.py",
            "tests/test_engine_properties.py",
            "tests/test_verdict_core.py",
            "tests/test_uncertainty_stats.py",
        ),
    ),
    "metrics_under_test/spec.py": (
        frozenset({"Scale.__post_init__", "Scale.normalise", "Scale.flipped", "MetricSpec.scale"}),
        (
            "tests/test_gaps.py",
            "tests/test_engine_properties.py",
            "tests/test_verdict_core.py",
            "tests/test_table2.py",
            "tests/test_registry.py",
        ),
    ),
    "banana_tests/verdicts/verdict.py": (None, ("tests/test_verdict_core.py", "tests/test_saturation.py")),
    "banana_tests/verdicts/record.py": (
        None,
        (
            "tests/test_verdict_core.py",
            "tests/test_cases.py",
            "tests/test_engine_properties.py",
            "tests/test_junit.py",
            "tests/bad_inputs/test_report_generate.py",
        ),
    ),
    "banana_tests/verdicts/matrix.py": (None, ("tests/test_verdict_core.py", "tests/test_baseline.py")),
    "banana_tests/verdicts/baseline.py": (None, ("tests/test_baseline.py", "tests/test_verdict_core.py")),
    "banana_tests/reports/junit.py": (
        None,
        ("tests/test_junit.py", "tests/test_verdict_core.py", "tests/bad_inputs/test_report_generate.py"),
    ),
    "banana_tests/reports/junit_testcase.py": (
        None,
        ("tests/test_junit.py", "tests/test_verdict_core.py", "tests/bad_inputs/test_report_generate.py"),
    ),
    "banana_tests/reports/sourced.py": (None, ("tests/test_junit.py", "tests/test_verdict_core.py")),
    "banana_tests/trajectories/records.py": (
        None,
        ("tests/test_trajectories.py", "tests/bad_inputs/test_data.py", "tests/test_verdict_core.py"),
    ),
    "banana_tests/trajectories/imagefolder.py": (
        None,
        ("tests/test_trajectories.py", "tests/bad_inputs/test_data.py", "tests/test_verdict_core.py"),
    ),
    "banana_tests/scoring/score_identity.py": (
        frozenset({"identity", "identity_key"}),
        ("tests/test_cache.py",),
    ),
    "metrics_under_test/registry.py": (frozenset({"PAPER_METRICS"}), ("tests/test_table2.py",)),
}
# Imported by the parent before it forks, so that no child pays for them: heavy third-party
# modules the target's tests use (never a banana_tests module: a child must import the mutant).
WARM: dict[str, tuple[str, ...]] = {
    "banana_tests/trajectories/records.py": ("datasets",),
    "banana_tests/trajectories/imagefolder.py": ("datasets",),
}
# A mutant whose tests run longer than this many baselines (or MIN_TIMEOUT_S) loops: killed.
TIMEOUT_FACTOR, MIN_TIMEOUT_S = 4.0, 30.0

_SWAP: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
    ast.Mod: ast.Mult, ast.And: ast.Or, ast.Or: ast.And,
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    path: str
    index: int  # the index-th mutation point of the file, in a fixed walk order
    line: int
    what: str

    @property
    def module(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")


def _docstrings(tree: ast.AST) -> set[int]:
    """Strings standing alone as statements: docstrings, also of attributes and type aliases."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _scopes(tree: ast.Module, functions: frozenset[str] | None) -> Iterator[ast.AST]:
    if functions is None:
        yield tree
        return
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in functions:
            yield node
        target = node.target if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [None])[0]
        if isinstance(target, ast.Name) and target.id in functions:
            yield node  # a module's table of data (`PAPER_METRICS = ...`)
        if isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef) and f"{node.name}.{sub.name}" in functions:
                    yield sub


def _points(tree: ast.Module, functions: frozenset[str] | None) -> list[tuple[ast.AST, str, object]]:
    """(node, description, replacement) for every mutation of the file, in walk order."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # f-string pieces are messages, not logic
            skip.update(id(v) for v in node.values)
        # Annotations are never evaluated (`from __future__ import annotations`).
        for annotation in (getattr(node, "returns", None), getattr(node, "annotation", None)):
            if annotation is not None:
                skip.update(id(n) for n in ast.walk(annotation))
    out: list[tuple[ast.AST, str, object]] = []
    for scope in _scopes(tree, functions):
        for node in ast.walk(scope):
            if isinstance(node, ast.Compare):
                for i, op in enumerate(node.ops):
                    if type(op) in _SWAP:
                        out.append((node, f"{type(op).__name__} -> {_SWAP[type(op)].__name__}", ("ops", i)))
            elif isinstance(node, ast.BinOp | ast.BoolOp | ast.AugAssign) and type(node.op) in _SWAP:
                out.append((node, f"{type(node.op).__name__} -> {_SWAP[type(node.op)].__name__}", "op"))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
                out.append((node, "not x -> x", "not"))
            elif isinstance(node, ast.Constant) and id(node) not in skip:
                v = node.value
                if isinstance(v, bool):
                    out.append((node, f"{v} -> {not v}", not v))
                elif isinstance(v, int | float):
                    out.append((node, f"{v!r} -> {v + 1!r}", v + 1))
                elif v is None:
                    out.append((node, "None -> ''", ""))
                elif isinstance(v, str) and v:
                    out.append((node, f"{v[:30]!r} -> 'XX'", "XX"))
            elif (
                isinstance(node, ast.Return)
                and node.value is not None
                and not (isinstance(node.value, ast.Constant) and node.value.value is None)
            ):
                out.append((node, "return x -> return None", "return"))
    return out


def mutants(path: str) -> list[Mutant]:
    functions, _ = TARGETS[path]
    tree = ast.parse((PROJECT / path).read_text())
    return [
        Mutant(path, i, getattr(node, "lineno", 0), what)
        for i, (node, what, _) in enumerate(_points(tree, functions))
    ]


def mutated_code(m: Mutant) -> object:
    functions, _ = TARGETS[m.path]
    tree = ast.parse((PROJECT / m.path).read_text())
    node, _, change = _points(tree, functions)[m.index]
    if isinstance(change, tuple):  # a comparison operator
        ops = node.ops  # type: ignore[attr-defined]
        ops[change[1]] = _SWAP[type(ops[change[1]])]()
    elif change == "op":
        node.op = _SWAP[type(node.op)]()  # type: ignore[attr-defined]
    elif change == "not":
        node.op = ast.UAdd()  # type: ignore[attr-defined]  # +x is x for bool-ish operands
        node.operand = ast.Call(ast.Name("bool", ast.Load()), [node.operand], [])  # type: ignore[attr-defined]
    elif change == "return":
        node.value = ast.Constant(None)  # type: ignore[attr-defined]
    else:
        node.value = change  # type: ignore[attr-defined]
    ast.fix_missing_locations(tree)
    return compile(tree, str(PROJECT / m.path), "exec")


class _MutantFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the mutated module in front of every other finder (the editable install's too)."""

    def __init__(self, m: Mutant) -> None:
        self.mutant, self.code = m, mutated_code(m)

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None):  # type: ignore[no-untyped-def]
        if fullname != self.mutant.module:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=str(PROJECT / self.mutant.path))

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return None

    def exec_module(self, module: ModuleType) -> None:
        module.__file__ = str(PROJECT / self.mutant.path)
        exec(self.code, module.__dict__)


def _pytest_args(tests: Sequence[str]) -> list[str]:
    """The fast tier of the target's tests: a slow test runs pytest in a child process, where the
    mutant is not, or scores a real metric, which takes minutes per mutant."""
    return [
        *tests,
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--assert=plain",  # the rewrite hook would serve banana_tests (a pytest11 plugin) itself
        "--hypothesis-profile=mutation",
        "-m",
        "not slow",
    ]


def run_one(m: Mutant | None, tests: Sequence[str], log: Path, timeout: float) -> str:
    """'killed', 'survived' or 'timeout' for mutant `m` (None: the unmutated baseline)."""
    pid = os.fork()
    if pid == 0:  # the child
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.chdir(PROJECT)
            os.environ["BANANA_MUTANT"] = "1"  # tests/conftest.py skips its working-tree check
            if m is not None:
                sys.meta_path.insert(0, _MutantFinder(m))
            import pytest

            code = pytest.main(_pytest_args(tests))
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 3
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.05)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("paths", nargs="*", default=list(TARGETS), help="target files (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/banana-mutation"), help="per-mutant logs")
    parser.add_argument("--only", type=int, nargs="*", help="only these mutant indices")
    args = parser.parse_args(argv)
    if args.list:
        for path in args.paths:
            for m in mutants(path):
                print(f"{m.path}:{m.line} #{m.index} {m.what}")
        return 0
    args.logs.mkdir(parents=True, exist_ok=True)
    # Imported once here, before any fork, so each child starts warm; never the targets.
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import pytest  # noqa: F401

    for path in args.paths:
        for name in WARM.get(path, ()):
            with contextlib.suppress(ImportError):  # its tests skip without it
                importlib.import_module(name)
    totals = {"killed": 0, "timeout": 0, "survived": 0}
    survivors: list[Mutant] = []
    for path in args.paths:
        _, tests = TARGETS[path]
        start = time.monotonic()
        base = run_one(None, tests, args.logs / "baseline.log", 10 * 60.0)
        base_s = time.monotonic() - start
        timeout = max(MIN_TIMEOUT_S, TIMEOUT_FACTOR * base_s)
        if base != "survived":
            print(f"{path}: the tests fail without any mutant; see {args.logs / 'baseline.log'}")
            return 2
        found = mutants(path)
        for m in found:
            if args.only is not None and m.index not in args.only:
                continue
            log = args.logs / f"{m.module}-{m.index}.log"
            result = run_one(m, tests, log, timeout)
            totals[result] += 1
            if result == "survived":
                survivors.append(m)
                print(f"SURVIVED {m.path}:{m.line} #{m.index} {m.what}", flush=True)
        took = time.monotonic() - start
        print(f"{path}: {len(found)} mutants; tests {base_s:.1f} s unmutated, {took:.0f} s all", flush=True)
    killed = totals["killed"] + totals["timeout"]
    total = killed + totals["survived"]
    print(f"killed {killed}/{total} ({100 * killed / max(total, 1):.1f} %), timeouts {totals['timeout']}")
    return 0 if not survivors else 1


if __name__ == "__main__":
    sys.exit(main())
