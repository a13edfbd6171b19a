"""tiktoken rank files -> cartridges.

A rank file has one token per line: ``base64(token bytes) SPACE rank``. The rank is both the merge
priority and the token id. Special tokens are not in the file; they come with the encoding's
definition (``--special TOKEN=ID`` on the command line, or the known set for a known file).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import warnings
from typing import Mapping

from crayon_hf import __version__
from crayon_hf._native import native
from crayon_hf.tiktoken._encodings import PATTERN_NAMES, known_by_rank_hash, native_pattern

FORMAT_NAME = "crayon-hf.tiktoken"


def parse_rank_file(data: bytes, label: str = "rank file") -> dict[bytes, int]:
    """Parses rank-file bytes exactly as ``tiktoken.load.load_tiktoken_bpe`` does, with errors
    that name the line."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except (ValueError, binascii.Error) as e:
            raise ValueError(f"Error parsing line {number} of {label}: {line[:80]!r}") from e
    if not ranks:
        raise ValueError(f"{label} holds no tokens")
    return ranks


def resolve_pattern(pattern: str) -> str:
    """A pattern NAME (r50k_base, cl100k_base, o200k_base, llama3, ...) or a regex, as a regex."""
    return PATTERN_NAMES.get(pattern, pattern)


def split_mode(pat_str: str) -> tuple[str, str | None]:
    """How the native engine splits text with ``pat_str``: a hand-written scanner's name, ``"regex"``
    (the general engine in tiktoken's fancy-regex dialect), or ``"none"`` with the reason it refused
    (the encoding then runs on the real tiktoken)."""
    scanner = native_pattern(pat_str)
    if scanner is not None:
        return scanner, None
    try:
        why = native.tiktoken_regex_refusal(pat_str)
    except UnicodeEncodeError:
        why = "the pattern is not valid UTF-8"
    return ("regex", None) if not why else ("none", why)


def meta_json(
    *,
    name: str,
    pat_str: str,
    explicit_n_vocab: int | None,
    source: Mapping[str, object] | None,
) -> str:
    mode, why = split_mode(pat_str)
    meta = {
        "format": FORMAT_NAME,
        "name": name,
        "pat_str": pat_str,
        "pattern": None if mode == "none" else mode,
        "explicit_n_vocab": explicit_n_vocab,
        "source": dict(source or {"type": "mergeable_ranks"}),
        "unicode_version": "16.0.0",
        "created_by": f"crayon-hf {__version__}",
    }
    if why:
        meta["native_refusal"] = why
    return json.dumps(meta, ensure_ascii=False, sort_keys=True)


def build_tiktoken_cartridge(
    *,
    name: str,
    pat_str: str,
    mergeable_ranks: Mapping[bytes, int],
    special_tokens: Mapping[str, int],
    explicit_n_vocab: int | None = None,
    source: Mapping[str, object] | None = None,
) -> bytes:
    """Compiles an encoding definition into a cartridge image (bytes)."""
    pattern, _ = split_mode(pat_str)
    meta = meta_json(name=name, pat_str=pat_str, explicit_n_vocab=explicit_n_vocab, source=source)
    if b"" in mergeable_ranks:
        # tiktoken accepts an empty token (a published rank file has one): it has an id, which
        # `encode_single_token(b"")` returns, but no text ever encodes to it.
        meta = json.dumps({**json.loads(meta), "empty_token": mergeable_ranks[b""]}, ensure_ascii=False, sort_keys=True)
    return native.build_tiktoken_cartridge(
        dict(mergeable_ranks),
        dict(special_tokens),
        pattern,
        meta,
        pat_str=pat_str if pattern == "regex" else "",
    )


def convert_rank_file(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    special_tokens: Mapping[str, int] | None = None,
    name: str | None = None,
) -> bytes:
    """Compiles a rank file into a cartridge image.

    ``pattern`` is a known name or a regex; it may be omitted for a rank file crayon-hf recognises
    by its hash (the OpenAI files and Llama 3), which also supplies that encoding's special tokens
    when ``special_tokens`` is None.
    """
    with open(path, "rb") as f:
        data = f.read()
    sha = hashlib.sha256(data).hexdigest()
    known = known_by_rank_hash(sha)
    if pattern is None:
        if not known:
            raise ValueError(
                f"{os.fspath(path)} is not a rank file crayon-hf recognises; pass its split pattern "
                f"(--pattern {'|'.join(sorted(PATTERN_NAMES))} or a regex)"
            )
        pat_str = known[0].pat_str
    else:
        pat_str = resolve_pattern(pattern)
    if special_tokens is None:
        matching = [k for k in known if k.pat_str == pat_str]
        special_tokens = dict(matching[0].special_tokens) if matching else {}
    if name is None:
        name = known[0].name if known else os.path.splitext(os.path.basename(os.fspath(path)))[0]
    mode, why = split_mode(pat_str)
    if mode == "none":
        warnings.warn(
            f"crayon-hf: this split pattern has no native scanner and the native regex engine refuses "
            f"it ({why}); the cartridge will encode through the real tiktoken (crayon_backend says so)",
            stacklevel=2,
        )
    ranks = parse_rank_file(data, os.fspath(path))
    return build_tiktoken_cartridge(
        name=name,
        pat_str=pat_str,
        mergeable_ranks=ranks,
        special_tokens=special_tokens,
        source={"type": "tiktoken_rank_file", "sha256": sha, "file": os.path.basename(os.fspath(path))},
    )
