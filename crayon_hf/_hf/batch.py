"""A batch of single sequences encoded, truncated, post-processed and padded as whole arrays.

`Tokenizer.encode_batch` builds one `Encoding` per document, as `tokenizers` does, and callers
that want arrays then flatten them again. This module skips the round trip for the common call
(single sequences, a post-processor with a `Layout`, padding to one length): the engine returns
the batch as one (7, n) matrix, truncation is a column selection, the layout is a scatter of the
special-token blocks around each sequence, and padding is one more scatter into a (7, B, L) block.
Each step is `post_process` + `pad_encodings` on every document at once; the per-document
`Encoding` objects are still available, built lazily on access (`encodings`), by running exactly
that per-document path on the document's raw columns.

`encode_singles` returns None where the array path would not be exact by construction (pairs,
a processor without a layout, a tokenizer error to raise, token strings that the offset trim would
need, fixed padding shorter than a sequence): the caller then takes the per-document path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from crayon_hf._hf.encoding import ID, START, TYPE, WORD, SPECIAL, ATTN, END, Encoding
from crayon_hf._hf.postprocess import _USIZE_MOD, PaddingParams, TruncationParams, post_process
from crayon_hf._hf.processors import trimmed_matrix

_ROWS = 7
_NO_TRUNCATION = 1 << 62  # a usize "max_length" that wrapped around: nothing is ever that long


class BatchArrays:
    """The final encodings of a batch of single sequences.

    m: (7, total) int64, the documents one after another; bounds: (B + 1,) their columns.
    padded: (7, B, L) when the batch was padded (all documents then have length L), else None;
        writable, since the arrays handed to users are views of it.
    encodings: a lazy sequence of `Encoding`, equal to what `Tokenizer.encode_batch` returns."""

    __slots__ = ("m", "bounds", "padded", "encodings")

    def __init__(self, m: np.ndarray, bounds: np.ndarray, padded: np.ndarray | None, encodings: LazyEncodings) -> None:
        self.m = m
        self.bounds = bounds
        self.padded = padded
        self.encodings = encodings

    def rows(self, row: int) -> np.ndarray | list[list[int]]:
        """One row of every document: a (B, L) array when padded, else a list of lists."""
        if self.padded is not None:
            return self.padded[row]
        flat = self.m[row].tolist()
        b = self.bounds.tolist()
        return [flat[b[i] : b[i + 1]] for i in range(len(b) - 1)]

    def lengths(self) -> list[int]:
        if self.padded is not None:
            return [self.padded.shape[2]] * self.padded.shape[1]
        return np.diff(self.bounds).tolist()

    def offsets(self) -> np.ndarray | list[list[tuple[int, int]]]:
        """(B, L, 2) when padded, else per document a list of (start, end) tuples."""
        if self.padded is not None:
            return np.stack((self.padded[START], self.padded[END]), axis=-1)
        starts, ends = self.rows(START), self.rows(END)
        return [list(zip(s, e)) for s, e in zip(starts, ends)]


class LazyEncodings(Sequence):
    """`Encoding` i is built on first access by the per-document path (`post_process` of the
    document's raw encoding, padded to the batch's length) and kept."""

    def __init__(self, tok: Any, raw: np.ndarray, bounds: np.ndarray, token_text: list[tuple[int, str]],
                 add_special_tokens: bool, truncation: TruncationParams | None, padding: PaddingParams | None) -> None:
        self._tok = tok
        self._raw = raw
        self._bounds = bounds.tolist()
        self._texts = dict(token_text)
        self._args = (add_special_tokens, truncation, padding)
        self._built: list[Encoding | None] = [None] * (len(self._bounds) - 1)

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
        a, b = self._bounds[i], self._bounds[i + 1]
        vocab = self._tok._vocab_lazy
        texts = [(k - a, s) for k, s in self._texts.items() if a <= k < b]
        if texts:
            tokens = [vocab[t] for t in self._raw[ID, a:b].tolist()]
            for k, s in texts:
                tokens[k] = s
            raw = Encoding._new(self._raw[:, a:b], tokens, None)
        else:
            raw = Encoding._new(self._raw[:, a:b], None, vocab)
        add_special_tokens, truncation, padding = self._args
        return post_process(raw, None, add_special_tokens, truncation, padding, self._tok._processor)

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


def _columns(starts: np.ndarray, lengths: np.ndarray, total: int) -> np.ndarray:
    """The column indices ``starts[i] + k`` for k < lengths[i], documents one after another."""
    first = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=first[1:])
    return np.arange(total, dtype=np.int64) + np.repeat(starts - first, lengths)


def _bounds(lengths: np.ndarray) -> np.ndarray:
    b = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=b[1:])
    return b


def encode_singles(
    tok: Any,
    texts: list[str],
    add_special_tokens: bool,
    truncation: TruncationParams | None,
    padding: PaddingParams | None,
    encode_special_tokens: bool,
    num_threads: int = 0,
) -> BatchArrays | None:
    """`tok._encode_batch_with(texts, False, add_special_tokens, truncation, padding, ...)` as
    arrays, for a native `crayon_hf.Tokenizer`; None where the caller must take that path."""
    if not texts:
        return None
    processor = tok._processor
    if processor is None:
        pieces: tuple[Any, ...] = ((0, None),)
        trim = None
    else:
        layout = processor.layout(False, add_special_tokens)
        if layout is None:
            return None
        pieces, trim = layout.pieces, layout.trim
        if [p[0] for p in pieces if type(p) is tuple] != [0]:
            return None

    raw, bounds, token_text = tok._engine.encode_batch_matrix(texts, encode_special_tokens, num_threads)
    raw.setflags(write=False)
    if token_text and trim is not None:
        return None  # the trim counts spaces in token strings; the per-document path has them
    n = np.diff(bounds)
    total = int(bounds[-1])

    # Truncation (`truncate_encodings` on each document): keep a prefix or a suffix.
    keep = n
    starts = bounds[:-1]
    if truncation is not None:
        added = processor.added_tokens(False) if processor is not None else 0
        max_len = (truncation.max_length - added) % _USIZE_MOD if add_special_tokens and added > 0 else truncation.max_length
        max_len = min(max_len, _NO_TRUNCATION)
        if (n > max_len).any():
            if truncation.strategy == "only_second" or (max_len > 0 and truncation.stride >= max_len):
                return None  # tokenizers raises; let the per-document path raise the same error
            keep = np.minimum(n, max_len)
            if truncation.direction == "left":
                starts = starts + (n - keep)
            total = int(keep.sum())
    kept = raw if keep is n else raw[:, _columns(starts, keep, total)]
    kept_bounds = bounds if keep is n else _bounds(keep)
    if trim is not None:
        kept = trimmed_matrix(kept, None, tok._vocab_lazy, trim, kept_bounds[:-1][keep > 0])

    # The layout: special-token blocks around each sequence.
    width = sum(p.block.shape[1] for p in pieces if type(p) is not tuple)
    if width == 0 and all(p[1] is None for p in pieces):
        final, final_bounds = kept, kept_bounds
    else:
        lengths = keep + width
        final_bounds = _bounds(lengths)
        final = np.empty((_ROWS, int(final_bounds[-1])), dtype=np.int64)
        at = final_bounds[:-1].copy()
        for p in pieces:
            if type(p) is tuple:
                cols = _columns(at, keep, total)
                final[:, cols] = kept
                if p[1] is not None:
                    final[TYPE, cols] = p[1]
                at += keep
            else:
                for j in range(p.block.shape[1]):
                    final[:, at] = p.block[:, j : j + 1]
                    at += 1
        final.setflags(write=False)

    lazy_padding = None
    padded = None
    if padding is not None:
        lengths = np.diff(final_bounds)
        target = padding.length if padding.length is not None else int(lengths.max())
        multiple = padding.pad_to_multiple_of
        if multiple and target % multiple:
            target += multiple - target % multiple
        if (lengths > target).any():
            return None  # fixed padding shorter than a sequence: ragged, per-document path
        b = len(lengths)
        padded = np.empty((_ROWS, b, target), dtype=np.int64)
        padded[ID] = padding.pad_id
        padded[TYPE] = padding.pad_type_id
        padded[START] = 0
        padded[END] = 0
        padded[WORD] = -1
        padded[SPECIAL] = 1
        padded[ATTN] = 0
        row_start = np.arange(b, dtype=np.int64) * target
        if padding.direction == "left":
            row_start += target - lengths
        padded.reshape(_ROWS, b * target)[:, _columns(row_start, lengths, int(final_bounds[-1]))] = final
        lazy_padding = PaddingParams(target, padding.direction, None, padding.pad_id, padding.pad_type_id,
                                     padding.pad_token)
    lazy = LazyEncodings(tok, raw, bounds, token_text, add_special_tokens, truncation, lazy_padding)
    return BatchArrays(final, final_bounds, padded, lazy)
