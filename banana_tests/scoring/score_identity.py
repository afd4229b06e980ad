"""A metric's score identity: everything that produces its scores, so that a change to any part is
a score cache miss. Every metric's holds the suite's own code on its scoring path (`SCORING`,
`BACKENDS`); a custom metric's, its own code, libraries and files (metrics_under_test.own_code);
and every metric's, the installed distributions it really loads (`loaded_libraries`).

The suite's code is listed by module, so that an upgrade of banana-tests that changes how an
image is decoded, batched, handed to a backend or its score read back rescores, and one that
changes only reports, commands or verdicts keeps the scores; tests/test_metric_identity.py keeps
the list whole: every module of the suite's that a listed one imports (at its top or inside a
function) is listed too, or in UNSCORED with why it cannot change a stored value. Scores are
stored raw, so the normalisation (metrics_under_test.spec's Scale) is no part of them; the one
normalised figure the cache holds, an invariance check's change, names the scale and its code in
its own cache name (banana_tests/families/invariance/test_invariance.py).

The installed distributions a metric really loads: a library its
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

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import NotRequired, TypedDict, cast

from banana_tests.safe_files import NotReadable, read_regular, write_atomic
from metrics_under_test.own_code import file_sha256
from metrics_under_test.protocol import MetricError
from metrics_under_test.spec import Backend, MetricSpec

SCORING = (
    "banana_tests.trajectories.images",  # an image file's bytes → RGB uint8 pixels
    "banana_tests.scoring.score_book",  # decode windows, batches, a raising batch tried smaller; pixels
    "banana_tests.scoring.batching",  # which images share a call, in what order
    "banana_tests.scoring.returned_scores",  # what a metric returned → one float per image
    "metrics_under_test.protocol",  # the conversion of one returned value
    "banana_tests.scoring.metric_calls",  # how a spec's model is built, and built again (after a hang)
    "banana_tests.scoring.process_tuning",  # torch's threads: the order a reduction sums in
)
"""Every backend's scoring path."""

BACKENDS = {
    Backend.PYIQA: ("metrics_under_test.pyiqa_backend",),
    Backend.VLM: ("metrics_under_test.vlm", "metrics_under_test.vlm_catalog"),
    Backend.CUSTOM: ("metrics_under_test.custom",),
}
"""Each backend's adapter: the pyiqa adapter's edit rescores no VLM."""

UNSCORED = {
    "banana_tests": "the package: its version only",
    "banana_tests.scoring": "a package docstring",
    "banana_tests.trajectories": "a package docstring",
    "metrics_under_test": "a package docstring",
    "banana_tests.safe_files": "reads a file's bytes unchanged (their sha256 keys the score)",
    "banana_tests.trajectories.records": "the record type and its errors",
    "banana_tests.scoring.score_cache": "stores the scores; what keys them is `identity`, itself the key",
    "banana_tests.scoring.score_identity": "what keys the scores (the code, the libraries), itself the key",
    "metrics_under_test.own_code": "finds a custom metric's code for its key",
    "metrics_under_test.weights": "checks and stages parameter files, whose sha256 is in the key",
    "metrics_under_test.spec": "the spec, whose name, backend and parameter files are in the key",
    "banana_tests.data": "the shipped seed images a custom metric is probed on; no probe score is kept",
}
"""The suite's modules the scoring path imports that cannot change a stored score, and why."""


def scoring_modules(backend: Backend) -> tuple[str, ...]:
    """The modules whose code decides a `backend` metric's stored scores."""
    return (*SCORING, *BACKENDS[backend])


@cache
def code_hashes(backend: Backend) -> dict[str, str]:
    """{module: sha256 of its source file} of `scoring_modules(backend)`, read once a process."""
    return {name: file_sha256(module_file(name)) for name in scoring_modules(backend)}


def module_file(name: str) -> Path:
    """The source file of one of the suite's modules, found without running it."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"banana-tests' module {name} is missing", name=name)
    return Path(spec.origin)


def identity(
    spec: MetricSpec, device: str, weight_hash: Callable[[Path], str] = file_sha256
) -> dict[str, object]:
    """What produces a metric's scores; a change to any part is a cache miss. Every metric's
    holds the suite's own code on its scoring path (`code_hashes`). A custom metric's part is all
    the code of its own it runs, the installed distributions (name and version) that code imports
    with every distribution they require, and the files it declares (`own_code`); a VLM's, the
    libraries that run the model and the hub commit its files come from. The device is its kind
    (`cuda`, not `cuda:1`), so xdist workers on different GPUs share their scores."""
    from importlib import metadata

    description: dict[str, object] = {"name": spec.name, "backend": spec.backend}
    description["suite"] = code_hashes(spec.backend)
    if spec.backend is Backend.CUSTOM:
        from metrics_under_test import custom, own_code

        description["version"] = custom.version(spec)
        description["precision"] = custom.precision(spec)
        description["sources"] = custom.sources(spec)
        description["libraries"] = custom.libraries(spec)
        description["files"] = own_code.declared_files(spec.files, weight_hash)
    elif spec.backend is Backend.VLM:  # the libraries that run the model (its adapters: "suite")
        from metrics_under_test import vlm

        libraries = "; ".join(f"{n} {metadata.version(n)}" for n in ("transformers", "torch", "pyiqa"))
        description["version"] = f"vlm; {libraries}"
        description["revision"] = vlm.revision(spec)  # the hub commit its files come from
        description["precision"] = "model default"
    else:
        description["version"] = (
            f"{spec.backend} {metadata.version(spec.backend.value)}; torch {metadata.version('torch')}"
        )
        description["precision"] = "float32"
    description["weights"] = {w.file: weight_hash(w.path) for w in spec.weights if w.path.exists()}
    description["device"] = device.partition(":")[0]  # cuda:1 scores as cuda:0 does
    return description


def identity_key(description: Mapping[str, object]) -> str:
    return hashlib.sha256(json.dumps(description, sort_keys=True).encode()).hexdigest()


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
    from banana_tests.scoring.metric_calls import built_metric
    from metrics_under_test.custom import probe
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
