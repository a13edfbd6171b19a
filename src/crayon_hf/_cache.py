"""The on-disk cache of compiled cartridges, shared by every process on the machine.

Location: ``$CRAYON_HF_CACHE`` if set, else ``$XDG_CACHE_HOME/crayon_hf`` (when that variable
holds an absolute path, as the XDG spec asks), else ``~/.cache/crayon_hf``. A cache that cannot be
written (read-only, full, a read-only root in a container) never stops a load: ``store`` warns
once per directory and the caller keeps the compiled cartridge in memory. Files are written to a
temporary name in the same directory and renamed into place, so parallel workers racing to
build the same cartridge never see a half-written file (the rename is atomic; the last writer wins
with identical content).

What the files are called. Each name starts with what it holds and ends with the key it is found
by (a content hash, and the generation of the format):

    cl100k_base-<rank sha256>-g<N>.dat            a bundled tiktoken encoding
    rankfile-<label>-<sha256>.dat                 a tiktoken rank file given by path
    tokenizer.json-<label>-<sha256>-g<N>.dat      a tokenizer.json (label: its folder, or the
                                                  transformers class it came from)
    tokenizer.json-<label>-<sha256>-g<N>-s<M>.unsupported   why one runs on `tokenizers` instead
    sentencepiece-<label>-<sha256>-g<N>.json      a SentencePiece model converted to tokenizer.json

The label is for people (`crayon cache list`); a file is found by its key, so the same content
loaded from another folder reuses the file under its first label. Files written before labels
(``tokenizer-<sha256>-g<N>.dat``, ``spm-...``) are found the same way and stay readable.

Size: after each new file the cache is trimmed to ``$CRAYON_HF_CACHE_MAX_MB`` (default 2048; 0
means unbounded), oldest files first. A process that has a trimmed cartridge mapped keeps using it
(the mapping outlives the name); the next load rebuilds it. `crayon cache list` and `crayon cache
clear` show and empty the cache by hand.
"""

from __future__ import annotations

import os
import re
import threading
import time
import warnings
from pathlib import Path
from typing import Any, NamedTuple

# argparse, logging and tempfile are imported where they are used: this module is on the path of
# every first load, and the three (with dataclasses) were half of `import crayon_hf.tokenizer`.
_warned: set[str] = set()
_warned_lock = threading.Lock()


DEFAULT_MAX_MB = 2048


def cache_dir() -> Path:
    override = os.environ.get("CRAYON_HF_CACHE")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "crayon_hf"
    return Path.home() / ".cache" / "crayon_hf"


def label(source: str) -> str:
    """A short, file-name-safe name for where a file came from: the folder of a
    ``.../qwen2_5/tokenizer.json``, the stem of any other path, the first word of
    ``"Qwen2Tokenizer backend"``."""
    p = Path(str(source).split(" ")[0] if " " in str(source) and "/" not in str(source) else str(source))
    name = p.parent.name if p.name == "tokenizer.json" and p.parent.name else p.stem if p.suffix else p.name
    name = re.sub(r"^Crayon(?=[A-Z])", "", name)  # CrayonQwen2Tokenizer: the class it wraps
    name = re.sub(r"[^A-Za-z0-9_.+]+", "_", name).strip("._")[:48]
    return name or "unnamed"


def find(directory: Path, name: str, key: str) -> Path:
    """`directory / name` if it exists, else any file there whose name ends with ``-{key}`` (the
    same content cached under another label, or under a name from before labels); else
    `directory / name`, for the caller to write."""
    path = directory / name
    if path.exists():
        return path
    try:
        with os.scandir(directory) as it:
            for entry in it:
                if entry.name.endswith(f"-{key}") and not entry.name.startswith("."):
                    return Path(entry.path)
    except OSError:
        pass
    return path


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Writes ``data`` to ``path`` via a temporary file in the same directory and a rename."""
    import tempfile

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
        trim(Path(path).parent, keep=Path(path).name)
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
            import logging

            logging.getLogger("crayon_hf").debug("cannot write %s: %s", path, e)
        return False


# ---------------------------------------------------------------------------- size and listing


def max_bytes() -> int:
    """The cache's size bound in bytes from ``$CRAYON_HF_CACHE_MAX_MB`` (0: unbounded)."""
    value = os.environ.get("CRAYON_HF_CACHE_MAX_MB", "").strip()
    try:
        mb = float(value) if value else DEFAULT_MAX_MB
    except ValueError:
        mb = DEFAULT_MAX_MB
    return max(0, int(mb * 2**20))


class Entry(NamedTuple):
    """One file of the cache, as `crayon cache list` shows it."""

    path: Path
    kind: str  # "cartridge", "tokenizer.json", "transformers state", "unsupported", "temporary", "other"
    size: int
    mtime: float
    what: str  # what it holds, in words


# A temporary file from atomic_write: ".<name>.<random>.tmp". One older than this is a writer's
# leftover (a process killed between write and rename), never a write in progress.
_TEMP = re.compile(r"^\..+\.tmp$")
_STALE_TEMP_S = 3600.0


def entries(directory: Path | None = None, describe: bool = True) -> list[Entry]:
    """Every file of the cache, newest first; `describe` reads what each cartridge holds (its
    META section), which `trim` does not need."""
    directory = cache_dir() if directory is None else directory
    out = []
    try:
        it = list(os.scandir(directory))
    except OSError:
        return []
    for e in it:
        if not e.is_file(follow_symlinks=False):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        kind, what = _describe(e.name, e.path) if describe else (
            "temporary" if _TEMP.match(e.name) else "file", "")
        out.append(Entry(Path(e.path), kind, st.st_size, st.st_mtime, what))
    out.sort(key=lambda x: x.mtime, reverse=True)
    return out


def _describe(name: str, path: str) -> tuple[str, str]:
    if _TEMP.match(name):
        return "temporary", "an unfinished write (removed by `crayon cache clear`)"
    if name.endswith(".dat"):
        try:
            import json

            from crayon_hf._native import native

            meta = json.loads(native.section_bytes(path, "META") or b"{}")
        except Exception as e:  # a damaged or foreign file: listed, not fatal
            return "cartridge", f"unreadable ({type(e).__name__})"
        if meta.get("engine") == "hf":
            return "cartridge", f"tokenizer.json, {meta.get('model', '?')} model of {meta.get('model_vocab_size', '?')} tokens"
        return "cartridge", f"tiktoken encoding {meta.get('name') or '?'}"
    if name.endswith(".state"):
        return "transformers state", "a folder's loaded transformers tokenizer, for CrayonTokenizer.from_pretrained"
    if name.endswith(".unsupported"):
        return "unsupported", "why a tokenizer.json runs on the tokenizers library"
    if name.endswith(".json"):
        return "tokenizer.json", "a SentencePiece model converted to tokenizer.json"
    return "other", ""


def trim(directory: Path, keep: str | None = None, limit: int | None = None) -> list[Path]:
    """Deletes the oldest files until the cache holds at most `limit` bytes (`max_bytes()` by
    default; 0 means no bound), never `keep` (the file just written). Returns what it deleted."""
    limit = max_bytes() if limit is None else limit
    if limit <= 0:
        return []
    files = [e for e in entries(directory, describe=False) if e.kind != "temporary"]
    total = sum(e.size for e in files)
    removed = []
    for e in reversed(files):  # oldest first
        if total <= limit:
            break
        if e.path.name == keep:
            continue
        try:
            e.path.unlink()
        except OSError:
            continue
        total -= e.size
        removed.append(e.path)
    return removed


def clear(directory: Path | None = None, older_than_days: float | None = None) -> tuple[int, int]:
    """Deletes the cache's files (only those not written for `older_than_days`, when given), and
    temporary files left by killed writers. Returns (files deleted, bytes freed)."""
    now = time.time()
    count = freed = 0
    for e in entries(directory):
        if e.kind == "temporary":
            if now - e.mtime < _STALE_TEMP_S:
                continue  # perhaps a write in progress
        elif older_than_days is not None and now - e.mtime < older_than_days * 86400:
            continue
        try:
            e.path.unlink()
        except OSError:
            continue
        count += 1
        freed += e.size
    return count, freed


def add_cache_command(sub: Any) -> None:
    """`crayon cache list|clear`, added to the CLI's subparsers (self-contained here)."""
    import argparse

    c = sub.add_parser(
        "cache", help="list or clear the cache of compiled tokenizers",
        description="The cache of compiled cartridges (CRAYON_HF_CACHE, else $XDG_CACHE_HOME/crayon_hf, else "
                    "~/.cache/crayon_hf), bounded by CRAYON_HF_CACHE_MAX_MB (default 2048).",
        epilog="examples:\n  crayon cache list\n  crayon cache clear --older-than 30",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = c.add_subparsers(dest="cache_action", required=True, metavar="ACTION")
    actions.add_parser("list", help="show each file: what it holds, its size and age")
    clear_p = actions.add_parser("clear", help="delete the cached files (they are rebuilt when next needed)")
    clear_p.add_argument("--older-than", type=float, metavar="DAYS",
                         help="only files not written for DAYS days")
    c.set_defaults(func=_cmd_cache)


def _cmd_cache(args: Any) -> int:
    import sys

    directory = cache_dir()
    if args.cache_action == "clear":
        count, freed = clear(directory, args.older_than)
        print(f"removed {count} files ({freed / 2**20:.1f} MiB) from {directory}")
        return 0
    items = entries(directory)
    now = time.time()
    bound = f"bound {max_bytes() / 2**20:.0f} MiB" if max_bytes() else "unbounded"
    print(f"{directory}: {len(items)} files, {sum(e.size for e in items) / 2**20:.1f} MiB ({bound})")
    for e in items:
        age = now - e.mtime
        when = f"{age / 86400:.0f}d" if age >= 86400 else f"{age / 3600:.0f}h" if age >= 3600 else f"{age / 60:.0f}m"
        print(f"{e.size / 2**20:9.1f} MiB  {when:>4}  {e.path.name}  {e.what}", file=sys.stdout)
    return 0
