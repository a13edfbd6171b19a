"""Tells what a tokenizer file is from its content, never its name (Meta ships a tiktoken rank
file called ``tokenizer.model``, which is also SentencePiece's usual file name).

    first 4 KiB --"CRAYONHF" magic--------------------------> CARTRIDGE
                --a SentencePiece piece message at byte 0----> SENTENCEPIECE  (protobuf, binary)
                --"{" after leading whitespace---------------> TOKENIZER_JSON
                --lines of "base64 rank"---------------------> TIKTOKEN_RANKS
                --anything else------------------------------> UNKNOWN (`explain_unknown` says why)

The SentencePiece check comes before the text checks because a protobuf may start with bytes
that look like whitespace; it is strict (the whole first piece must parse as one), so no JSON or
rank file passes it.
"""

from __future__ import annotations

import base64
import binascii
import enum
import os

from crayon_hf.conversion.sentencepiece import looks_like_model

CARTRIDGE_MAGIC = b"CRAYONHF"
HEAD_BYTES = 4096


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
    if looks_like_model(head):
        return FileKind.SENTENCEPIECE
    stripped = head.lstrip()
    if stripped.startswith(b"{"):
        return FileKind.TOKENIZER_JSON
    lines = [line for line in head.split(b"\n")[:-1] if line.strip()]  # last line may be cut off
    if lines and all(_looks_like_rank_line(line) for line in lines[:8]):
        return FileKind.TIKTOKEN_RANKS
    return FileKind.UNKNOWN


def explain_unknown(head: bytes) -> str:
    """Why `head` is none of the kinds, in a few words (for error messages)."""
    if not head:
        return "it is empty"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        # Binary, unless only a character cut off at the end of the head failed.
        text = head[: e.start].decode("utf-8") if e.start >= len(head) - 3 else None
    if text is not None and not any(c < " " and c not in "\t\n\r" for c in text):
        first = next((line for line in text.splitlines() if line.strip()), "")
        return f"it is text, but neither JSON nor tiktoken rank lines (first line: {first[:60]!r})"
    if head[:1] == b"\x0a":
        return "it starts like a protobuf, but not like a SentencePiece model (no piece string at byte 0)"
    return "it is binary, without a cartridge's CRAYONHF magic"


def sniff_file(path: str | os.PathLike[str]) -> FileKind:
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    return sniff_bytes(head)
