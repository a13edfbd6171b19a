"""The on-disk cache of compiled cartridges, shared by every process on the machine.

Location: ``$CRAYON_HF_CACHE`` if set, else ``~/.cache/crayon_hf``. Files are written to a
temporary name in the same directory and renamed into place, so parallel workers racing to
build the same cartridge never see a half-written file (the rename is atomic; the last writer wins
with identical content).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    override = os.environ.get("CRAYON_HF_CACHE")
    if override:
        return Path(override).expanduser()
    return Path.home() / ".cache" / "crayon_hf"


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Writes ``data`` to ``path`` via a temporary file in the same directory and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; cartridges are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
