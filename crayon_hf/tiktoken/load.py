"""Rank-file loading with tiktoken's signatures (``tiktoken.load``)."""

from __future__ import annotations

import base64
import hashlib
import os


def read_file(blobpath: str) -> bytes:
    """Reads a local path, or an http(s) URL with the standard library."""
    if "://" not in blobpath or blobpath.startswith("file://"):
        path = blobpath[len("file://") :] if blobpath.startswith("file://") else blobpath
        with open(path, "rb") as f:
            return f.read()
    if blobpath.startswith(("http://", "https://")):
        import urllib.request

        with urllib.request.urlopen(blobpath) as resp:  # noqa: S310 - the user named this URL
            return resp.read()
    raise ValueError(f"cannot read {blobpath!r}: only local paths and http(s) URLs are supported")


def check_hash(data: bytes, expected_hash: str) -> bool:
    return hashlib.sha256(data).hexdigest() == expected_hash


def read_file_cached(blobpath: str, expected_hash: str | None = None) -> bytes:
    data = read_file(blobpath)
    if expected_hash and not check_hash(data, expected_hash):
        raise ValueError(
            f"Hash mismatch for data downloaded from {blobpath} (expected {expected_hash}). "
            "This may indicate a corrupted download. Please try again."
        )
    return data


def load_tiktoken_bpe(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """Reads a rank file (``base64(token) rank`` per line) into ``{token bytes: rank}``."""
    from crayon_hf.conversion.tiktoken_rank import parse_rank_file

    contents = read_file_cached(os.fspath(tiktoken_bpe_file), expected_hash)
    return parse_rank_file(contents, os.fspath(tiktoken_bpe_file))


def dump_tiktoken_bpe(bpe_ranks: dict[bytes, int], tiktoken_bpe_file: str) -> None:
    """Writes ``{token bytes: rank}`` as a rank file, sorted by rank."""
    with open(tiktoken_bpe_file, "wb") as f:
        for token, rank in sorted(bpe_ranks.items(), key=lambda x: x[1]):
            f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
