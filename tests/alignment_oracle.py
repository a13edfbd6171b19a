"""What the native normalizer tests share: the C++ compiler for their drivers, the drivers'
little-endian u32 framing, and tokenizers' byte-to-char offset conversion, through which
normalized alignments are compared with the offsets `tokenizers` reports."""

from __future__ import annotations

import os
import shlex
import shutil
import struct

import numpy as np
import pytest


def cxx_compiler(what: str) -> list[str]:
    """The C++ compiler command (CXX, else g++, c++ or clang++); skips `what` without one."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        pytest.skip(f"no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run {what}")
    return shlex.split(cxx)


def u32(n: int) -> bytes:
    return struct.pack("<I", n)


def char_offsets(original: str, align) -> list[tuple[int, int]]:
    """Byte ranges of the original -> char offsets, by the rules of tokenizers'
    BytesToCharOffsetConverter (a start past the map stays in bytes; an end past it is one past
    the last char)."""
    raw = np.frombuffer(original.encode("utf-8"), dtype=np.uint8)
    nbytes = len(raw)
    if len(align) == 0:
        return []
    s = align[:, 0].astype(np.int64)
    e = align[:, 1].astype(np.int64)
    if nbytes == 0:
        return list(zip(s.tolist(), e.tolist()))
    char_of = np.cumsum((raw & 0xC0) != 0x80) - 1  # char index of every byte
    ok = s < nbytes
    cs = np.where(ok, char_of[np.minimum(s, nbytes - 1)], s)
    ce = np.where(e < nbytes, char_of[np.minimum(e, nbytes - 1)], char_of[np.maximum(e - 1, 0)] + 1)
    ce = np.where(ok, ce, e)
    return list(zip(cs.tolist(), ce.tolist()))


def byte_level_tokenizer(normalizer):
    """A tokenizer that shows a normalizer's alignments: ByteLevel(use_regex=False) over a BPE of
    the 256 byte-level characters without merges gives one token per normalized byte, whose
    offsets are that byte's alignment. (ByteLevel panics on a (0, 0) alignment: use
    per_char_tokenizer there.)"""
    from tokenizers import Tokenizer, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(sorted(alphabet))}, merges=[]))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    return tok


def per_char_tokenizer(normalizer):
    """One token per normalized character (Split('(?m).') over a WordLevel of unk alone)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("(?m)."), "isolated")
    return tok
