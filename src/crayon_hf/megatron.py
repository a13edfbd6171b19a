"""Megatron-LM's indexed dataset (`PREFIX.bin` + `PREFIX.idx`), written and read from its specification.

    PREFIX.bin   the tokens of every sequence, one after another, in the index's dtype, no header
    PREFIX.idx   little-endian:
                   magic            9 bytes  b"MMIDIDX\\x00\\x00"
                   version          uint64   1
                   dtype code       uint8    1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
                                             6 float64, 7 float32, 8 uint16
                   sequence count   uint64   S
                   document count   uint64   D + 1 (entries of the document index below)
                   sequence lengths int32[S] tokens per sequence
                   pointers         int64[S] byte offset of each sequence in PREFIX.bin
                   document index   int64[D + 1]  document d is sequences [doc[d], doc[d + 1])

encode-corpus writes one sequence per document (its EOS included), so the document index is
0, 1, ..., D. The token dtype follows Megatron's own choice for a vocabulary: uint16 below 65,500
ids, int32 above. Megatron's GPTDataset reads exactly these two files (`--data-path PREFIX`);
`read_indexed` here is the independent reader the tests hold the writer to (and megatron-core's
own `IndexedDataset` where it installs).
"""

from __future__ import annotations

import os
import struct
from typing import IO, NamedTuple

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
CODES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
         8: np.uint16}
_CODE_OF = {np.dtype(v): k for k, v in CODES.items()}
_HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequence count, document count


def token_dtype(max_id: int) -> np.dtype:
    """Megatron's dtype for a vocabulary whose largest id is max_id (uint16 below 65,500 ids)."""
    return np.dtype("<u2") if max_id + 1 < 65500 else np.dtype("<i4")


def write_index(f: IO[bytes], dtype: np.dtype, starts: np.ndarray, chunk: int = 1 << 20) -> None:
    """Writes PREFIX.idx for documents at token positions `starts` (n_docs + 1 entries, int64, a
    memory map is fine: it is read `chunk` entries at a time), one sequence per document."""
    n_docs = len(starts) - 1
    itemsize = np.dtype(dtype).itemsize
    f.write(_HEADER.pack(MAGIC, VERSION, _CODE_OF[np.dtype(dtype).newbyteorder("=")], n_docs, n_docs + 1))
    for lo in range(0, n_docs, chunk):  # sequence lengths
        part = np.asarray(starts[lo:min(lo + chunk, n_docs) + 1], dtype=np.int64)
        lengths = np.diff(part)
        if lengths.size and int(lengths.max()) > 0x7FFFFFFF:
            raise ValueError("a document of more than 2^31 tokens does not fit Megatron's int32 sequence lengths")
        f.write(lengths.astype("<i4").tobytes())
    for lo in range(0, n_docs, chunk):  # pointers: byte offsets in PREFIX.bin
        f.write((np.asarray(starts[lo:min(lo + chunk, n_docs)], dtype=np.int64) * itemsize).astype("<i8").tobytes())
    for lo in range(0, n_docs + 1, chunk):  # the document index: one sequence each
        f.write(np.arange(lo, min(lo + chunk, n_docs + 1), dtype="<i8").tobytes())


class IndexedDataset(NamedTuple):
    tokens: np.ndarray  # memory map of PREFIX.bin
    sequence_lengths: np.ndarray
    pointers: np.ndarray
    document_index: np.ndarray

    def __len__(self) -> int:
        return len(self.sequence_lengths)

    def __getitem__(self, i: int) -> np.ndarray:
        """Sequence i's tokens."""
        start = int(self.pointers[i]) // self.tokens.itemsize
        return self.tokens[start:start + int(self.sequence_lengths[i])]


def read_indexed(prefix: str | os.PathLike[str]) -> IndexedDataset:
    """Opens PREFIX.idx and PREFIX.bin, checking every field against the specification above and
    the .bin's size; a damaged or foreign file is a ValueError saying what is wrong."""
    prefix = os.fspath(prefix)
    idx_path, bin_path = prefix + ".idx", prefix + ".bin"
    with open(idx_path, "rb") as f:
        head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise ValueError(f"{idx_path}: too short for a Megatron index header")
    magic, version, code, n_seq, n_doc = _HEADER.unpack(head)
    if magic != MAGIC:
        raise ValueError(f"{idx_path}: not a Megatron indexed dataset index (magic {magic!r})")
    if version != VERSION:
        raise ValueError(f"{idx_path}: index version {version}, this reader knows {VERSION}")
    if code not in CODES:
        raise ValueError(f"{idx_path}: unknown dtype code {code}")
    expected = _HEADER.size + n_seq * 4 + n_seq * 8 + n_doc * 8
    size = os.path.getsize(idx_path)
    if size < expected:
        raise ValueError(f"{idx_path}: {size} bytes, the header promises at least {expected}")
    raw = np.memmap(idx_path, dtype=np.uint8, mode="r")
    at = _HEADER.size
    lengths = raw[at:at + 4 * n_seq].view("<i4")
    at += 4 * n_seq
    pointers = raw[at:at + 8 * n_seq].view("<i8")
    at += 8 * n_seq
    docs = raw[at:at + 8 * n_doc].view("<i8")
    dtype = np.dtype(CODES[code]).newbyteorder("<")
    tokens = np.memmap(bin_path, dtype=dtype, mode="r") if os.path.getsize(bin_path) else np.zeros(0, dtype)
    if n_seq:
        if int(lengths.min()) < 0 or int(pointers.min()) < 0:
            raise ValueError(f"{idx_path}: negative sequence length or pointer")
        end = int(pointers[-1]) + int(lengths[-1]) * dtype.itemsize
        if end > os.path.getsize(bin_path):
            raise ValueError(f"{bin_path}: {os.path.getsize(bin_path)} bytes, the index points to byte {end}")
    if n_doc and (int(docs[0]) != 0 or int(docs[-1]) != n_seq or np.any(np.diff(docs) < 0)):
        raise ValueError(f"{idx_path}: the document index does not run from 0 to the sequence count")
    return IndexedDataset(tokens, lengths, pointers, docs)
