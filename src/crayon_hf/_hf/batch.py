"""A batch of single sequences encoded, truncated, post-processed and padded as whole arrays.

`Tokenizer.encode_batch` builds one `Encoding` per document, as `tokenizers` does, and callers
that want arrays then flatten them again. This module skips the round trip for the common call
(single sequences, a post-processor with a `Layout`, padding to one length): the engine keeps the
batch's raw encodings natively (`HfBatch`) and writes the final arrays in one pass per document
(native/engines/hf_batch.cc): truncation keeps a prefix or a suffix, the layout's special-token blocks go
around the sequence, offsets are trimmed as the ByteLevel processor trims them, and padding fills
one (7, B, L) block. That is `post_process` + `pad_encodings` on every document at once; the
per-document `Encoding` objects stay available, built lazily on access (`encodings`) by running
exactly that per-document path on the document's raw encoding.

`encode_singles` returns None where the array path would not be exact by construction (a
processor without a layout, a tokenizer error to raise, token strings that the offset trim would
need, fixed padding shorter than a sequence): the caller then takes the per-document path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crayon_hf._hf.encoding import ATTN, END, ID, START, Encoding
from crayon_hf._native import native
from crayon_hf._hf.postprocess import _USIZE_MOD, PaddingParams, TruncationParams, post_process
from crayon_hf._hf.processors import _vocab_space_counts
from crayon_hf._lazy_numpy import lazy_numpy

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

_ROWS = 7
_NO_TRUNCATION = 1 << 62  # a usize "max_length" that wrapped around: nothing is ever that long


class AssembledBatch:
    """The final encodings of a batch of single sequences.

    m: (7, total) int64, the documents one after another, and bounds: (B + 1,) their columns --
        or, when the batch was padded to one length L, padded: (7, B, L) and m, bounds None.
        `padded` is writable: the arrays handed to users are views of it.
    encodings: a lazy sequence of `Encoding`, equal to what `Tokenizer.encode_batch` returns."""

    __slots__ = ("m", "bounds", "padded", "encodings", "_lengths")

    def __init__(self, m: np.ndarray | None, bounds: np.ndarray | None, padded: np.ndarray | None,
                 encodings: LazyEncodings, lengths: list[int]) -> None:
        self.m = m
        self.bounds = bounds
        self.padded = padded
        self.encodings = encodings
        self._lengths = lengths

    def rows(self, row: int) -> np.ndarray | list[list[int]]:
        """One row of every document: a (B, L) array when padded, else a list of lists."""
        if self.padded is not None:
            return self.padded[row]
        return native.int_lists(self.m[row], self.bounds)

    def lists(self, row: int) -> list[list[int]]:
        """One row of every document as lists (what transformers builds)."""
        if self.padded is None:
            if row == ATTN:  # no padding: every token is attended to
                return [[1] * n for n in self._lengths]
            return self.rows(row)  # type: ignore[return-value]
        return native.int_lists(self.padded[row].reshape(-1), self._row_bounds())

    def lengths(self) -> list[int]:
        return list(self._lengths)

    def offsets(self) -> np.ndarray | list[list[tuple[int, int]]]:
        """(B, L, 2) when padded, else per document a list of (start, end) tuples."""
        if self.padded is not None:
            if self.padded.shape[2] == 0:  # as np.asarray of empty rows: (B, 0), not (B, 0, 2)
                return np.zeros(self.padded.shape[1:], dtype=np.int64)
            return np.stack((self.padded[START], self.padded[END]), axis=-1)
        return native.pair_lists(self.m[START], self.m[END], self.bounds)

    def offset_lists(self) -> list[list[tuple[int, int]]]:
        if self.padded is None:
            return self.offsets()  # type: ignore[return-value]
        return native.pair_lists(self.padded[START].reshape(-1), self.padded[END].reshape(-1), self._row_bounds())

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids uint32, offsets int64 (n, 2), doc_offsets int64 (B + 1,)): every document's tokens,
        padding included, one after another; document i is [doc_offsets[i], doc_offsets[i + 1])."""
        if self.padded is None:
            m, bounds = self.m, self.bounds
        else:
            m, bounds = self.padded.reshape(_ROWS, -1), self._row_bounds()
        offsets = np.empty((m.shape[1], 2), dtype=np.int64)
        offsets[:, 0] = m[START]
        offsets[:, 1] = m[END]
        return m[ID].astype(np.uint32), offsets, bounds

    def _row_bounds(self) -> np.ndarray:
        b, length = self.padded.shape[1:]
        return np.arange(b + 1, dtype=np.int64) * length


class LazyEncodings(Sequence):
    """`Encoding` i is built on first access by the per-document path (`post_process` of the
    document's raw encoding, kept natively in the `HfBatch`, padded to the batch's length)."""

    def __init__(self, tok: Any, raw: Any, add_special_tokens: bool, truncation: TruncationParams | None,
                 padding: PaddingParams | None, texts: list[str] | None = None,
                 encode_special_tokens: bool = False) -> None:
        self._tok = tok
        self._raw = raw
        self._args = (add_special_tokens, truncation, padding)
        # A partial batch (ids only, or stopped at the truncation limit) is encoded again, whole.
        self._texts = None if raw.complete else texts
        self._special = encode_special_tokens
        self._built: list[Encoding | None] = [None] * len(raw)

    def __len__(self) -> int:
        return len(self._built)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        enc = self._built[i]
        if enc is None:
            enc = self._built[i] = self._build(i if i >= 0 else i + len(self))
        return enc

    def _build(self, i: int) -> Encoding:
        if self._texts is not None:
            ids, offsets, words, texts = self._tok._engine.encode(self._texts[i], self._special)
        else:
            ids, offsets, words, texts = self._raw.doc(i)
        vocab = self._tok._vocab_lazy
        tokens = None
        if texts:
            tokens = [vocab[t] for t in ids.tolist()]
            for k, text in texts:
                tokens[k] = text
        raw = Encoding.from_arrays(ids, offsets, words, None, vocab, 0, tokens)
        add_special_tokens, truncation, padding = self._args
        return post_process(raw, None, add_special_tokens, truncation, padding, self._tok._processor)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


_NO_BLOCK_M: Any = None


def _no_block() -> np.ndarray:
    """An empty (7, 0) block, made on first use (numpy is imported lazily)."""
    global _NO_BLOCK_M
    if _NO_BLOCK_M is None:
        _NO_BLOCK_M = np.zeros((_ROWS, 0), dtype=np.int64)
    return _NO_BLOCK_M
_UNSUPPORTED = object()
_NO_PROCESSOR_PLANS: dict[bool, Any] = {}
_NO_PROCESSOR_ID_PLANS: dict[bool, Any] = {}


def _plan(processor: Any, add_special_tokens: bool) -> tuple[np.ndarray, np.ndarray, int, bool | None] | None:
    """(prefix block, suffix block, sequence type id or -1, trim) of the processor's layout for a
    single sequence, cached on the processor; None where the layout is not prefix + sequence +
    suffix."""
    cache = _NO_PROCESSOR_PLANS if processor is None else processor.__dict__.setdefault("_batch_plans", {})
    plan = cache.get(add_special_tokens)
    if plan is None:
        plan = cache[add_special_tokens] = _make_plan(processor, add_special_tokens)
    return None if plan is _UNSUPPORTED else plan


def sequence_room(truncation: TruncationParams, processor: Any, add_special_tokens: bool) -> int | None:
    """How many of a single sequence's tokens truncation keeps: max_length less the processor's
    added tokens, wrapping as tokenizers' usize subtraction does; None when that is no limit."""
    added = processor.added_tokens(False) if processor is not None else 0
    room = (truncation.max_length - added) % _USIZE_MOD if add_special_tokens and added > 0 else truncation.max_length
    return None if room >= _NO_TRUNCATION else room


def id_plan(processor: Any, add_special_tokens: bool) -> tuple[list[int], list[int]] | None:
    """(ids before, ids after) the sequence in the processor's layout for a single sequence, or
    None where that layout is not prefix + sequence + suffix (as `_plan`)."""
    # Asked by every single-text encode: two dict reads once made (a short text's call is ~1 us).
    plans = _NO_PROCESSOR_ID_PLANS if processor is None else processor.__dict__.get("_id_plans")
    if plans is None:
        plans = processor.__dict__["_id_plans"] = {}
    plan = plans.get(add_special_tokens)
    if plan is None:
        plan = plans[add_special_tokens] = _id_plan(processor, add_special_tokens)
    return None if plan is _UNSUPPORTED else plan


def _sequence_layout(processor: Any, add_special_tokens: bool) -> Any:
    """(pieces before the sequence, pieces after it, the sequence's type id or None, trim) of a
    single sequence in the processor's layout, or _UNSUPPORTED where that layout is not
    prefix + sequence + suffix. `processor` is not None."""
    layout = processor.layout(False, add_special_tokens)
    if layout is None:
        return _UNSUPPORTED
    pieces = layout.pieces
    seq = [k for k, p in enumerate(pieces) if type(p) is tuple]
    if len(seq) != 1 or pieces[seq[0]][0] != 0:
        return _UNSUPPORTED
    return pieces[: seq[0]], pieces[seq[0] + 1 :], pieces[seq[0]][1], layout.trim


def _id_plan(processor: Any, add_special_tokens: bool) -> Any:
    """_make_plan's prefix and suffix as id lists, from the pieces' ids (no numpy: ids-only encodes
    never import it)."""
    if processor is None:
        return [], []
    parts = _sequence_layout(processor, add_special_tokens)
    if parts is _UNSUPPORTED:
        return _UNSUPPORTED
    before, after, _, _ = parts
    return [i for p in before for i in p.ids], [i for p in after for i in p.ids]


def _make_plan(processor: Any, add_special_tokens: bool) -> Any:
    if processor is None:
        return _no_block(), _no_block(), -1, None
    parts = _sequence_layout(processor, add_special_tokens)
    if parts is _UNSUPPORTED:
        return _UNSUPPORTED
    before_pieces, after_pieces, sequence_type, trim = parts
    before = [p.block for p in before_pieces]
    after = [p.block for p in after_pieces]
    prefix = np.concatenate(before, axis=1) if before else _no_block()
    suffix = np.concatenate(after, axis=1) if after else _no_block()
    return prefix, suffix, -1 if sequence_type is None else sequence_type, trim


def encode_singles(
    tok: Any,
    texts: list[str],
    add_special_tokens: bool,
    truncation: TruncationParams | None,
    padding: PaddingParams | None,
    encode_special_tokens: bool,
    num_threads: int = 0,
    offsets: bool = True,
    flat: bool = False,
    raw_batch: Any = None,
) -> Any:
    """`tok._encode_batch_with(texts, False, add_special_tokens, truncation, padding, ...)` as
    arrays, for a native `crayon_hf.Tokenizer`; None where the caller must take that path.

    An `AssembledBatch`; with `flat`, `AssembledBatch.flat()`'s three arrays instead, written
    straight from the raw encodings when there is no padding (20 bytes per token at the peak
    beside the raw encodings, which are freed document by document, instead of the 7-row block,
    its copy and the raw encodings kept for `encodings`).

    `offsets=False`: the caller reads no offsets or word ids from the arrays (they are left 0 and
    -1), so the engine encodes ids only. With right truncation to k tokens the engine stops each
    document once it has k + 1 (exact: see RawEncoding::limit in native/engines/hf_engine.h), which
    still tells "longer than k" apart for tokenizers' errors. `encodings` then encode their
    document again, whole.

    `raw_batch`: what makes the raw encodings, called as `tok._engine.encode_batch_raw` (the GPU
    path passes its own, crayon_hf.cuda.hf_raw_batch)."""
    if not texts:
        return None
    processor = tok._processor
    plan = _plan(processor, add_special_tokens)
    if plan is None:
        return None
    prefix, suffix, sequence_type, trim = plan

    max_len = None
    limit = -1
    if truncation is not None:
        max_len = sequence_room(truncation, processor, add_special_tokens)
        if truncation.direction != "left" and max_len is not None:
            limit = max_len + 1
    # Truncation tokenizers refuses: the per-document path raises its error.
    refused = truncation is not None and max_len is not None and (
        truncation.strategy == "only_second" or (max_len > 0 and truncation.stride >= max_len))
    keep_tail = truncation is not None and truncation.direction == "left"
    if padding is None and flat and raw_batch is None and not offsets:
        # Ids written as the batch is encoded (HfEngine.encode_batch_flat_ids).
        try:
            ids, bounds, cut = tok._engine.encode_batch_flat_ids(
                texts, encode_special_tokens, num_threads, limit, -1 if max_len is None else max_len, keep_tail,
                prefix, suffix)
        except UnicodeEncodeError:
            return None  # a lone surrogate: the per-document path raises tokenizers' TypeError
        if cut and refused:
            return None  # tokenizers raises; let the per-document path raise the same error
        return ids, None, bounds
    try:
        raw = (raw_batch or tok._engine.encode_batch_raw)(texts, encode_special_tokens, num_threads, offsets, limit)
    except UnicodeEncodeError:
        return None  # a lone surrogate: the per-document path raises tokenizers' TypeError
    n = raw.lengths()
    if trim is not None and offsets and raw.token_text():
        return None  # the trim counts spaces in token strings; the per-document path has them

    # Truncation (`truncate_encodings` on each document): keep a prefix or a suffix.
    keep = n
    if max_len is not None:
        if (n > max_len).any():
            if refused:
                return None  # tokenizers raises; let the per-document path raise the same error
            keep = np.minimum(n, max_len)
    lead = trail = None
    if trim is not None:
        lead, trail = _vocab_space_counts(tok._vocab_lazy)
    args = (keep, keep_tail, prefix, suffix, sequence_type, lead, trail, bool(trim))

    lazy_padding = None
    if padding is None and flat:
        return raw.take_flat(keep, keep_tail, prefix, suffix, lead, trail, bool(trim), num_threads)
    if padding is None:
        m, bounds = raw.assemble(*args, -1, False, 0, 0, num_threads)
        m.setflags(write=False)
        lengths = (keep + (prefix.shape[1] + suffix.shape[1])).tolist()
        lazy = LazyEncodings(tok, raw, add_special_tokens, truncation, None, texts, encode_special_tokens)
        return AssembledBatch(m, bounds, None, lazy, lengths)
    longest = int(keep.max()) + prefix.shape[1] + suffix.shape[1]
    target = padding.length if padding.length is not None else longest
    multiple = padding.pad_to_multiple_of
    if multiple and target % multiple:
        target += multiple - target % multiple
    if longest > target:
        return None  # fixed padding shorter than a sequence: ragged, per-document path
    padded = raw.assemble(*args, target, padding.direction == "left", padding.pad_id, padding.pad_type_id, num_threads)
    lazy_padding = PaddingParams(target, padding.direction, None, padding.pad_id, padding.pad_type_id, padding.pad_token)
    lazy = LazyEncodings(tok, raw, add_special_tokens, truncation, lazy_padding, texts, encode_special_tokens)
    return AssembledBatch(None, None, padded, lazy, [target] * len(texts))
