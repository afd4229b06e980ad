"""The installed distributions a metric really loads, for its score cache identity: a library its
library imports without declaring it (pyiqa imports icecream, which no `Requires-Dist` names)
changes its scores as much as a declared one.

Found by building the metric and scoring its probe in a fresh interpreter, so the answer does not
depend on what the run had imported before, and the model is never held by the process that asks
(xdist's controller). Every module added to `sys.modules` meanwhile is mapped by its top-level
name to the distributions that install it (`importlib.metadata.packages_distributions()`: no
`__file__` is read, so `torch.classes`' fake one and modules with none do no harm). Found once
a run, in the controller (its workers are handed the answer), and remembered beside the score
cache by the metric's declared identity and the versions found: a cached run builds nothing, and
a changed version of any distribution found makes it look again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import TypedDict, cast

from banana_tests.atomic import write_atomic
from banana_tests.regular_files import NotReadable, read_regular
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

Loaded = dict[str, dict[str, str]]
"""{metric name: {distribution: version}}."""


class Answer(TypedDict):
    """What one look found: the declared identity's key, and {distribution: version}."""

    key: str
    distributions: dict[str, str]


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
        current = next(
            (a for a in memo.get(spec.name, []) if a["key"] == key and _current(a["distributions"])),
            None,
        )
        if current is not None:
            found[spec.name] = dict(current["distributions"])
            continue
        distributions = discover(spec, device, weights_dir, import_dirs, timeout)
        if distributions is None:
            continue
        found[spec.name] = distributions
        memo[spec.name] = joined([{"key": key, "distributions": distributions}], memo.get(spec.name, []))
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
    if not isinstance(answer, dict) or set(answer) != {"key", "distributions"}:
        return False
    distributions = answer["distributions"]
    return (
        isinstance(answer["key"], str)
        and isinstance(distributions, dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in distributions.items())
    )


def discover(
    spec: MetricSpec,
    device: str,
    weights_dir: Path | None = None,
    import_dirs: Iterable[Path] = (),
    timeout: float = 600.0,
) -> dict[str, str] | None:
    """{distribution: version} of every module a fresh interpreter loads while it builds `spec`'s
    metric and scores its probe; None when it cannot (its cases say why)."""
    request = {
        "text": spec.target or spec.name,
        "name": spec.name,
        "device": device,
        "weights_dir": None if weights_dir is None else str(weights_dir),
        "import_dirs": [str(d) for d in import_dirs],
    }
    try:
        done = subprocess.run(
            [sys.executable, "-m", __name__, json.dumps(request)],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return None
    try:  # the answer is the child's last line, unless the metric printed after it (at exit)
        answer = json.loads(lines[-1])
    except ValueError:
        return None
    return {str(k): str(v) for k, v in answer.items()} if isinstance(answer, dict) else None


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


def _current(distributions: Mapping[str, str]) -> bool:
    """Every distribution of a remembered answer is installed at the version it had then."""
    try:
        return all(metadata.version(name) == version for name, version in distributions.items())
    except metadata.PackageNotFoundError:
        return False


def _unhashed(path: Path) -> str:
    """Weights do not decide which code loads: the memo's key names them without reading them."""
    return "weights"


def _child(request: Mapping[str, object]) -> None:
    """In the fresh interpreter: build the metric, score its probe, print what loaded."""
    from banana_tests.scoring.loading import built_metric
    from metrics_under_test.probe import probe
    from metrics_under_test.registry import resolve, stage_mirror

    weights = request["weights_dir"]
    sys.path[:0] = [str(d) for d in request["import_dirs"]]  # type: ignore[attr-defined]
    before = set(sys.modules)
    mirror = Path(str(weights)) if weights else None
    stage_mirror(mirror)  # before a custom metric's module or factory may build a pyiqa metric
    specs = resolve(str(request["text"]), mirror)
    spec = next(s for s in specs if s.name == request["name"])
    probe(spec.name, built_metric(spec, str(request["device"])))
    print(json.dumps(distributions_of(sys.modules.keys() - before)))


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
