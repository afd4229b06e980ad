"""The installed distributions a metric really loads, for its score cache identity: a library its
library imports without declaring it (pyiqa imports icecream, which no `Requires-Dist` names)
changes its scores as much as a declared one.

Found by building the metric and scoring its probe in a fresh interpreter, so the answer does not
depend on what the run had imported before, and the model is never held by the process that asks
(xdist's controller). Every module added to `sys.modules` meanwhile is mapped by its top-level
name to the distributions that install it (`importlib.metadata.packages_distributions()`: no
`__file__` is read, so `torch.classes`' fake one and modules with none do no harm). The modules
it tried to import and could not (`try: import fast_path`) are recorded too, by a finder last on
`sys.meta_path`. Found once a run, in the controller (its workers are handed the answer), and
remembered beside the score cache by the metric's declared identity: a cached run builds nothing,
and a changed version of any distribution found, or a module missing then and importable now,
makes it look again. The child writes its answer to a file of its own, so a metric that prints
(at exit, say) cannot hide it; a child that exits without one is one LoadedLibrariesWarning.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from banana_tests.safe_files import NotReadable, read_regular, write_atomic
from banana_tests.scoring.cache import identity, identity_key
from metrics_under_test.protocol import MetricError
from metrics_under_test.spec import Backend, MetricSpec

MEMO = "loaded_libraries.json"
"""Beside `scores.sqlite`: per metric, the answers found, each with the declared identity's key
(`cache merge` carries them, so a merged cache is not looked at again)."""
MEMO_BYTES = 4 * 2**20
"""A memo is read only if it is a regular file of at most this size: a few kB a metric, so a
larger one, a FIFO or a device in a shard's cache folder is not a memo."""
SUITE = "banana-tests"  # the suite's own code is versioned as the gate, not as a metric's library


class Found(TypedDict):
    """What a metric's build and probe loaded, {distribution: version}, and the modules they tried
    to import and could not, sorted: both are part of its score cache identity."""

    distributions: dict[str, str]
    missing: list[str]


Loaded = dict[str, Found]
"""{metric name: what it loads}."""


class Answer(TypedDict):
    """What one look found, under the declared identity's key. An earlier version's answer has
    no `missing`: it is never current, so the metric is looked at again."""

    key: str
    distributions: dict[str, str]
    missing: NotRequired[list[str]]


class LoadedLibrariesWarning(UserWarning):
    """A metric's look at what it loads gave no answer: its scores are cached without it."""


Memo = dict[str, list[Answer]]
"""{metric name: its answers, newest first}: shards merged from machines with other versions
each keep theirs, and a machine uses the one that is current for it."""


class MemoError(ValueError):
    """A memo file that is not one (`cache merge` names it and writes nothing)."""


def loaded_libraries(
    specs: Iterable[MetricSpec],
    device: str,
    cache_dir: Path,
    weights_dir: Path | None = None,
    import_dirs: Iterable[Path] = (),
    timeout: float = 600.0,
) -> Loaded:
    """The distributions each metric loads, from the memo in `cache_dir` when one of its answers
    has the metric's declared identity and every version it names is installed, else found
    again (`discover`). A metric the child cannot build or probe is left out: its cases error on
    their own. VLMs are looked at too (Q-Align loads icecream, which pyiqa does not declare):
    once per metric version and cache, before any worker holds a model."""
    memo_file = cache_dir / MEMO
    try:
        memo = read_memo(memo_file)
    except MemoError:
        memo = {}  # a damaged memo is found again, as a damaged score cache is set aside
    found: Loaded = {}
    changed = False
    for spec in specs:
        if spec.backend is Backend.CUSTOM and spec.target is None:
            continue  # a stand-in has no code to run
        try:
            key = identity_key(identity(spec, device, _unhashed))
        except (MetricError, metadata.PackageNotFoundError, OSError):  # its cases say why
            continue
        current = next((a for a in memo.get(spec.name, []) if a["key"] == key and _current(a)), None)
        if current is not None:
            found[spec.name] = {"distributions": current["distributions"], "missing": current["missing"]}
            continue
        answer = discover(spec, device, weights_dir, import_dirs, timeout)
        if answer is None:
            continue
        found[spec.name] = answer
        memo[spec.name] = joined([{"key": key, **answer}], memo.get(spec.name, []))
        changed = True
    if changed:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            write_memo(memo_file, memo)
        except OSError:
            pass  # an unwritable cache folder: found again next run, as the score cache warns
    return found


def read_memo(path: Path) -> Memo:
    """The memo in `path` (none: empty); MemoError naming the file when it is not one."""
    try:
        memo = json.loads(read_regular(path, MEMO_BYTES))
    except NotReadable as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return {}
        raise MemoError(f"{path}: not a loaded-libraries memo ({exc})") from exc
    except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, or nested too deep
        raise MemoError(f"{path}: not a loaded-libraries memo ({exc})") from exc
    if not isinstance(memo, dict) or not all(
        isinstance(answers, list) and all(_is_answer(a) for a in answers) for answers in memo.values()
    ):
        raise MemoError(f"{path}: not a loaded-libraries memo (not {{metric: [{{key, distributions}}]}})")
    return cast(Memo, memo)


def write_memo(path: Path, memo: Memo) -> None:
    write_atomic(path, json.dumps(memo, indent=1, sort_keys=True).encode())


def joined(*answers: Iterable[Answer]) -> list[Answer]:
    """The answers in order, each once."""
    out: list[Answer] = []
    for answer in (a for group in answers for a in group):
        if answer not in out:
            out.append(answer)
    return out


def merged_memo(memos: Iterable[Memo]) -> Memo:
    """Every answer of every memo, per metric, the first memo's first."""
    out: Memo = {}
    for memo in memos:
        for name, answers in memo.items():
            out[name] = joined(out.get(name, []), answers)
    return out


def _is_answer(answer: object) -> bool:
    if not isinstance(answer, dict) or set(answer) - {"missing"} != {"key", "distributions"}:
        return False
    return isinstance(answer["key"], str) and _is_found({"missing": [], **answer})


def _is_found(found: dict[str, object]) -> bool:
    """{distributions: {str: str}, missing: [str]}, whatever else it holds."""
    distributions, missing = found.get("distributions"), found.get("missing")
    return (
        isinstance(distributions, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in distributions.items())
        and isinstance(missing, list)
        and all(isinstance(m, str) for m in missing)
    )


def discover(
    spec: MetricSpec,
    device: str,
    weights_dir: Path | None = None,
    import_dirs: Iterable[Path] = (),
    timeout: float = 600.0,
) -> Found | None:
    """What a fresh interpreter loads, and fails to import, while it builds `spec`'s metric and
    scores its probe. None when it cannot build or probe it (its cases say why), or exits without
    an answer (a LoadedLibrariesWarning says so)."""
    with tempfile.TemporaryDirectory(prefix="banana-loaded-") as folder:
        answer_file = Path(folder) / "answer.json"
        request = {
            "text": spec.target or spec.name,
            "name": spec.name,
            "device": device,
            "weights_dir": None if weights_dir is None else str(weights_dir),
            "import_dirs": [str(d) for d in import_dirs],
            "answer": str(answer_file),
        }
        try:
            done = subprocess.run(
                [sys.executable, "-m", __name__, json.dumps(request)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # the metric's own output: the answer is in its file
                stderr=subprocess.DEVNULL,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return None  # its cases time out building it too
        except OSError as exc:
            _warn(spec, f"could not start a fresh interpreter ({exc})")
            return None
        try:
            answer = json.loads(read_regular(answer_file, MEMO_BYTES))
        except NotReadable:
            if done.returncode == 0:
                _warn(spec, "its look in a fresh interpreter exited 0 before it wrote an answer")
            return None  # a non-zero exit: it cannot be built or probed, which its cases say
        except ValueError:
            answer = None
    if not isinstance(answer, dict) or not _is_found(answer):
        _warn(spec, "its look in a fresh interpreter wrote no answer of the form {distributions, missing}")
        return None
    return {"distributions": answer["distributions"], "missing": answer["missing"]}


def _warn(spec: MetricSpec, why: str) -> None:
    warnings.warn(
        f"{spec.name}: which libraries it loads is unknown: {why}; its scores are cached without "
        "them, and it is looked at again next run",
        LoadedLibrariesWarning,
        stacklevel=3,
    )


def distributions_of(modules: Iterable[str]) -> dict[str, str]:
    """{distribution: version} of the installed distributions that provide these modules' top-level
    packages (the standard library and the suite's own code have none here)."""
    providers = metadata.packages_distributions()
    names = {dist for module in modules for dist in providers.get(module.partition(".")[0], ())}
    versions = {}
    for name in sorted(names):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.metadata["Name"] != SUITE and dist.version:
            versions[dist.metadata["Name"]] = dist.version
    return versions


def _current(answer: Answer) -> bool:
    """Every distribution of a remembered answer is installed at the version it had then, and
    every module it could not import still cannot be found. An answer of an earlier version,
    which did not record those modules, is not current."""
    if "missing" not in answer:
        return False
    try:
        versions = all(metadata.version(name) == version for name, version in answer["distributions"].items())
    except metadata.PackageNotFoundError:
        return False
    return versions and not any(importable(name) for name in answer["missing"])


def importable(name: str) -> bool:
    """Whether module `name` would be found now, by the finders on `sys.meta_path`, without
    importing it or its parents (`importlib.util.find_spec` imports a dotted name's parents: a
    missing `scipy._fast` would import scipy)."""
    parts = name.split(".")
    path: Sequence[str] | None = None
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        module = sys.modules.get(prefix)
        if module is not None:
            search = getattr(module, "__path__", None)
        else:
            spec = _find(prefix, path)
            if spec is None:
                return False
            search = spec.submodule_search_locations
        if i < len(parts):
            if search is None:
                return False  # a module, not a package: it has no submodules
            path = list(search)
    return True


def _find(name: str, path: Sequence[str] | None) -> importlib.machinery.ModuleSpec | None:
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            spec = find(name, path)
        except (ImportError, ValueError, OSError):  # a finder that refuses the name: not found by it
            continue
        if spec is not None:
            return cast(importlib.machinery.ModuleSpec, spec)
    return None


class _Misses(importlib.abc.MetaPathFinder):
    """Last on `sys.meta_path`: the names no finder before it found, each an import that failed
    (or an availability check, `importlib.util.find_spec`, that said no)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        self.names.add(fullname)
        return None

    def missing(self) -> list[str]:
        """The names still missing: a finder added after this one may have found some."""
        return sorted(n for n in self.names if n not in sys.modules and not importable(n))


def _unhashed(path: Path) -> str:
    """Weights do not decide which code loads: the memo's key names them without reading them."""
    return "weights"


def _child(request: Mapping[str, object]) -> None:
    """In the fresh interpreter: build the metric, score its probe, write what loaded and what
    could not be imported to the request's answer file."""
    from banana_tests.scoring.metric_model import built_metric
    from metrics_under_test.probe import probe
    from metrics_under_test.registry import resolve, stage_mirror

    weights = request["weights_dir"]
    sys.path[:0] = [str(d) for d in request["import_dirs"]]  # type: ignore[attr-defined]
    misses = _Misses()
    sys.meta_path.append(misses)
    before = set(sys.modules)
    mirror = Path(str(weights)) if weights else None
    stage_mirror(mirror)  # before a custom metric's module or factory may build a pyiqa metric
    specs = resolve(str(request["text"]), mirror)
    spec = next(s for s in specs if s.name == request["name"])
    probe(spec.name, built_metric(spec, str(request["device"])))
    found: Found = {
        "distributions": distributions_of(sys.modules.keys() - before),
        "missing": misses.missing(),
    }
    write_atomic(Path(str(request["answer"])), json.dumps(found).encode())


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
