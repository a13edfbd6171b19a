"""Documents to benchmark on: a sample of a corpus file, spread over the whole file.

A plain-text corpus is cut into documents of about 16 KiB, each ending at a line break when one
is near; a JSONL corpus gives one document per line (its ``text`` field, or another). The sample
is taken from evenly spaced windows of the file, so a 5 GB corpus costs a few MiB of reading and
the sample still sees all of it. It is dealt into two disjoint sets: documents for the
single-thread passes and documents for the batch passes, because a library with a word cache
encodes text it has seen before several times faster, and that is not throughput on new text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DOC_BYTES = 16 * 1024


@dataclass
class Sample:
    name: str  # the corpus file's name
    single: list[str]  # documents for the single-thread passes
    batch: list[str]  # documents for the batch passes (disjoint from `single` unless `repeated`)
    repeated: bool  # the file was too small for two disjoint sets: batch reuses `single`
    file_bytes: int


def is_jsonl(path: str | os.PathLike[str]) -> bool:
    """A file whose first non-blank line parses as a JSON object."""
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                try:
                    return isinstance(json.loads(line), dict)
                except ValueError:
                    return False
    return False


def _utf8_boundary(data: bytes, end: int) -> int:
    """The largest index <= end that does not split a UTF-8 sequence."""
    while 0 < end < len(data) and (data[end] & 0xC0) == 0x80:
        end -= 1
    return end


def _cut_text(data: bytes) -> list[str]:
    """Documents of about DOC_BYTES, cut after a line break in their second half when there is one."""
    docs, start = [], 0
    while start < len(data):
        end = min(len(data), start + DOC_BYTES)
        if end < len(data):
            nl = data.rfind(b"\n", start + DOC_BYTES // 2, end)
            end = nl + 1 if nl >= 0 else _utf8_boundary(data, end)
            end = end if end > start else min(len(data), start + DOC_BYTES)
        docs.append(data[start:end].decode("utf-8", errors="replace"))
        start = end
    return docs


def _jsonl_docs(lines: list[bytes], field: str, path: str) -> list[str]:
    docs = []
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}: a line is not valid JSON ({e})") from None
        value = record.get(field) if isinstance(record, dict) else None
        if not isinstance(value, str):
            raise ValueError(f"{path}: a record has no string field {field!r} (choose one with --jsonl-field)")
        docs.append(value)
    return docs


def _windows(path: str, size: int, want: int, jsonl: bool) -> list[bytes]:
    """About `want` bytes read from evenly spaced windows of the file, each starting after a line
    break (a whole JSONL record, a whole line of text)."""
    n = max(1, min(256, want // DOC_BYTES))
    per = want // n + 1
    chunks = []
    with open(path, "rb") as f:
        for k in range(n):
            offset = k * max(0, size - per) // max(1, n - 1)  # the first window at the start, the last at the end
            f.seek(offset)
            if offset:
                f.readline()  # finish the line the window started in
            chunk = f.read(per)
            if jsonl or (chunk and b"\n" in chunk[-DOC_BYTES:]):
                chunk += f.readline()  # a window ends at the end of a line
            chunks.append(chunk)
    return chunks


def sample(path: str | os.PathLike[str], single_bytes: int, batch_bytes: int, *,
           jsonl_field: str = "text") -> Sample:
    """`single_bytes` of documents for single-thread passes and `batch_bytes` for batch passes,
    disjoint, spread over the whole file. A file no larger than `single_bytes` goes whole to the
    single-thread passes, and the batch passes repeat it (`Sample.repeated`)."""
    path = str(path)
    if not os.path.isfile(path):
        raise ValueError(f"--corpus {path!r}: no such file")
    size = os.path.getsize(path)
    jsonl = is_jsonl(path)
    want = single_bytes + batch_bytes
    if size <= want * 1.25:
        with open(path, "rb") as f:
            chunks = [f.read()]
    else:
        chunks = _windows(path, size, want, jsonl)
    docs: list[str] = []
    for chunk in chunks:
        docs += _jsonl_docs(chunk.splitlines(), jsonl_field, path) if jsonl else _cut_text(chunk)
    docs = [d for d in docs if d]
    if not docs:
        raise ValueError(f"--corpus {path!r} holds no text")
    if size <= single_bytes or not batch_bytes:  # too small to split: the batch repeats the text
        return Sample(Path(path).name, docs, list(docs) if batch_bytes else [], bool(batch_bytes), size)
    # Deal the documents in file order into the set that is furthest behind its budget.
    single: list[str] = []
    batch: list[str] = []
    got_single = got_batch = 0
    for d in docs:
        single_full, batch_full = got_single >= single_bytes, got_batch >= batch_bytes
        if single_full and batch_full:
            break
        n = len(d.encode("utf-8"))
        if batch_full or (not single_full and got_single / single_bytes <= got_batch / batch_bytes):
            single.append(d)
            got_single += n
        else:
            batch.append(d)
            got_batch += n
    repeated = not batch
    return Sample(Path(path).name, single, batch or list(single), repeated, size)


def split_passes(docs: list[str], passes: int) -> list[list[str]]:
    """Deals the documents into `passes` consecutive groups of about equal size (fewer when there
    are fewer documents)."""
    passes = max(1, min(passes, len(docs)))
    per = len(docs) / passes
    return [docs[round(i * per): round((i + 1) * per)] for i in range(passes)]


def utf8_len(docs: list[str]) -> int:
    return sum(len(d.encode("utf-8", errors="surrogatepass")) for d in docs)
