"""Training-data preparation: a corpus of documents -> one memory-mappable array of token ids.

    inputs (text files, JSONL, Parquet, or iterables of str)
      -> documents (readers below; a big text file arrives as a stream of UTF-8-checked blocks)
      -> ids (small documents: batch calls on all cores, on a worker thread while the next batch
         is read; long ones: ParallelEncoder, cut only where no token can change)
      -> [EOS] after each document (--append-eos)
      -> OUTPUT (raw uint16/uint32 or .npy), OUTPUT.idx.npy (int64 document starts, n_docs + 1
         entries), OUTPUT.json (what was encoded, with what)

Each document's ids equal the tokenizer's one-shot encoding of it: `encode_ordinary(text)` for a
tiktoken encoding, `encode(text, add_special_tokens=False).ids` without truncation or padding for a
tokenizer.json.

Bounds: memory holds one batch of small documents (`batch_chars` characters and their ids), one
read block of a big file (`read_bytes`) and what the parallel encoder keeps, whatever the size of
the input; the index and the ids go straight to disk.

Commit: the outputs are written under unique temporary names in the output's directory (each one
held under an advisory lock while its writer lives) and renamed into place only after the whole
corpus is encoded and fsynced. The sidecar is the commit record: the old one is removed first and
the new one renamed in last, and it records each array's size and a fingerprint of its ends, so a
reader (`open_corpus`) accepts exactly the set one run wrote -- never a new array beside an old
index, whatever point a crash stopped the renames at.
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

import numpy as np

from crayon_hf import __version__
from crayon_hf._progress import Progress
from crayon_hf.streaming import ParallelEncoder

FORMATS = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4"), "npy": np.dtype("<u4"), "megatron": None}
# End-of-text tokens of tokenizer.json vocabularies, in the order they are looked for among the
# added tokens when the post-processor does not name one.
EOS_NAMES = ("</s>", "<|endoftext|>", "<|end_of_text|>", "<eos>", "<｜end▁of▁sentence｜>", "[SEP]")

# A big text file is read in blocks of this size (smaller files in one go) and fed to the parallel
# encoder, which cuts it into blocks of up to 256k characters, at least two per thread, and encodes
# them on all cores, two blocks per thread per native call. The encoder's working set is tens of
# bytes per character of a call, so bigger reads and blocks buy no speed, only memory (1 MiB blocks
# peaked 50 MiB higher on a 1 GiB file, and were no faster).
_READ_BYTES = 4 << 20
_BATCH_CHARS = 4 << 20  # small documents are encoded in batches of about this many characters
_BATCH_DOCS = 1 << 16

Input = Union[str, "os.PathLike[str]", Iterable[str]]


# ------------------------------------------------------------------------------------ readers
#
# A reader yields (document, input bytes consumed). A document is a str, or, for a text file too
# big to hold, an iterator of (str block, bytes) whose concatenation is the document.


def _utf8_error(label: str, offset: int, e: UnicodeDecodeError) -> ValueError:
    return ValueError(f"{label}: invalid UTF-8 at byte {offset + e.start} ({e.reason})")


def _complete(buf: bytes) -> int:
    """The length of buf without a UTF-8 character cut off at its end (at most 3 bytes shorter)."""
    for back in range(1, min(4, len(buf)) + 1):
        b = buf[-back]
        if b < 0x80:
            return len(buf)
        if b >= 0xC0:  # a lead byte: how long its character is
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return len(buf) if back >= need else len(buf) - back
    return len(buf)  # four continuation bytes: invalid, and decoding will say where


def _text_blocks(path: str, read_bytes: int) -> Iterator[tuple[str, int]]:
    """A text file as str blocks of about read_bytes, each a whole number of characters; invalid
    UTF-8 raises ValueError naming the file and the byte offset."""
    carry, offset = b"", 0  # offset: where carry starts in the file
    with open(path, "rb") as f:
        while data := f.read(read_bytes):
            buf = carry + data if carry else data
            cut = _complete(buf)
            try:
                text = str(memoryview(buf)[:cut], "utf-8")
            except UnicodeDecodeError as e:
                raise _utf8_error(path, offset, e) from None
            offset += cut
            carry = buf[cut:]
            yield text, len(data)
    if carry:
        try:
            carry.decode("utf-8")
        except UnicodeDecodeError as e:
            raise _utf8_error(path, offset, e) from None


def _read_text(path: str, read_bytes: int) -> Iterator[tuple[Any, int]]:
    size = os.path.getsize(path)
    if size > read_bytes:
        yield _text_blocks(path, read_bytes), 0
        return
    with open(path, "rb") as f:
        data = f.read()
    try:
        yield data.decode("utf-8"), len(data)
    except UnicodeDecodeError as e:
        raise _utf8_error(path, 0, e) from None


def _json_type(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return "null" if value is None else "boolean"
    return {int: "number", float: "number", list: "array", dict: "object"}.get(type(value), "string")


def _lines_before(path: str, offset: int) -> int:
    """How many lines of the file start before byte `offset` (only used to name a line in an error)."""
    n, done = 0, 0
    with open(path, "rb") as f:
        while done < offset and (data := f.read(min(1 << 20, offset - done))):
            n += data.count(b"\n")
            done += len(data)
    return n


def _read_jsonl(path: str, field: str, start: int = 0, end: int | None = None) -> Iterator[tuple[str, int]]:
    """One document per non-blank line: the str at `field` of the JSON object on it. With a byte
    range, the lines that start in [start, end) (a line starts after a newline or at byte 0), so
    ranges that tile the file read every line exactly once."""
    offset = start
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            if f.read(1) != b"\n":  # start is inside a line: it belongs to the range before
                offset += len(f.readline())
        first, first_offset = None, offset  # the range's first line: its number is counted only for an error

        def where(k: int) -> str:
            nonlocal first
            if first is None:
                first = _lines_before(path, first_offset) + 1 if first_offset > 0 else 1
            return f"{path}:{first + k}"

        for k, raw in enumerate(iter(f.readline, b"")):
            if end is not None and offset >= end:
                break
            line_start, offset = offset, offset + len(raw)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _utf8_error(where(k), line_start, e) from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                what = e.msg.removesuffix(" at")
                raise ValueError(f"{where(k)}: invalid JSON at column {e.colno} ({what})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where(k)}: a JSON {_json_type(record)}, not an object")
            if field not in record:
                fields = ", ".join(map(repr, list(record)[:8])) or "none"
                raise ValueError(f"{where(k)}: no field {field!r} (fields: {fields}); choose one with "
                                 "--jsonl-field")
            text = record[field]
            if not isinstance(text, str):
                raise ValueError(f"{where(k)}: field {field!r} is a JSON {_json_type(text)}, not a string")
            yield text, len(raw)


def _read_parquet(path: str, field: str, row_groups: range | None = None) -> Iterator[tuple[str, int]]:
    """One document per row: the string column `field`, read a record batch at a time (of the
    given row groups only, when given)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    pf = pq.ParquetFile(path)
    schema = pf.schema_arrow
    if field not in schema.names:
        raise ValueError(f"{path}: no column {field!r} (columns: {', '.join(schema.names)}); choose one with "
                         "--jsonl-field")
    kind = schema.field(field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or getattr(pa.types, "is_string_view", lambda t: False)(kind)):
        raise ValueError(f"{path}: column {field!r} holds {kind}, not strings")
    rows, size, done = max(pf.metadata.num_rows, 1), os.path.getsize(path), 0
    row = 0
    if row_groups is not None:  # rows are numbered in the whole file; bytes shared out over the groups' rows
        row = sum(pf.metadata.row_group(g).num_rows for g in range(row_groups.start))
        rows = max(sum(pf.metadata.row_group(g).num_rows for g in row_groups), 1)
        size = sum(pf.metadata.row_group(g).total_byte_size for g in row_groups)
    base = row
    for batch in pf.iter_batches(batch_size=4096, columns=[field],
                                 row_groups=list(row_groups) if row_groups is not None else None):
        texts = batch.column(0).to_pylist()
        for text in texts:
            if text is None:
                raise ValueError(f"{path}: row {row}: {field!r} is null")
            row += 1
            # Input bytes are the file's, shared out over its rows.
            share = size * (row - base) // rows - done
            done += share
            yield text, share


def _read_documents(items: Iterable[Any]) -> Iterator[tuple[str, int]]:
    for text in items:
        if not isinstance(text, str):
            raise ValueError(f"documents must be str, got {type(text).__name__}")
        yield text, len(text)


def input_kind(path: str) -> str:
    """ "parquet", "jsonl" or "text": Parquet by its magic or extension; JSONL by extension or
    when the first non-blank line is a JSON object; anything else is one plain-text document."""
    suffix = Path(path).suffix.lower()
    with open(path, "rb") as f:
        magic = f.read(4)
        if magic == b"PAR1" or suffix == ".parquet":
            return "parquet"
        if suffix in (".jsonl", ".ndjson"):
            return "jsonl"
        f.seek(0)
        scanned = 0
        while scanned < 1 << 20:
            line = f.readline(1 << 20)
            if not line:
                return "text"
            scanned += len(line)
            if line.strip():
                break
        else:
            return "text"
    if not line.lstrip().startswith(b"{"):
        return "text"
    try:
        return "jsonl" if isinstance(json.loads(line), dict) else "text"
    except ValueError:
        return "text"


def expand_paths(item: str) -> list[str]:
    """The files an input path names: the file itself; every file under a directory (recursively,
    sorted, hidden ones skipped); or the matches of a glob (`*`, `?`, `[...]`, `**`), sorted."""
    import glob

    if os.path.isfile(item):
        return [item]
    if os.path.isdir(item):
        found = []
        for root, dirs, files in os.walk(item):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
        if not found:
            raise ValueError(f"{item}: a directory without files")
        return found
    if os.path.exists(item):
        raise ValueError(f"{item}: not a file or directory")
    if glob.has_magic(item):
        found = sorted(p for p in glob.glob(item, recursive=True) if os.path.isfile(p))
        if not found:
            raise ValueError(f"{item}: no file matches")
        return found
    raise ValueError(f"{item}: no such file")


def _sources(inputs: Iterable[Input]) -> list[tuple[str, Any]]:
    """(label, path or iterable) per input file, every path checked before any work starts."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    out: list[tuple[str, Any]] = []
    for item in inputs:
        if isinstance(item, (str, os.PathLike)):
            out.extend((path, path) for path in expand_paths(os.fspath(item)))
        elif isinstance(item, (bytes, bytearray)):
            raise ValueError("inputs are paths or iterables of str documents, not bytes")
        else:
            out.append(("<documents>", item))
    if not out:
        raise ValueError("no inputs")
    return out


def _documents(sources: list[tuple[str, Any]], field: str, read_bytes: int) -> Iterator[tuple[Any, int]]:
    for label, src in sources:
        if not isinstance(src, str):
            yield from _read_documents(src)
            continue
        kind = input_kind(src)
        if kind == "parquet":
            yield from _read_parquet(src, field)
        elif kind == "jsonl":
            yield from _read_jsonl(src, field)
        else:
            yield from _read_text(src, read_bytes)


# ------------------------------------------------------------------------------ tokenizer faces


class _Face:
    """What the loop needs of a tokenizer, for both faces: batches of documents to flat ids, the
    largest id, and the end-of-text id."""

    def __init__(self, tokenizer: Any, threads: int) -> None:
        self.tok = tokenizer
        self.threads = threads
        self.tiktoken = hasattr(tokenizer, "encode_ordinary")
        if not self.tiktoken and not hasattr(tokenizer, "encode_batch"):
            raise ValueError(f"tokenizer: a {type(tokenizer).__name__}; pass what --tokenizer accepts, a tiktoken "
                             "Encoding, or a crayon_hf.Tokenizer / tokenizers.Tokenizer")
        self._batch = self._batch_tiktoken if self.tiktoken else self._tokenizer_batch()

    @property
    def name(self) -> str:
        return str(getattr(self.tok, "name", None) or type(self.tok).__name__)

    def encode_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(all ids, uint32; document lengths, int64)."""
        return self._batch(texts)

    def _batch_tiktoken(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        to_numpy = getattr(self.tok, "encode_ordinary_batch_to_numpy", None)
        if to_numpy is not None:  # crayon-hf's Encoding: flat arrays straight from the engine
            ids, offsets = to_numpy(texts, num_threads=self.threads)
            return ids, np.diff(offsets)
        lists = self.tok.encode_ordinary_batch(texts, num_threads=self.threads or os.cpu_count() or 1)
        lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        # Any other tiktoken-like Encoding: array.array takes Python ints almost twice as fast as numpy.
        flat = array.array("I")
        for ids in lists:
            flat.extend(ids)
        return np.frombuffer(flat, dtype=np.uint32) if flat.itemsize == 4 else np.array(flat, np.uint32), lengths

    def _tokenizer_batch(self):
        tok = self.tok
        engine = getattr(tok, "_engine", None)
        if getattr(tok, "_ref", None) is None and hasattr(engine, "encode_batch"):
            # crayon_hf.Tokenizer on the native engine. Without special tokens added, truncation or
            # padding, an Encoding's ids are the model's ids as the engine returns them, so the
            # batch skips building Encodings (a matrix of seven int64 rows per token), and the
            # engine encodes ids only (no offsets) straight into one flat array.
            no_block = np.zeros((7, 0), np.int64)

            def run(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
                try:
                    raw = engine.encode_batch_raw(texts, tok._encode_special_tokens, self.threads, False, -1)
                except UnicodeEncodeError as e:
                    raise ValueError(f"a document is not valid Unicode text ({e.reason})") from None
                lengths = np.asarray(raw.lengths(), dtype=np.int64)
                ids, _, _ = raw.take_flat(lengths, False, no_block, no_block, None, None, False, self.threads)
                return ids, lengths

            return run
        import copy

        # Any other tokenizers-like object: a copy without truncation or padding.
        if getattr(tok, "truncation", None) is not None or getattr(tok, "padding", None) is not None:
            tok = copy.deepcopy(tok)
            tok.no_truncation()
            tok.no_padding()
        return lambda texts: _flat([np.asarray(e.ids, np.uint32)
                                    for e in tok.encode_batch(texts, add_special_tokens=False)])

    def max_id(self) -> int:
        if self.tiktoken:
            return int(self.tok.max_token_value)
        return max(self.tok.get_vocab(with_added_tokens=True).values())

    def eos(self, token: str | None) -> tuple[int, str]:
        """(id, token): `token` if given, else the tokenizer's end-of-text token."""
        if self.tiktoken:
            if token is not None:
                try:
                    return int(self.tok.encode_single_token(token)), token
                except KeyError:
                    raise ValueError(f"--eos-token {token!r} is not a token of {self.name}") from None
            try:
                eot = int(self.tok.eot_token)
            except (KeyError, AttributeError):
                raise ValueError(f"--append-eos: {self.name} has no <|endoftext|> token; "
                                 "pass --eos-token TOKEN") from None
            return eot, self.tok.decode_single_token_bytes(eot).decode("utf-8", "replace")
        if token is not None:
            i = self.tok.token_to_id(token)
            if i is None:
                raise ValueError(f"--eos-token {token!r} is not a token of this tokenizer")
            return int(i), token
        data = json.loads(self.tok.to_str())
        added = {t["content"] for t in data.get("added_tokens") or []}
        for name in [*_template_end_tokens(data.get("post_processor")), *(n for n in EOS_NAMES if n in added)]:
            i = self.tok.token_to_id(name)
            if i is not None:
                return int(i), name
        raise ValueError("--append-eos: this tokenizer has no end-of-text token; pass --eos-token TOKEN")


def _flat(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    return (np.concatenate(arrays).astype(np.uint32, copy=False) if arrays else np.zeros(0, np.uint32)), lengths


def _template_end_tokens(processor: dict | None) -> list[str]:
    """Special tokens a post-processor puts after a single sequence (`[SEP]`, `</s>`, ...): the
    tokenizer's own end-of-sequence marker when it has one."""
    if not processor:
        return []
    kind = processor.get("type")
    if kind == "Sequence":
        return [t for p in processor.get("processors") or [] for t in _template_end_tokens(p)]
    if kind in ("BertProcessing", "RobertaProcessing"):
        return [processor["sep"][0]]
    if kind == "TemplateProcessing":
        after, seen = [], False
        for piece in processor.get("single") or []:
            if "Sequence" in piece:
                seen = True
            elif seen and "SpecialToken" in piece:
                after.append(piece["SpecialToken"]["id"])
        return after
    return []


# ---------------------------------------------------------------------------------- the writer


# Temporary names: `.NAME.tmp-<32 hex digits>` beside NAME. A random name, not the pid: pids repeat
# across containers that share a volume. While its writer lives, each temporary file is held under an
# exclusive flock, which the kernel drops when the process dies (SIGKILL included): that is how a
# later run tells a stale temporary from one another run is still writing.
_TMP_MARK = ".tmp-"
# A temporary younger than this is never removed, even when unlocked: it may have been created a
# moment ago by a writer that has not taken its lock yet (or lives on a filesystem without flock).
STALE_AFTER_S = 600.0


def temp_name(path: str) -> str:
    """A unique hidden temporary name beside `path`."""
    return os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}{_TMP_MARK}{uuid.uuid4().hex}")


def _lock(fd: int) -> bool:
    """Takes an exclusive advisory lock on fd without waiting; False when another process holds one."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; stale temporaries are then left for the user
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:  # a filesystem without locks: treat as unlocked; the age rule still protects
        return True
    return True


def clean_stale_temps(output: str | os.PathLike[str], *, older_than: float = STALE_AFTER_S) -> list[str]:
    """Removes the temporaries that killed runs left beside `output` (`.OUTPUT*.tmp-*`, files or
    staging folders) and returns their paths. Only a temporary that nobody holds locked (its writer
    is dead) and that has not been touched for `older_than` seconds is removed; one another live
    run is writing is left alone, on this machine or in another container on the same volume."""
    import shutil

    output = os.fspath(output)
    folder, base = os.path.dirname(output) or ".", os.path.basename(output)
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    now = time.time()
    for name in names:
        if not name.startswith(f".{base}") or _TMP_MARK not in name:
            continue
        # Only this output's own files (OUTPUT, .idx.npy, .json, Megatron's .bin/.idx, a staging
        # folder), not those of an output whose name merely starts with this one's.
        if name[len(base) + 1:].split(_TMP_MARK, 1)[0] not in ("", ".idx.npy", ".json", ".bin", ".idx"):
            continue
        path = os.path.join(folder, name)
        lock_path = os.path.join(path, ".lock") if os.path.isdir(path) else path
        try:
            if now - os.stat(lock_path if os.path.exists(lock_path) else path).st_mtime < older_than:
                continue
            fd = os.open(lock_path, os.O_RDONLY) if os.path.exists(lock_path) else None
        except OSError:
            continue
        try:
            if fd is not None and not _lock(fd):
                continue  # a live writer holds it
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
            removed.append(path)
        except OSError:
            pass
        finally:
            if fd is not None:
                os.close(fd)
    return removed


class _PendingFile:
    """A file written under a unique temporary name beside its final one, locked while it is
    written; `commit` renames it there."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tmp = temp_name(path)
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        _lock(fd)
        self._f = open(fd, "wb", buffering=1 << 20)  # noqa: SIM115 - closed in commit/abort

    def write(self, data: Any) -> None:
        self._f.write(data)

    def finish(self) -> None:
        """Flushes and fsyncs; the file stays open (and locked) until commit or abort."""
        self._f.flush()
        os.fsync(self._f.fileno())

    def commit(self) -> None:
        os.chmod(self.tmp, 0o644)
        os.replace(self.tmp, self.path)
        self._f.close()

    def abort(self) -> None:
        self._f.close()
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


class _ArrayFile(_PendingFile):
    """A 1-D array appended to disk: raw little-endian, or .npy with a header of fixed size
    reserved up front and filled in with the final length at the end."""

    def __init__(self, path: str, dtype: np.dtype, npy: bool) -> None:
        super().__init__(path)
        self.dtype, self.npy, self.n = dtype, npy, 0
        if npy:
            self._header = self._write_header(0)

    def _write_header(self, n: int) -> int:
        import numpy.lib.format as npf

        npf.write_array_header_1_0(self._f, {"descr": npf.dtype_to_descr(self.dtype), "fortran_order": False,
                                             "shape": (n,)})
        return self._f.tell()

    def append(self, values: np.ndarray) -> None:
        data = np.ascontiguousarray(values, dtype=self.dtype)
        self._f.write(memoryview(data).cast("B"))
        self.n += data.size

    def finish(self) -> None:
        if self.npy:
            self._f.flush()
            self._f.seek(0)
            # numpy pads the header to the same size for any length (it leaves room for the
            # shape to grow), so the final header fits the reserved one exactly.
            if self._write_header(self.n) != self._header:
                raise RuntimeError("crayon-hf: the .npy header changed size; please report this")
        super().finish()


class _CorpusWriter:
    """The token file and the index of document starts, with the EOS after each document. For
    Megatron's layout the tokens go to OUTPUT.bin and the starts to a scratch file that becomes
    OUTPUT.idx at the commit."""

    def __init__(self, output: str, dtype: np.dtype, npy: bool, eos: int | None, megatron: bool = False) -> None:
        self.output, self.eos, self.megatron = output, eos, megatron
        self.files: list[_PendingFile] = []
        self.tokens = self._open(f"{output}.bin" if megatron else output, dtype, npy)
        self.index = self._open(f"{output}.idx.npy", np.dtype("<i8"), True)
        self.index.append(np.zeros(1, dtype=np.int64))
        self.limit = np.iinfo(dtype).max

    @property
    def index_name(self) -> str:
        return os.path.basename(f"{self.output}.idx" if self.megatron else self.index.path)

    def _open(self, path: str, dtype: np.dtype, npy: bool) -> _ArrayFile:
        try:
            f = _ArrayFile(path, dtype, npy)
        except BaseException:  # the files opened before it go too
            self.abort()
            raise
        self.files.append(f)
        return f

    def _ids(self, ids: np.ndarray) -> None:
        if ids.size and self.limit < 0xFFFFFFFF and int(ids.max()) > self.limit:
            raise ValueError(f"token id {int(ids.max())} does not fit {self.tokens.dtype.name}; use --format uint32")
        self.tokens.append(ids)

    def documents(self, flat: np.ndarray, lengths: np.ndarray) -> None:
        """Whole documents: their ids one after another and each one's length."""
        if self.eos is not None:
            flat = np.insert(flat, np.cumsum(lengths), self.eos)
            lengths = lengths + 1
        base = self.tokens.n
        self._ids(flat)
        self.index.append(base + np.cumsum(lengths))

    def part(self, ids: np.ndarray) -> None:
        """Ids of the document being streamed."""
        self._ids(ids)

    def end_document(self) -> None:
        if self.eos is not None:
            self._ids(np.array([self.eos], dtype=np.uint32))
        self.index.append(np.array([self.tokens.n], dtype=np.int64))

    @property
    def n_docs(self) -> int:
        return self.index.n - 1

    def commit(self, meta: dict) -> None:
        """fsync both arrays, then commit them with the sidecar (see `commit_files`)."""
        for f in self.files:
            f.finish()
        if not self.megatron:
            commit_files(self.output, meta, {"tokens": self.tokens, "index": self.index}, self.files)
            return
        from crayon_hf import megatron

        scratch = self.index
        idx = _PendingFile(f"{self.output}.idx")
        self.files = [self.tokens, idx]
        try:
            starts = np.load(scratch.tmp, mmap_mode="r")
            megatron.write_index(idx, self.tokens.dtype, starts)
            del starts
            idx.finish()
        finally:
            scratch.abort()
        commit_files(self.output, meta, {"bin": self.tokens, "idx": idx}, self.files)

    def abort(self) -> None:
        for f in self.files:
            f.abort()


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_FINGERPRINT_BYTES = 1 << 16


def fingerprint(path: str) -> dict:
    """{"bytes": size, "ends": sha256 of the first and last 64 KiB}: what the sidecar records of
    each array, cheap on any size, and different for a file from another run (a new array beside
    an old index) in any realistic case."""
    size = os.path.getsize(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(_FINGERPRINT_BYTES))
        if size > _FINGERPRINT_BYTES:
            f.seek(max(_FINGERPRINT_BYTES, size - _FINGERPRINT_BYTES))
            h.update(f.read())
    return {"bytes": size, "ends": h.hexdigest()[:32]}


def commit_files(primary: str, meta: dict, arrays: dict[str, "_PendingFile"], files: list["_PendingFile"]) -> None:
    """The commit of a run's files (already fsynced under temporary names). The sidecar
    PRIMARY.json is the commit record: it names each array with its size and fingerprint. Order:
    remove the old sidecar (so from here on the old set no longer verifies), rename the arrays into
    place, fsync the folder, rename the new sidecar in, fsync again. Killed at any point, the
    folder holds either the old complete set, or arrays without a sidecar (refused by
    `open_corpus`: "no sidecar"), or the new complete set; never arrays that verify against a
    sidecar that did not write them."""
    meta = {**meta, "files": {key: {"name": os.path.basename(f.path), **fingerprint(f.tmp)}
                              for key, f in arrays.items()}}
    sidecar = _PendingFile(f"{primary}.json")
    files.append(sidecar)
    sidecar.write(json.dumps(meta, indent=2).encode("utf-8") + b"\n")
    sidecar.finish()
    try:
        os.unlink(sidecar.path)
        _fsync_dir(primary)
    except FileNotFoundError:
        pass
    for f in files:
        if f is not sidecar:
            f.commit()
    _fsync_dir(primary)
    sidecar.commit()
    _fsync_dir(primary)


# ------------------------------------------------------------------------------ small documents


class _Batches:
    """Small documents, encoded a batch at a time on a worker thread while the next batch is read
    (the native batch call releases the GIL, so parsing JSON overlaps encoding) and written in
    order. At most two batches are held: the one being read and the one being encoded."""

    def __init__(self, face: _Face, writer: _CorpusWriter, bar: Progress, batch_chars: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.face, self.writer, self.bar, self.batch_chars = face, writer, bar, batch_chars
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="crayon-encode-corpus")
        self.texts: list[str] = []
        self.chars = self.nbytes = 0
        self.inflight: tuple[Any, int] | None = None  # (future, input bytes)

    def add(self, text: str, nbytes: int) -> None:
        self.texts.append(text)
        self.chars += len(text)
        self.nbytes += nbytes
        if self.chars >= self.batch_chars or len(self.texts) >= _BATCH_DOCS:
            self._submit()

    def _submit(self) -> None:
        """Starts encoding the batch being read, then writes the one before it."""
        started = (self.pool.submit(self.face.encode_batch, self.texts), self.nbytes) if self.texts else None
        if not self.texts:
            self.bar.update(self.nbytes)
        self.texts, self.chars, self.nbytes = [], 0, 0
        self._write()
        self.inflight = started

    def _write(self) -> None:
        if self.inflight is not None:
            future, nbytes = self.inflight
            self.inflight = None
            self.writer.documents(*future.result())
            self.bar.update(nbytes)

    def drain(self) -> None:
        """Writes every document added so far."""
        self._submit()
        self._write()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------------------------ the loop


def encode_corpus(
    inputs: Input | Iterable[Input],
    output: str | os.PathLike[str],
    tokenizer: Any,
    *,
    format: str = "uint32",
    append_eos: bool = False,
    eos_token: str | None = None,
    jsonl_field: str = "text",
    threads: int | None = None,
    progress: bool = True,
    pattern: str | None = None,
    read_bytes: int = _READ_BYTES,
    block_chars: int | None = None,
    batch_chars: int = _BATCH_CHARS,
) -> dict:
    """Encodes every document of `inputs`, in order, into `output` (see the module docstring).

    `inputs`: paths of plain-text files (one document each), JSONL files (one document per line,
    the string at `jsonl_field`) and Parquet files (one per row, column `jsonl_field`), or
    iterables of str documents. `tokenizer`: what ``--tokenizer`` accepts, or a loaded tiktoken
    Encoding or Tokenizer. `format`: "uint32" or "uint16" (raw little-endian) or "npy".
    `threads`: None follows CRAYON_NUM_THREADS / RAYON_NUM_THREADS, else every core (0 too).
    `read_bytes`, `block_chars`, `batch_chars`: the memory bounds (read block of big text files,
    parallel encoder block (default: two per thread in a read block, at most 256k characters),
    batch of small documents).
    Returns the summary written to OUTPUT.json, with the paths and the time taken."""
    from crayon_hf._threads import default_threads

    start = time.perf_counter()
    if format not in FORMATS:
        raise ValueError(f"unknown format {format!r}: use uint16, uint32, npy or megatron")
    if eos_token is not None and not append_eos:
        raise ValueError("--eos-token is the token --append-eos appends; pass --append-eos too")
    if min(read_bytes, block_chars or 1, batch_chars) <= 0:
        raise ValueError("read_bytes, block_chars and batch_chars must be positive")
    if threads is not None and threads < 0:
        raise ValueError(f"--threads {threads}: must be 0 (every core) or more")
    sources = _sources(inputs)
    output = os.fspath(output)
    spec = tokenizer if isinstance(tokenizer, (str, os.PathLike)) else None
    if spec is not None:
        from crayon_hf._resolve import load_tokenizer

        tokenizer = load_tokenizer(os.fspath(spec), pattern=pattern)
    threads = default_threads() if threads is None else threads
    if block_chars is None:
        block_chars = min(1 << 18, max(1 << 16, read_bytes // (2 * (threads or os.cpu_count() or 1))))
    face = _Face(tokenizer, threads)
    eos, eos_name = face.eos(eos_token) if append_eos else (None, None)
    dtype = output_dtype(face, format)

    total = sum(os.path.getsize(s) for _, s in sources if isinstance(s, str))
    known_total = all(isinstance(s, str) for _, s in sources)
    clean_stale_temps(output)
    writer = _CorpusWriter(output, dtype, format == "npy", eos, format == "megatron")
    bar = Progress("encode-corpus", total if known_total else None, progress, unit="B")
    try:
        encode_documents(_documents(sources, jsonl_field, read_bytes), tokenizer, face, writer, bar,
                         read_bytes=read_bytes, block_chars=block_chars, batch_chars=batch_chars)
        summary = summary_of(spec, face, format, writer, append_eos, eos, eos_name, jsonl_field,
                             [label for label, _ in sources])
        writer.commit(summary)
    except BaseException:
        writer.abort()
        raise
    finally:
        bar.close()
    return {**summary, "output": output, "index_path": os.path.join(os.path.dirname(output), writer.index_name),
            "sidecar": f"{output}.json", "input_bytes": total, "seconds": time.perf_counter() - start}


def output_dtype(face: _Face, format: str) -> np.dtype:
    """The token dtype of a format, refusing uint16 up front for a vocabulary that does not fit."""
    if format == "megatron":
        from crayon_hf import megatron

        return megatron.token_dtype(face.max_id())
    if format == "uint16" and (top := face.max_id()) > 0xFFFF:
        raise ValueError(f"--format uint16: this tokenizer's ids go up to {top:,}, past 65,535; use --format uint32")
    return FORMATS[format]


def summary_of(spec: Any, face: _Face, format: str, writer: _CorpusWriter, append_eos: bool, eos: int | None,
               eos_name: str | None, jsonl_field: str, inputs: list[str]) -> dict:
    """The sidecar's content (before the commit adds the files' fingerprints)."""
    return {
        "tokenizer": os.fspath(spec) if spec is not None else face.name,
        "format": format,
        "dtype": writer.tokens.dtype.str,
        "n_tokens": writer.tokens.n,
        "n_docs": writer.n_docs,
        "append_eos": append_eos,
        "eos_id": eos,
        "eos_token": eos_name,
        "jsonl_field": jsonl_field,
        "inputs": inputs,
        "index": writer.index_name,
        "crayon_hf_version": __version__,
    }


def encode_documents(documents: Iterable[tuple[Any, int]], tokenizer: Any, face: _Face, writer: _CorpusWriter,
                     bar: Progress, *, read_bytes: int = _READ_BYTES, block_chars: int = 1 << 18,
                     batch_chars: int = _BATCH_CHARS) -> None:
    """The loop: documents (from the readers) in order into the writer. Shared by the single-machine
    run and each task of a Ray run, so both give the same ids."""
    batches = _Batches(face, writer, bar, batch_chars)
    try:
        parallel: Any = None
        for doc, nbytes in documents:
            if isinstance(doc, str) and len(doc) <= read_bytes:
                batches.add(doc, nbytes)
                continue
            # A long document: through the parallel encoder, in order after the batches before it.
            batches.drain()
            if parallel is None:
                parallel = ParallelEncoder(tokenizer, threads=face.threads, block_chars=block_chars)
            for text, n in [(doc, nbytes)] if isinstance(doc, str) else doc:
                writer.part(parallel.feed(text))
                bar.update(n)
            writer.part(parallel.finish())
            writer.end_document()
        batches.drain()
    finally:
        batches.close()


# ----------------------------------------------------------------------------- reading it back


class ShardedArray:
    """Several 1-D arrays read as one (a sharded output's tokens): len, integer and slice indexing
    (each slice is read from the shards it spans), and np.asarray for the whole."""

    def __init__(self, parts: list[np.ndarray]) -> None:
        self.parts = parts
        self.bounds = np.cumsum([0, *map(len, parts)]).astype(np.int64)
        self.dtype = parts[0].dtype if parts else np.dtype("<u4")

    def __len__(self) -> int:
        return int(self.bounds[-1])

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    def __getitem__(self, key: int | slice) -> Any:
        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                return self[start:stop][::step] if stop > start else np.zeros(0, self.dtype)
            if stop <= start:
                return np.zeros(0, self.dtype)
            first = int(np.searchsorted(self.bounds, start, side="right")) - 1
            last = int(np.searchsorted(self.bounds, stop, side="left")) - 1
            pieces = [self.parts[i][max(start - self.bounds[i], 0):min(stop, self.bounds[i + 1]) - self.bounds[i]]
                      for i in range(first, last + 1)]
            return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        i = int(key)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {key} out of range for {n} tokens")
        part = int(np.searchsorted(self.bounds, i, side="right")) - 1
        return self.parts[part][i - self.bounds[part]]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.concatenate(self.parts) if self.parts else np.zeros(0, self.dtype)
        return whole.astype(dtype, copy=False) if dtype is not None else whole


class Corpus:
    """An encode-corpus output, checked against its sidecar (or a sharded output's manifest):
    `ids` (a read-only memory map, or a `ShardedArray` over the shards), `index` (int64 document
    starts, n_docs + 1 entries), `meta` (the sidecar or manifest). `corpus[i]` is document i's ids."""

    def __init__(self, path: str, ids: Any, index: np.ndarray, meta: dict) -> None:
        self.path, self.ids, self.index, self.meta = path, ids, index, meta

    def __len__(self) -> int:
        return len(self.index) - 1

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> np.ndarray:
        return np.asarray(self.ids[int(self.index[i]):int(self.index[i + 1])])


def _load_ids(path: str, meta: dict) -> tuple[Any, np.ndarray]:
    folder = os.path.dirname(path)
    if meta["format"] == "megatron":
        from crayon_hf import megatron

        data = megatron.read_indexed(path)
        index = np.append(np.asarray(data.pointers) // data.tokens.itemsize, len(data.tokens)).astype(np.int64)
        if len(data.document_index) != len(data.sequence_lengths) + 1:
            raise ValueError(f"{path}.idx: not one sequence per document, as encode-corpus writes")
        return data.tokens, index
    if meta["format"] == "npy":
        ids = np.load(path, mmap_mode="r")
    else:
        dtype = np.dtype(meta["dtype"])
        ids = np.memmap(path, dtype=dtype, mode="r") if os.path.getsize(path) else np.zeros(0, dtype)
    return ids, np.load(os.path.join(folder, meta["index"]), mmap_mode="r")


def open_corpus(path: str | os.PathLike[str]) -> Corpus:
    """Opens what `encode_corpus` (or `crayon encode-corpus`, with or without --ray, --shards or
    --format megatron) wrote at `path`, after checking that the arrays are the ones the sidecar
    committed: a missing sidecar (a run killed inside its commit), an array from another run or
    a truncated file is a ValueError naming the file, never a silent mix."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return _open_sharded(path)
    sidecar = f"{path}.json"
    if not os.path.exists(sidecar):
        raise ValueError(f"{path}: no sidecar {os.path.basename(sidecar)}: not a committed encode-corpus output "
                         "(a run killed while committing leaves its arrays without one); encode it again")
    with open(sidecar, encoding="utf-8") as f:
        meta = json.load(f)
    folder = os.path.dirname(path)
    for key, record in (meta.get("files") or {}).items():
        file = os.path.join(folder, record["name"])
        if not os.path.exists(file):
            raise ValueError(f"{file}: missing; {sidecar} names it as the {key} of this output")
        if fingerprint(file) != {"bytes": record["bytes"], "ends": record["ends"]}:
            raise ValueError(f"{file}: not the file {os.path.basename(sidecar)} committed (size or content "
                             "differs): the outputs are from different runs or damaged; encode again")
    ids, index = _load_ids(path, meta)
    if len(ids) != meta["n_tokens"] or len(index) != meta["n_docs"] + 1 or (len(index) and index[-1] != len(ids)):
        raise ValueError(f"{path}: {len(ids):,} tokens and {len(index) - 1:,} documents, but {sidecar} says "
                         f"{meta['n_tokens']:,} and {meta['n_docs']:,}: the files do not belong together")
    return Corpus(path, ids, index, meta)


MANIFEST = "manifest.json"


def _open_sharded(path: str) -> Corpus:
    manifest = os.path.join(path, MANIFEST)
    if not os.path.exists(manifest):
        raise ValueError(f"{path}: a directory without {MANIFEST}: not a sharded encode-corpus output")
    with open(manifest, encoding="utf-8") as f:
        meta = json.load(f)
    shards = [open_corpus(os.path.join(path, s["name"])) for s in meta["shards"]]
    ids = ShardedArray([s.ids for s in shards])
    base = np.cumsum([0, *(s.n_tokens for s in shards)])
    index = np.concatenate([np.zeros(1, np.int64), *(np.asarray(s.index[1:]) + b for s, b in zip(shards, base))])
    if len(ids) != meta["n_tokens"] or len(index) != meta["n_docs"] + 1:
        raise ValueError(f"{manifest}: promises {meta['n_tokens']:,} tokens and {meta['n_docs']:,} documents, the "
                         f"shards hold {len(ids):,} and {len(index) - 1:,}")
    return Corpus(path, ids, index, meta)


# ------------------------------------------------------------------------ a batch function for pipelines


class TokenizeBatch:
    """A picklable batch function for `ray.data.Dataset.map_batches` (or Spark's `mapInPandas`, or
    any engine that ships functions by pickling): a batch `{column: array of str, ...}` in, the same
    batch plus `{output: object array of uint32 id arrays}` out (numpy in, numpy out).

    Each document's ids are the ones `encode_corpus` writes for it (`encode_ordinary` on a tiktoken
    encoding, `encode(text, add_special_tokens=False)` on a tokenizer.json), with the end-of-text id
    after each one when `append_eos`. `tokenizer` is what ``--tokenizer`` takes (a bundled name, a
    path) or a loaded tokenizer of any face (`crayon_hf.tiktoken.Encoding`, `crayon_hf.Tokenizer`,
    `crayon_hf.CrayonTokenizer`); it travels as its spec or as a reference to its cartridge and is
    loaded once per worker process. `threads`: encoding threads per call (Ray gives each task a CPU;
    raise it with `num_cpus=` in map_batches)."""

    def __init__(self, tokenizer: Any, *, column: str = "text", output: str = "input_ids", append_eos: bool = False,
                 eos_token: str | None = None, threads: int = 1, keep_columns: bool = True) -> None:
        """`column`: the text column of the batches; `output`: the column the ids go to;
        `append_eos` / `eos_token`: as ``--append-eos`` / ``--eos-token``; `keep_columns`: False
        returns only the ids column. Nothing is loaded here (the tokenizer loads on first call)."""
        self.tokenizer = os.fspath(tokenizer) if isinstance(tokenizer, os.PathLike) else tokenizer
        self.column, self.output, self.append_eos, self.eos_token = column, output, append_eos, eos_token
        self.threads, self.keep_columns = threads, keep_columns
        self._state: tuple[Any, int | None] | None = None
        if eos_token is not None and not append_eos:
            raise ValueError("eos_token is the token append_eos appends; pass append_eos=True too")

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_state": None}  # the loaded engine is rebuilt on the worker

    def _load(self) -> tuple[Any, int | None]:
        if self._state is None:
            tok = self.tokenizer
            if isinstance(tok, str):
                from crayon_hf._resolve import load_tokenizer

                tok = load_tokenizer(tok)
            try:
                face: Any = _Face(tok, self.threads)
                encode = face.encode_batch
                eos = face.eos(self.eos_token)[0] if self.append_eos else None
            except ValueError:
                if not hasattr(tok, "encode_batch_to_numpy"):
                    raise
                # CrayonTokenizer (transformers' API): its flat arrays, without the template's tokens.
                def encode(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
                    ids, _, doc_offsets = tok.encode_batch_to_numpy(texts, add_special_tokens=False, offsets=False)
                    return ids, np.diff(doc_offsets)

                eos = None
                if self.append_eos:
                    name = self.eos_token or tok.eos_token
                    if name is None or tok.convert_tokens_to_ids(name) is None:
                        raise ValueError("append_eos: this tokenizer has no eos_token; pass eos_token=") from None
                    eos = int(tok.convert_tokens_to_ids(name))
            self._state = (encode, eos)
        return self._state

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """One batch: the ids of each document of `batch[column]`, as an object array of uint32 arrays."""
        encode, eos = self._load()
        texts = [t if isinstance(t, str) else str(t) for t in batch[self.column]]
        flat, lengths = encode(texts)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        ids = np.empty(len(texts), dtype=object)
        if eos is None:
            ids[:] = [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        else:
            ids[:] = [np.append(flat[a:b], np.uint32(eos)) for a, b in zip(bounds[:-1], bounds[1:])]
        out = dict(batch) if self.keep_columns else {}
        out[self.output] = ids
        return out
