"""The on-disk cache of compiled cartridges, shared by every process on the machine.

Location: ``$CRAYON_HF_CACHE`` if set, else ``~/.cache/crayon_hf``. A cache that cannot be written
(read-only, full, a read-only root in a container) never stops a load: ``store`` warns once per
directory and the caller keeps the compiled cartridge in memory. Files are written to a
temporary name in the same directory and renamed into place, so parallel workers racing to
build the same cartridge never see a half-written file (the rename is atomic; the last writer wins
with identical content).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import warnings
from pathlib import Path

logger = logging.getLogger("crayon_hf")
_warned: set[str] = set()
_warned_lock = threading.Lock()


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


def store(path: str | os.PathLike[str], data: bytes) -> bool:
    """``atomic_write``, or False when the cache cannot take the file (read-only, full, ...): then
    one warning per directory per process, and the caller keeps ``data`` in memory instead."""
    try:
        atomic_write(path, data)
        return True
    except OSError as e:
        directory = str(Path(path).parent)
        with _warned_lock:
            first = directory not in _warned
            _warned.add(directory)
        if first:
            warnings.warn(
                f"crayon-hf: cannot write to the cache directory {directory} ({e}); compiled tokenizers are "
                "kept in memory and recompiled in each process. Set CRAYON_HF_CACHE to a writable directory "
                "to keep them.",
                RuntimeWarning,
                stacklevel=3,
            )
        else:
            logger.debug("cannot write %s: %s", path, e)
        return False
