"""The sha256 of each parameter file's published release, by the name pyiqa caches it under.

pyiqa reads its `.pth` files with `torch.load(weights_only=False)`: a pickle, which runs whatever
code it names. So a file of one of these names, in the `--weights-dir` mirror or in pyiqa's cache,
is opened by pyiqa only once its bytes match. The reference is the offline mirror of the published
files (`../shared/pyiqa-weights/PROVENANCE.md`); a name not here is named as unchecked when pyiqa
asks for it (metrics_under_test.pyiqa_files). Content, never size and mtime: `cp -p` keeps those.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from banana_tests.safe_files import NotReadable, read_regular

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
