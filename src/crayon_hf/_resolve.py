"""One way to name a tokenizer, shared by the command line and the Python API.

``--tokenizer`` takes a bundled encoding name (``cl100k_base``), a cartridge, a tiktoken rank
file, a tokenizer.json, a SentencePiece ``.model``, or a HuggingFace tokenizer folder (one holding tokenizer.json). Files are
recognised by their content, never their extension.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from crayon_hf.tiktoken._encodings import BUNDLED

if TYPE_CHECKING:
    import crayon_hf.tiktoken
    from crayon_hf.tokenizer import Tokenizer


def load(spec: str | os.PathLike[str], *, pattern: str | None = None) -> crayon_hf.tiktoken.Encoding | Tokenizer:
    """Loads any tokenizer by name or path.

    `spec` is a bundled tiktoken encoding name (``"cl100k_base"``, ``"o200k_base"``, ...), a
    cartridge (``.dat``), a tiktoken rank file, a tokenizer.json, a SentencePiece ``.model``, or
    a HuggingFace tokenizer folder (one holding tokenizer.json). Files are recognised by their
    content, never their extension; this is what ``crayon ... --tokenizer SPEC`` accepts.

    Returns a ``crayon_hf.tiktoken.Encoding`` for a name, a rank file or a tiktoken cartridge,
    and a ``crayon_hf.Tokenizer`` for everything else. Both have ``encode_batch_to_numpy``,
    ``decode`` and ``crayon_backend``. `pattern` is the split pattern of a rank file crayon-hf
    does not recognise by hash: a bundled name (``"cl100k_base"``, ``"llama3"``, ...) or a regex.
    Raises ``ValueError`` when `spec` is neither an existing path nor a bundled name.

    ```
    >>> enc = crayon_hf.load("cl100k_base")
    >>> enc.encode("hello world")
    [15339, 1917]
    ```
    """
    return load_tokenizer(os.fspath(spec), pattern=pattern, label="crayon_hf.load")


def load_tokenizer(spec: str, *, pattern: str | None = None,
                   label: str = "--tokenizer") -> crayon_hf.tiktoken.Encoding | Tokenizer:
    """A ``crayon_hf.tiktoken.Encoding`` for a name, rank file or tiktoken cartridge; a
    ``crayon_hf.Tokenizer`` for a tokenizer.json, a folder with one, a SentencePiece model, or a
    tokenizer.json cartridge. `label` names the caller in error messages."""
    from crayon_hf.conversion.sniff import FileKind, sniff_file
    from crayon_hf.tiktoken import Encoding, get_encoding

    if not os.path.exists(spec):
        if spec in BUNDLED:
            return get_encoding(spec)
        raise ValueError(
            f"{label} {spec!r}: no such file, and not a bundled encoding ({', '.join(BUNDLED)})"
        )
    if os.path.isdir(spec):
        inner = os.path.join(spec, "tokenizer.json")
        if not os.path.exists(inner):
            raise ValueError(f"{label} {spec!r} is a directory without a tokenizer.json")
        spec = inner
    kind = sniff_file(spec)
    if kind in (FileKind.TOKENIZER_JSON, FileKind.SENTENCEPIECE):
        from crayon_hf.tokenizer import Tokenizer

        return Tokenizer.from_file(spec)
    if kind is FileKind.CARTRIDGE:
        from crayon_hf._native import native

        if "HFHD" in native.Cartridge.open(spec).section_ids:
            from crayon_hf.tokenizer import Tokenizer

            return Tokenizer.from_file(spec)
        return Encoding.from_cartridge(spec)
    if kind is FileKind.TIKTOKEN_RANKS:
        from crayon_hf._cache import cache_dir, find, store
        from crayon_hf._cache import label as cache_label
        from crayon_hf.conversion.tiktoken_rank import convert_rank_file

        image = convert_rank_file(spec, pattern=pattern)
        import hashlib

        key = f"{hashlib.sha256(image).hexdigest()[:24]}.dat"
        cached = find(cache_dir(), f"rankfile-{cache_label(str(spec))}-{key}", key)
        if not cached.exists() and not store(cached, image):  # a cache that cannot be written
            from crayon_hf._native import native

            enc = Encoding.__new__(Encoding)
            enc._setup(native.TiktokenEngine.from_bytes(image, f"<in-memory {spec}>"), image=image, path=None)
            return enc
        return Encoding.from_cartridge(cached)
    from crayon_hf.conversion.sniff import HEAD_BYTES, explain_unknown

    with open(spec, "rb") as f:
        why = explain_unknown(f.read(HEAD_BYTES))
    raise ValueError(
        f"{label} {spec!r} is not a tokenizer crayon-hf recognises ({why}); this version reads cartridges, "
        "tiktoken rank files, tokenizer.json files, SentencePiece models and bundled encoding names"
    )
