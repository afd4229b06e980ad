"""Your own metric on trial: `--metric=package.module:attr`, or a name in the entry point group
`banana_tests.metrics`.

The target is one of:
- a class whose class attributes are the protocol's `name`, `lower_better` and `score_range`
  (read without building it, so its model is built once per worker, when first scored);
- an instance, or a function marked with `metrics_under_test.protocol.metric`;
- a factory returning an instance (called once per process to read its attributes).

A class or factory that takes a `device` parameter is given the suite's device (`cpu`, `cuda`).
Optional attributes: `cost` (fast | slow | neural | vlm, default neural), `version` and
`precision` (both go into the score cache key), `files`: the data files or folders the metric
reads (checkpoints, tables), relative to its module's folder, hashed into the key too, and
`snapshot_points`: how far, in normalised points, its scores may move between machines before
a snapshot fails, and `invariance_points`: how far its median score may move under a one-pixel
shift or a 5 % resize (banana_tests/families/invariance/test_invariance.py), and `min_side`: the
smallest height and width, in pixels, it can score (a NIQE of 96 px blocks that needs two of
them: 192), which the crops of the invariance and control families then honour. Everything is
checked when the metric loads.

Before its first case a custom metric is probed (`probe`): it scores crops of the shipped seed
images, one finite real number per image of a batch and another image shape in another call (the
suite batches images of one size together). Realistic content, not a synthetic pattern: a
published BRISQUE returns NaN on a flat checkerboard yet scores every real image, and the probe
must not reject a metric the cases would accept. A metric that fails it gets one `MetricError`
naming the probe, the probe image and what came back.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from os import PathLike
from pathlib import Path
from typing import Any

from metrics_under_test import own_code
from metrics_under_test.protocol import (
    Image,
    Metric,
    MetricError,
    NotAScore,
    as_list,
    as_score,
    raised_at,
    short,
)
from metrics_under_test.spec import Backend, Cost, MetricSpec
from metrics_under_test.weights import MissingWeights, NotPublished, guard

GROUP = "banana_tests.metrics"
COSTS = tuple(cost.value for cost in Cost)
_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
NAME = re.compile(r"^(?!\.\.?$)[A-Za-z0-9_.+]+(-[A-Za-z0-9_.+]+)*$")
"""A metric's name: letters, digits, `_`, `.`, `+` and single `-` between them, not `.` or `..`.
It names files and folders (snapshots, the search's image pairs), so it holds no path separator
and is never a step out of its own folder (docs/metrics.md "Writing your own metric")."""
NAME_RULE = (
    "a non-empty string of letters, digits, '_', '.', '+' and single '-' between them, not '.' or '..'"
)


def check_name(where: str, name: object) -> None:
    """MetricError naming `where` (the target or entry point) unless `name` follows NAME."""
    if not isinstance(name, str) or not NAME.match(name):
        raise MetricError(f"{where}: name must be {NAME_RULE}, got {name!r}")


def is_target(text: str) -> bool:
    """`package.module:attr`, the form of an entry point's value."""
    return bool(_TARGET.match(text.strip()))


def entry_points() -> dict[str, str]:
    """Metric names installed in the `banana_tests.metrics` group → their targets."""
    return {ep.name: ep.value for ep in metadata.entry_points(group=GROUP)}


def import_target(target: str) -> Any:
    """The object `package.module:attr` names, or a MetricError saying which part is missing."""
    if not is_target(target):
        raise MetricError(f"{target!r} is not a metric target; write package.module:attribute")
    module_name, _, attr = target.strip().partition(":")
    try:
        obj: Any = own_code.import_module(module_name)
    except ImportError as exc:
        raise MetricError(f"metric {target!r}: cannot import module {module_name!r}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # a native library that fails to load: OSError, RuntimeError
        raise MetricError(
            f"metric {target!r}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    guard()  # a module that imported pyiqa: the files its metrics open are checked first
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise MetricError(f"metric {target!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def spec_for(target: str) -> MetricSpec:
    """The spec of a custom metric, its attributes checked; classes are not built."""
    obj = import_target(target)
    if not _is_instance(obj) and not isinstance(obj, type):
        obj = _build(target, obj, "cpu")
    check_attributes(target, obj)
    low, high = (float(v) for v in obj.score_range)
    return MetricSpec(
        name=obj.name,
        backend=Backend.CUSTOM,
        low=low,
        high=high,
        lower_better=obj.lower_better,
        cost=Cost(getattr(obj, "cost", Cost.NEURAL.value)),
        target=target.strip(),
        files=declared_files(target, obj),
        snapshot_points=getattr(obj, "snapshot_points", None),
        invariance_points=getattr(obj, "invariance_points", None),
        min_side=getattr(obj, "min_side", None),
    )


def entry_point_spec(name: str, target: str) -> MetricSpec:
    """The spec of the metric installed as entry point `name`. One name per metric: an entry
    point whose name is not the metric's declared name is refused, naming both (cases, JUnit and
    the cache use the declared one, so `--metric` would have answered to a name nothing else shows)."""
    check_name(f"entry point {name!r} -> {target}", name)
    spec = spec_for(target)
    if spec.name != name:
        raise MetricError(
            f"entry point {name!r} -> {target} declares name {spec.name!r}; rename one so they agree"
        )
    return spec


def build(spec: MetricSpec, device: str, probed: bool = True) -> Metric:
    """The metric behind a custom spec, built for `device` and, when `probed`, probed
    (`probe`; the suite probes it apart, to tell a hung probe from a hung build)."""
    if spec.target is None:
        raise MetricError(f"metric {spec.name!r} has no target")
    obj = import_target(spec.target)
    metric = obj if _is_instance(obj) else _build(spec.target, obj, device)
    check_attributes(spec.target, metric)
    if metric.name != spec.name:
        raise MetricError(f"metric {spec.target!r}: built with name {metric.name!r}, declared {spec.name!r}")
    if probed:
        probe(spec.name, metric)
    return metric


def check_attributes(target: str, obj: Any) -> None:
    """The protocol's attributes, each with a message naming the target and the attribute."""
    where = f"metric {target!r}"
    for attr in ("name", "lower_better", "score_range"):
        if not hasattr(obj, attr):
            raise MetricError(f"{where}: missing attribute {attr!r} (see metrics_under_test.protocol.Metric)")
    check_name(where, obj.name)
    if not isinstance(obj.lower_better, bool):
        raise MetricError(f"{where}: lower_better must be True or False, got {obj.lower_better!r}")
    rng = obj.score_range
    ok = isinstance(rng, tuple | list) and len(rng) == 2
    ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in rng)
    if not ok or not rng[0] < rng[1]:
        raise MetricError(f"{where}: score_range must be finite (low, high) with low < high, got {rng!r}")
    cost = getattr(obj, "cost", Cost.NEURAL.value)
    if not isinstance(cost, str) or cost not in COSTS:
        raise MetricError(f"{where}: cost must be one of {', '.join(COSTS)}, got {cost!r}")
    for tolerance in ("snapshot_points", "invariance_points"):
        points = getattr(obj, tolerance, None)
        if points is not None and not (
            isinstance(points, int | float) and not isinstance(points, bool) and 0 <= points < math.inf
        ):
            raise MetricError(f"{where}: {tolerance} must be a finite number >= 0, got {points!r}")
    side = getattr(obj, "min_side", None)
    if side is not None and not (isinstance(side, int) and not isinstance(side, bool) and side >= 1):
        raise MetricError(f"{where}: min_side must be a whole number of pixels >= 1, got {side!r}")
    if isinstance(obj, type):
        calls = any("__call__" in vars(c) for c in obj.__mro__ if c is not object)
    else:
        calls = callable(obj)
    if not calls:
        raise MetricError(f"{where}: a metric must be callable on a list of images (define __call__)")


def version(spec: MetricSpec) -> str:
    """The metric's declared `version`; its code is keyed by `sources`."""
    return str(getattr(import_target(spec.target), "version", "")) if spec.target else ""


def sources(spec: MetricSpec) -> dict[str, str]:
    """{module: sha256} of the user-owned code the metric runs (see `own_code`)."""
    if spec.target is None:
        return {}
    obj = import_target(spec.target)
    module = inspect.getmodule(obj)
    name = module.__name__ if module else spec.target.partition(":")[0].strip()
    return own_code.source_hashes(name)


def libraries(spec: MetricSpec) -> dict[str, str]:
    """{distribution: version} of the installed libraries the metric's code imports (`own_code`)."""
    if spec.target is None:
        return {}
    module = inspect.getmodule(import_target(spec.target))
    return own_code.library_versions(module.__name__ if module else spec.target.partition(":")[0].strip())


def declared_files(target: str, obj: Any) -> tuple[Path, ...]:
    """The metric's `files` (one path or several), absolute: relative ones lie beside its module."""
    declared = getattr(obj, "files", ())
    if isinstance(declared, str | PathLike):
        declared = (declared,)
    if not isinstance(declared, tuple | list) or not all(isinstance(f, str | PathLike) for f in declared):
        raise MetricError(
            f"metric {target!r}: files must be a path or a tuple of paths (str or Path), got {declared!r}"
        )
    module = inspect.getmodule(obj) or inspect.getmodule(type(obj))
    where = Path(module.__file__).parent if module and module.__file__ else Path.cwd()
    return tuple((where / Path(f).expanduser()).resolve() for f in declared)


def precision(spec: MetricSpec) -> str:
    return str(getattr(import_target(spec.target), "precision", "")) if spec.target else ""


def _is_instance(obj: Any) -> bool:
    return not isinstance(obj, type) and all(hasattr(obj, a) for a in ("name", "lower_better", "score_range"))


def _build(target: str, factory: Callable[..., Any], device: str) -> Any:
    if not callable(factory):
        raise MetricError(f"metric {target!r}: not a class, factory or metric instance: {factory!r}")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    kwargs = {"device": device} if "device" in params else {}
    try:
        return factory(**kwargs)
    except TypeError as exc:
        raise MetricError(
            f"metric {target!r}: cannot build it with {kwargs or 'no arguments'}: {exc}"
        ) from exc


@dataclass(frozen=True)
class ProbeImage:
    """A centre crop of one shipped seed image."""

    seed: str  # file name in banana_tests.data.SEEDS
    height: int
    width: int

    def __str__(self) -> str:
        return f"{self.seed} ({self.height}×{self.width} crop)"

    def pixels(self) -> Image:
        import numpy as np
        from banana_tests.data import SEEDS
        from PIL import Image as PILImage

        with PILImage.open(SEEDS / self.seed) as file:
            whole = np.asarray(file.convert("RGB"))
        top, left = (max(0, whole.shape[0] - self.height) // 2, max(0, whole.shape[1] - self.width) // 2)
        return np.ascontiguousarray(whole[top : top + self.height, left : left + self.width])

    def at_least(self, side: int | None) -> ProbeImage:
        """This crop at least `side` px high and wide (a metric's `min_side`), as far as its seed
        image allows."""
        if not side:
            return self
        return replace(self, height=max(self.height, side), width=max(self.width, side))


PROBE: tuple[tuple[ProbeImage, ...], ...] = (
    (ProbeImage("astronaut.png", 256, 256), ProbeImage("brick.png", 256, 256)),  # a batch of two
    (ProbeImage("coffee.png", 192, 320),),  # another shape, not square, in a call of its own
)
"""The probe's calls, each a batch. Typical sizes of the suite's images (its control crops are
160 to 320 px, its seed images 384 px wide)."""


def probe(name: str, metric: Callable[[Sequence[Image]], Sequence[float]]) -> None:
    """Score each of PROBE's batches with `metric`; a MetricError at the first that fails."""
    side = getattr(metric, "min_side", None)
    for planned in PROBE:
        batch = tuple(image.at_least(side) for image in planned)
        where = " and ".join(map(str, batch))
        try:
            raw = metric([image.pixels() for image in batch])  # fresh: a metric may write into them
        except (MissingWeights, NotPublished):
            raise  # weights fetched at the first call: the weights' rules, not a probe failure
        except Exception as exc:
            raise _failed(name, where, f"it raised {type(exc).__name__}: {exc}{raised_at(exc)}") from exc
        problem = _problem(batch, raw)
        if problem:
            raise _failed(name, where, problem)


def _failed(name: str, where: str, what: str) -> MetricError:
    return MetricError(f"metric {name!r} failed the load-time probe (its scores on {where}): {what}")


def _problem(batch: Sequence[ProbeImage], raw: Any) -> str:
    """What is wrong with `raw` as the scores of `batch`, or ''."""
    try:
        returned = as_list(raw)
    except NotAScore as exc:
        return f"it returned {exc}"
    if len(returned) != len(batch):
        return f"it returned {len(returned)} score(s) for {len(batch)} image(s): {short(returned, 120)}"
    try:
        values = [as_score(v) for v in returned]
    except NotAScore as exc:
        return f"it returned {exc}: return one float per image"
    bad = [f"{image}: {v!r}" for image, v in zip(batch, values, strict=True) if not math.isfinite(v)]
    return f"non-finite score(s), {'; '.join(bad)}" if bad else ""
