"""Where pyiqa keeps parameter files, and how a read-only mirror of them is put there.

pyiqa downloads into `torch.hub.get_dir()/pyiqa` and skips the download when the file is
already there. Computed here without importing torch, so the plugin stays light.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from metrics_under_test.published_weights import refusal


class MissingWeights(Exception):
    """A metric's parameter files are not here and cannot be downloaded now. Defined here, away
    from numpy and torch, so the plugin can catch it without importing either."""


def offline() -> bool:
    """The Hugging Face hub's offline switch, which pyiqa and transformers downloads obey."""
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def torch_hub_dir() -> Path:
    """`torch.hub.get_dir()`, by the same rules: $TORCH_HOME, else $XDG_CACHE_HOME/torch."""
    torch_home = os.environ.get("TORCH_HOME")
    if torch_home is None:
        xdg = os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        torch_home = os.path.join(xdg, "torch")
    return Path(os.path.abspath(os.path.expanduser(torch_home))) / "hub"  # absolute, as pyiqa's


def mirror_from_env() -> Path | None:
    """$BANANA_WEIGHTS_DIR as an absolute path, resolved against the directory the run starts in,
    and written back so: a relative one (`../shared/pyiqa-weights`) would otherwise mean another
    folder in each process this one starts elsewhere (pytest runs in temporary folders)."""
    value = os.environ.get("BANANA_WEIGHTS_DIR")
    if not value:
        return None
    mirror = Path(value).expanduser().resolve()
    os.environ["BANANA_WEIGHTS_DIR"] = str(mirror)
    return mirror


def pyiqa_cache_dir() -> Path:
    return torch_hub_dir() / "pyiqa"


def how_to_provide() -> str:
    """How a user puts a parameter file where pyiqa finds it without a download."""
    return (
        f"put the file(s) in {pyiqa_cache_dir()}, or in a folder passed as --weights-dir=FOLDER or "
        f"$BANANA_WEIGHTS_DIR, or run once with network access so pyiqa downloads them"
    )


class UnwritableCache(Exception):
    """A metric's parameter file is in the mirror, but the cache folder it must be staged into
    cannot be written: an error naming the folder and the fix, not a skip for a missing file."""


class NotPublished(Exception):
    """A parameter file, in the mirror or in pyiqa's cache, is not the published release of its
    name (metrics_under_test.published_weights): refused before pyiqa opens it, in one line naming
    the file, the sha256 found and the one expected. An error of the metric's cases, not a skip."""


# Files the mirror holds that their cache folder refused, by destination, with why. Process state,
# as pyiqa's cache folder is: the suite stages once per process, the metric checks when it loads.
REFUSED: dict[Path, str] = {}
# Destinations whose mirror copy is not the published file, so it was not staged, with why.
UNPUBLISHED: dict[Path, str] = {}


def stage(mirror: Path, targets: Iterable[tuple[str, Path]]) -> list[str]:
    """Put each file named in `targets` from `mirror` at its path: a hard link to the same file
    (no second copy), else a copy. Never a symbolic link: the destination is pyiqa's download
    cache, in the user's home by default, and a link there into the mirror outlives the run and
    dangles once the mirror moves; a real file there is what pyiqa's own download leaves. A link an
    earlier version left is replaced so.

    The mirror may be read-only (CI's shared folder); the destinations are pyiqa's writable
    cache. Files already there are left alone (pyiqa's opener checks them each run:
    metrics_under_test.pyiqa_files). A mirror file that is not the published release of its name
    is not staged but goes to UNPUBLISHED, and a destination that cannot be written (a read-only
    HOME or TORCH_HOME) to REFUSED, so only the metrics that need it fail, when they load.
    Returns the names staged.
    """
    staged = []
    for name, dst in targets:
        src = mirror / name
        try:
            if not src.is_file() or (dst.exists() and not _link_into(dst, mirror)):
                continue
            why = refusal(src)
            if why is not None:
                UNPUBLISHED[dst] = why
                continue
            UNPUBLISHED.pop(dst, None)
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{name}.{os.getpid()}.tmp")
            try:
                os.link(src.resolve(), tmp)
            except OSError:  # another file system, or protected_hardlinks on a file not the user's
                shutil.copyfile(src, tmp)
            os.replace(tmp, dst)  # atomic: concurrent xdist workers may stage the same file
        except OSError as exc:
            REFUSED[dst] = (
                f"cannot stage {name} from {mirror} into {dst.parent} "
                f"({exc.strerror or exc}: {exc.filename or dst.parent}); set TORCH_HOME to a writable "
                f"folder (e.g. TORCH_HOME=$PWD/.torch) or make {dst.parent} writable"
            )
            continue
        REFUSED.pop(dst, None)
        staged.append(name)
    return staged


def _link_into(path: Path, mirror: Path) -> bool:
    """`path` is a symbolic link into `mirror`, as earlier versions staged."""
    return path.is_symlink() and path.resolve().is_relative_to(mirror.resolve())


def check_staged(metric: str, paths: Iterable[Path]) -> None:
    """NotPublished for `metric` when the mirror's copy of any of its files `paths` was not the
    published one, UnwritableCache when the cache folder refused one."""
    paths = list(paths)
    unpublished = [UNPUBLISHED[p] for p in paths if p in UNPUBLISHED]
    if unpublished:
        raise NotPublished(f"{metric}: " + "; ".join(unpublished))
    refused = [REFUSED[p] for p in paths if p in REFUSED]
    if refused:
        raise UnwritableCache(f"{metric}: " + "; ".join(refused))


def check_published(metric: str, paths: Iterable[Path]) -> None:
    """NotPublished for `metric` when any of the files `paths` present is not the published
    release of its name: hashed each time (a few MB, milliseconds), since only content says."""
    refused = [why for p in paths if os.path.lexists(p) and (why := refusal(p)) is not None]
    if refused:
        raise NotPublished(f"{metric}: " + "; ".join(refused))
