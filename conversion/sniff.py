"""Tells what a tokenizer file is from its content, never its name (Meta ships a tiktoken rank
file called ``tokenizer.model``, which is also SentencePiece's usual file name)."""

from __future__ import annotations

import base64
import binascii
import enum
import os

CARTRIDGE_MAGIC = b"CRAYONHF"


class FileKind(enum.Enum):
    CARTRIDGE = "cartridge"
    TIKTOKEN_RANKS = "tiktoken rank file"
    TOKENIZER_JSON = "tokenizer.json"
    SENTENCEPIECE = "SentencePiece model"
    UNKNOWN = "unknown"


def _looks_like_rank_line(line: bytes) -> bool:
    parts = line.split()
    if len(parts) != 2 or not parts[1].isdigit():
        return False
    try:
        base64.b64decode(parts[0], validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def sniff_bytes(head: bytes) -> FileKind:
    if head.startswith(CARTRIDGE_MAGIC):
        return FileKind.CARTRIDGE
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return FileKind.TOKENIZER_JSON
    lines = [line for line in head.split(b"\n")[:-1] if line.strip()]  # last line may be cut off
    if lines and all(_looks_like_rank_line(line) for line in lines[:8]):
        return FileKind.TIKTOKEN_RANKS
    # A SentencePiece ModelProto starts with field 1 (pieces, length-delimited): tag byte 0x0A.
    if head[:1] == b"\x0a":
        return FileKind.SENTENCEPIECE
    return FileKind.UNKNOWN


def sniff_file(path: str | os.PathLike[str]) -> FileKind:
    with open(path, "rb") as f:
        head = f.read(4096)
    return sniff_bytes(head)
