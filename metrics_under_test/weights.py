"""A metric's parameter files: where pyiqa keeps them, how a read-only mirror of them is put there,
and which bytes pyiqa may open.

pyiqa downloads into `torch.hub.get_dir()/pyiqa` and skips the download when the file is already
there; computed here without importing torch, so the plugin stays light. pyiqa reads its `.pth`
files with `torch.load(weights_only=False)`: a pickle, which runs whatever code it names. So a file
whose name has a published sha256 (`PUBLISHED`, from the offline mirror of the published files,
`../shared/pyiqa-weights/PROVENANCE.md`), in the `--weights-dir` mirror or in pyiqa's cache, is
opened only once its bytes match: content, never size and mtime (`cp -p` keeps those).

Every file pyiqa's downloader hands a metric is checked first, whoever built the metric (the
suite's pyiqa metrics, or a user's metric that calls `pyiqa.create_metric` inside): `guard` wraps
`load_file_from_url` in every pyiqa module loaded so far and at its source, so those imported
later take the wrapper. It refuses a file that does not match its published sha256
(NotPublished), warns once about a file whose name has none (not checked), and turns a download
that cannot happen into MissingWeights naming the file, its URL and how to provide it, instead
of a bare `URLError` that names nothing.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import sys
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from banana_tests.safe_files import NotReadable, read_regular


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
    name (`PUBLISHED`): refused before pyiqa opens it, in one line naming
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
    `guard`). A mirror file that is not the published release of its name
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


SOURCE = "pyiqa.utils.download_util"


class UncheckedWeights(UserWarning):
    """pyiqa loads a parameter file whose name has no published sha256 in banana-tests' table."""


def guard() -> None:
    """Wrap pyiqa's `load_file_from_url` in every loaded pyiqa module that holds it; nothing
    before pyiqa is imported (a later call, once it is, does it)."""
    source = sys.modules.get(SOURCE)
    if source is None:
        return
    current = source.load_file_from_url
    original = getattr(current, "__wrapped__", current)
    checked = current if original is not current else _checked(original, source)
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "pyiqa" and getattr(module, "load_file_from_url", None) is original:
            vars(module)["load_file_from_url"] = checked


def _checked(original: Callable[..., str], source: Any) -> Callable[..., str]:
    @functools.wraps(original)
    def load_file_from_url(
        url: str, model_dir: str | None = None, progress: bool = True, file_name: str | None = None
    ) -> str:
        name = file_name or os.path.basename(urlparse(url).path)
        path = Path(os.path.abspath(model_dir or source.DEFAULT_CACHE_DIR)) / name
        if path in UNPUBLISHED:
            raise NotPublished(UNPUBLISHED[path])
        if path in REFUSED and not os.path.lexists(path):
            raise UnwritableCache(REFUSED[path])
        if not os.path.lexists(path) and offline():
            raise MissingWeights(f"pyiqa needs {name} ({url}) offline; {how_to_provide()}")
        try:
            found = original(url, model_dir, progress, file_name)
        except OSError as exc:  # URLError, a refused connection, an unknown host, a timeout
            raise MissingWeights(f"pyiqa cannot fetch {name} ({url}): {exc}; {how_to_provide()}") from exc
        why = refusal(Path(found))
        if why is not None:
            raise NotPublished(why)
        if name not in PUBLISHED:
            warnings.warn(
                f"pyiqa loads {found}, whose name has no published sha256 in banana-tests' table "
                "(metrics_under_test/weights.py): it is not checked",
                UncheckedWeights,
                stacklevel=2,
            )
        return found

    return load_file_from_url


PUBLISHED: dict[str, str] = {
    "brisque_svm_weights.pth": "e69ee3209300741be38f0c0a5d6f08453d30966fa7a436febeef61d7b31e206e",
    "niqe_modelparameters.mat": "0dc4948efb74ca8228b9eb2bddf72f8ed9abcb7bf18bea69b7791143db4a49d9",
    "ILNIQE_templateModel.mat": "14f4919a630498d732bbf11837d894d45a57f89c9ed84bea98851147290ce93c",
}
"""File name → sha256 of its published release (brisque 230,981 B, niqe 10,928 B, ilniqe 2,764,281 B)."""
MAX_BYTES = 64 * 2**20
"""The largest file hashed: the published ones are under 3 MB, so anything past this is not one."""


def refusal(path: Path) -> str | None:
    """Why the file at `path` is not the published release of its name, in one line naming the
    file, the sha256 found and the one expected; None when it is, or when its name has no entry."""
    expected = PUBLISHED.get(path.name)
    if expected is None:
        return None
    try:
        found = hashlib.sha256(read_regular(path, MAX_BYTES)).hexdigest()
    except NotReadable as exc:
        return f"{path}: cannot be checked ({exc}); expected the published {path.name}, sha256 {expected}"
    if found == expected:
        return None
    return (
        f"{path}: not the published {path.name} (sha256 {found}, expected {expected}); refused "
        f"before pyiqa opens it (a .pth file is a pickle, which can run code): replace it with the "
        f"published file"
    )
