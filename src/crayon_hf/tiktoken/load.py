"""Rank-file loading with tiktoken's signatures (``tiktoken.load``).

base64 and hashlib are imported by the functions that use them: `import crayon_hf.tiktoken` imports
this module, and a bundled encoding mapped from the cache reads no rank file."""

from __future__ import annotations

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
    import hashlib

    return hashlib.sha256(data).hexdigest() == expected_hash


def read_file_cached(blobpath: str, expected_hash: str | None = None) -> bytes:
    data = read_file(blobpath)
    if expected_hash and not check_hash(data, expected_hash):
        raise ValueError(
            f"Hash mismatch for data downloaded from {blobpath} (expected {expected_hash}). "
            "This may indicate a corrupted download. Please try again."
        )
    return data


def data_gym_to_mergeable_bpe_ranks(
    vocab_bpe_file: str,
    encoder_json_file: str,
    vocab_bpe_hash: str | None = None,
    encoder_json_hash: str | None = None,
    clobber_one_byte_tokens: bool = False,
) -> dict[bytes, int]:
    """GPT-2's original files (``vocab.bpe`` merges and ``encoder.json``) as ``{token bytes: rank}``.

    The 256 single bytes come first, printable ones (space excluded) in byte order, then the rest;
    each merge line then adds one token. ``encoder.json`` must agree with the merges (its two
    special tokens aside); ``clobber_one_byte_tokens`` takes the single-byte ranks from it."""
    import json

    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    others = [b for b in range(256) if b not in printable]
    # data_gym spells each byte as one character: a printable byte as itself, the k-th other
    # byte as chr(256 + k).
    char_to_byte = {chr(b): b for b in printable}
    char_to_byte.update({chr(256 + k): b for k, b in enumerate(others)})

    def to_bytes(value: str) -> bytes:
        return bytes(char_to_byte[c] for c in value)

    ranks = {bytes([b]): rank for rank, b in enumerate(printable + others)}
    merges_text = read_file_cached(vocab_bpe_file, vocab_bpe_hash).decode()
    # The first line is a version header; the file ends with a newline.
    next_rank = len(ranks)
    for line in merges_text.split("\n")[1:-1]:
        first, second = line.split()
        ranks[to_bytes(first) + to_bytes(second)] = next_rank
        next_rank += 1

    encoder = {to_bytes(k): v for k, v in json.loads(read_file_cached(encoder_json_file, encoder_json_hash)).items()}
    encoder.pop(b"<|endoftext|>", None)
    encoder.pop(b"<|startoftext|>", None)
    if clobber_one_byte_tokens:
        ranks.update({k: v for k, v in encoder.items() if len(k) == 1})
    # Ranks are merge priorities: the encoder's ids must be the merge order, or encoding is wrong.
    assert ranks == encoder
    return ranks


def load_tiktoken_bpe(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """Reads a rank file (``base64(token) rank`` per line) into ``{token bytes: rank}``, accepting
    exactly what tiktoken accepts (an empty token, spelled ``=``, included; an empty file gives {})."""
    import base64

    path = os.fspath(tiktoken_bpe_file)
    contents = read_file_cached(path, expected_hash)
    ranks: dict[bytes, int] = {}
    for line in contents.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except Exception as e:
            raise ValueError(f"Error parsing line {line!r} in {path}") from e
    return ranks


def dump_tiktoken_bpe(bpe_ranks: dict[bytes, int], tiktoken_bpe_file: str) -> None:
    """Writes ``{token bytes: rank}`` as a rank file, sorted by rank."""
    import base64

    with open(tiktoken_bpe_file, "wb") as f:
        for token, rank in sorted(bpe_ranks.items(), key=lambda x: x[1]):
            f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
