"""Named encodings, offline: the OpenAI rank files ship inside the package (MIT-licensed), compiled
to a cartridge in the cache on first use and mapped from there afterwards."""

from __future__ import annotations

import hashlib
import lzma
import os
import threading
import warnings
from importlib import resources

from crayon_hf import __version__
from crayon_hf._cache import atomic_write, cache_dir
from crayon_hf._native import CartridgeError
from crayon_hf.tiktoken._encodings import BUNDLED, KNOWN_ENCODINGS, KnownEncoding
from crayon_hf.tiktoken.core import Encoding

_lock = threading.RLock()
ENCODINGS: dict[str, Encoding] = {}

# Bump when the cartridge layout or the build changes, so stale cache entries are not reused.
_CACHE_GENERATION = 6


def list_encoding_names() -> list[str]:
    """The encodings `get_encoding` can build offline."""
    return list(BUNDLED)


def bundled_rank_bytes(stem: str) -> bytes:
    """The bundled rank file for `stem`, decompressed and checked against its known sha256."""
    data = lzma.decompress(resources.files("crayon_hf.data").joinpath(f"{stem}.tiktoken.xz").read_bytes())
    return data


def _cartridge_file(known: KnownEncoding) -> str:
    return str(cache_dir() / f"{known.name}-{known.rank_sha256[:16]}-g{_CACHE_GENERATION}.dat")


def _build(known: KnownEncoding) -> bytes:
    from crayon_hf.conversion.tiktoken_rank import build_tiktoken_cartridge, parse_rank_file

    data = bundled_rank_bytes(known.rank_file)
    sha = hashlib.sha256(data).hexdigest()
    if sha != known.rank_sha256:
        raise ValueError(
            f"the bundled rank file for {known.name} is damaged (sha256 {sha}, expected "
            f"{known.rank_sha256}); reinstall crayon-hf"
        )
    return build_tiktoken_cartridge(
        name=known.name,
        pat_str=known.pat_str,
        mergeable_ranks=parse_rank_file(data, f"bundled {known.rank_file}"),
        special_tokens=known.special_tokens,
        explicit_n_vocab=known.explicit_n_vocab,
        source={"type": "tiktoken_rank_file", "sha256": sha, "file": f"{known.rank_file}.tiktoken"},
    )


def _load_known(known: KnownEncoding) -> Encoding:
    path = _cartridge_file(known)
    if os.path.exists(path):
        try:
            return Encoding.from_cartridge(path)
        except (CartridgeError, ValueError) as e:
            warnings.warn(f"crayon-hf: rebuilding damaged cached cartridge {path}: {e}", stacklevel=3)
    image = _build(known)
    try:
        atomic_write(path, image)
    except OSError as e:
        warnings.warn(
            f"crayon-hf: cannot write the cartridge cache ({e}); set CRAYON_HF_CACHE to a writable "
            "directory to avoid rebuilding on every start",
            stacklevel=3,
        )
        enc = Encoding.__new__(Encoding)
        from crayon_hf._native import native

        enc._setup(native.TiktokenEngine.from_bytes(image, f"<bundled {known.name}>"), image=image, path=None)
        return enc
    return Encoding.from_cartridge(path)


def get_encoding(encoding_name: str) -> Encoding:
    """Returns the bundled encoding `encoding_name` (``"cl100k_base"``, ``"o200k_base"``, ...),
    built offline from the rank file shipped with crayon-hf and cached as a cartridge; later calls
    return the same object. Raises ``ValueError`` for an unknown or unbundled name, saying how to
    build it with ``crayon convert``.

    ```
    >>> enc = get_encoding("cl100k_base")
    >>> enc.encode("hello world")
    [15339, 1917]
    ```
    """
    if not isinstance(encoding_name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(encoding_name)}")
    if encoding_name in ENCODINGS:
        return ENCODINGS[encoding_name]
    with _lock:
        if encoding_name in ENCODINGS:
            return ENCODINGS[encoding_name]
        known = KNOWN_ENCODINGS.get(encoding_name)
        if known is None or encoding_name == "llama3":
            raise ValueError(
                f"Unknown encoding {encoding_name}.\n"
                f"Encodings bundled with crayon-hf: {BUNDLED}\n"
                "Other vocabularies: build a cartridge from a rank file with `crayon convert` and "
                "load it with `Encoding.from_cartridge(path)`.\n"
                f"crayon-hf version: {__version__}"
            )
        if not known.bundled:
            raise ValueError(
                f"Encoding {encoding_name} is not bundled with crayon-hf (only {', '.join(BUNDLED)} "
                "are). Build it from its rank file (p50k_base.tiktoken, sha256 "
                f"{known.rank_sha256[:16]}...):\n"
                f"    crayon convert p50k_base.tiktoken --pattern {known.name} -o {known.name}.dat\n"
                f"then load it with crayon_hf.tiktoken.Encoding.from_cartridge('{known.name}.dat')"
                + (
                    " (add --special for its FIM tokens: "
                    + " ".join(f"--special '{t}={i}'" for t, i in known.special_tokens.items())
                    + ")"
                    if len(known.special_tokens) > 1
                    else ""
                )
            )
        enc = _load_known(known)
        ENCODINGS[encoding_name] = enc
        return enc
