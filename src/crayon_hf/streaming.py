"""Streaming decode for LLM serving: `DecodeStream`, the API and outputs of
`tokenizers.decoders.DecodeStream`, for every face.

    from crayon_hf import DecodeStream

    stream = DecodeStream(skip_special_tokens=True)
    for token_id in generated:
        chunk = stream.step(tok, token_id)   # tok: crayon_hf.Tokenizer, CrayonTokenizer, a tiktoken Encoding, ...
        if chunk is not None:
            print(chunk, end="", flush=True)

A token can end in the middle of a character (byte-level BPE splits UTF-8 sequences; byte-fallback
models emit one `<0xXX>` token per byte), and a decoder can change how earlier text reads once
more tokens follow (Metaspace drops a leading space only at the start). So the stream keeps the
ids since the last text it returned, together with a short prefix of ids before them. It decodes
the prefix and the prefix plus the new ids, and returns the difference only once that difference
no longer ends in U+FFFD (an incomplete character). This is the algorithm of `tokenizers`, step
for step, so the chunks are the same.
"""

from __future__ import annotations

import copy

import os
import re
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

if TYPE_CHECKING:
    import numpy as np

REPLACEMENT = "\ufffd"


def _decoder(tokenizer: Any, skip_special_tokens: bool) -> Callable[[list[int]], str]:
    """`ids -> text` for any face: the tokenizers face (and `tokenizers.Tokenizer`), a transformers
    tokenizer (its backend's decode: no clean-up of tokenization spaces) or a tiktoken Encoding
    (crayon-hf's or tiktoken's, where skipping special tokens drops their ids)."""
    if hasattr(tokenizer, "encode_ordinary"):  # a tiktoken Encoding
        if not skip_special_tokens:
            return tokenizer.decode
        specials = set(tokenizer._special_tokens.values())
        return lambda ids: tokenizer.decode([i for i in ids if i not in specials])
    if hasattr(tokenizer, "convert_ids_to_tokens"):  # a transformers tokenizer
        return lambda ids: tokenizer.decode(ids, skip_special_tokens=skip_special_tokens,
                                            clean_up_tokenization_spaces=False)
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)


class DecodeStream:
    """Incremental decoding of token ids as they are generated (module docstring).

    `ids` primes the stream with ids already produced (for instance the prompt), so that the
    first chunk is decoded in their context."""

    def __init__(self, ids: Sequence[int] | None = None, skip_special_tokens: bool = False) -> None:
        """A stream primed with `ids` (none by default); `skip_special_tokens` leaves special
        tokens out of the text, as ``decode(..., skip_special_tokens=True)`` does.

        ```
        >>> stream = DecodeStream()
        >>> [stream.step(enc, i) for i in enc.encode("hello world")]
        ['hello', ' world']
        ```
        """
        self.skip_special_tokens = skip_special_tokens
        self._ids: list[int] = list(ids) if ids else []
        self._prefix = ""
        self._prefix_index = 0

    def step(self, tokenizer: Any, id: int | Sequence[int]) -> str | None:
        """Adds the next id (or list of ids); returns the text they complete, or None while a
        character is still incomplete."""
        decode = _decoder(tokenizer, self.skip_special_tokens)
        if not self._prefix and self._ids:
            prefix = decode(self._ids)
            if not prefix.endswith(REPLACEMENT):
                self._prefix, self._prefix_index = prefix, len(self._ids)
        if isinstance(id, int):
            self._ids.append(id)
        else:
            self._ids.extend(int(x) for x in id)
        text = decode(self._ids)
        if len(text.encode("utf-8")) <= len(self._prefix.encode("utf-8")) or text.endswith(REPLACEMENT):
            return None
        if not text.startswith(self._prefix):
            raise ValueError("Invalid prefix encountered while decoding stream. Token ID: "
                             f"{self._ids[-1]}, Expected prefix: {self._prefix!r}, Actual string: {text!r}")
        new_text = text[len(self._prefix):]
        kept = len(self._ids) - self._prefix_index
        self._ids = self._ids[self._prefix_index:]
        self._prefix = decode(self._ids)
        self._prefix_index = kept
        return new_text

    def __copy__(self) -> DecodeStream:
        # An independent stream from the same point, as copying tokenizers' DecodeStream gives.
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        return f"DecodeStream(skip_special_tokens={self.skip_special_tokens}, pending={len(self._ids)} ids)"


# ------------------------------------------------------------------------------ streaming encode
#
# A stream must hand out ids as soon as they are final, with state bounded by the longest
# pre-token, and the concatenation must equal the one-shot encoding whatever the chunking. Tokens
# are final once no later text can change them. The stream finds such places by encoding a window
# of its buffer and cutting only where three things hold:
#
# - the cut is at a word boundary of the text (a whitespace/non-whitespace change), so that in
#   every supported pipeline it is also where a pre-token starts or ends;
# - the window's encoding has a token boundary exactly there (no token, added token or merge
#   crosses it);
# - the window reaches at least two such boundaries and `_MARGIN` characters past the cut, and
#   starts as far before the last emitted position.
#
# Normalizers, pre-tokenizers and models are local. Their only effects at a distance are at the
# ends of the text: a `Prepend`, a Metaspace or ByteLevel prefix space, `Strip`, a pattern's `$`.
# The margins keep those effects on tokens the window does not hand out. The window's first
# piece may get a spurious prefix, but it lies before the last emitted position and is dropped;
# the window's last piece may see a spurious end of text, but it lies after the cut and is
# encoded again later.


_MARGIN = 32  # characters of context the window keeps on each side of what it hands out


class _Units:
    """One face's encoding of windows as ids with start and end offsets, and how a character
    position maps to those offsets (characters for the tokenizers faces, UTF-8 bytes for tiktoken)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tiktoken = hasattr(tokenizer, "encode_ordinary")
        if self.tiktoken:
            self.enc = tokenizer
            self._lengths: Any = None
            return
        backend = tokenizer
        if hasattr(tokenizer, "convert_ids_to_tokens"):  # a transformers tokenizer: its native engine, or its backend
            engine = getattr(tokenizer, "_engine", None)
            backend = (engine("_encode_plus") if callable(engine) else None) or tokenizer.backend_tokenizer
        if getattr(backend, "truncation", None) is not None or getattr(backend, "padding", None) is not None:
            import copy

            # A stream is one text of any length: no truncation, no padding (on a copy).
            backend = copy.deepcopy(backend)
            backend.no_truncation()
            backend.no_padding()
        self.backend = backend

    def _token_lengths(self) -> Any:
        """UTF-8 length of every token of a tiktoken vocabulary (built on first use)."""
        import numpy as np

        if self._lengths is None:
            ranks = self.enc._mergeable_ranks  # encode_ordinary never yields a special token
            lengths = np.zeros(max(ranks.values(), default=-1) + 1, dtype=np.int64)
            for token, rank in ranks.items():
                lengths[rank] = len(token)
            self._lengths = lengths
        return self._lengths

    def _arrays(self, e: Any) -> tuple:
        import numpy as np

        if hasattr(e, "ids_array"):  # crayon-hf's Encoding: numpy inside
            offsets = e.offsets_array
            return e.ids_array, offsets[:, 0], offsets[:, 1]
        offsets = np.asarray(e.offsets, dtype=np.int64).reshape(-1, 2)
        return np.asarray(e.ids, dtype=np.int64), offsets[:, 0], offsets[:, 1]

    def run(self, texts: list[str], threads: int = 1) -> list[tuple]:
        """(ids, starts, ends) numpy arrays for every text, encoded in parallel."""
        import numpy as np

        if self.tiktoken:
            lengths = self._token_lengths()
            flat_batch = getattr(self.enc, "encode_ordinary_batch_to_numpy", None)  # crayon-hf's, not tiktoken's
            if flat_batch is not None:
                flat, bounds = flat_batch(texts, num_threads=threads or 8)
                docs = [flat[bounds[i]:bounds[i + 1]] for i in range(len(texts))]
            else:
                docs = [np.asarray(ids, dtype=np.int64) for ids in self.enc.encode_ordinary_batch(texts, num_threads=threads or 8)]
            out = []
            for ids in docs:
                sizes = lengths[ids]
                ends = np.cumsum(sizes)
                out.append((ids, ends - sizes, ends))
            return out
        if len(texts) == 1:
            return [self._arrays(self.backend.encode(texts[0], add_special_tokens=False))]
        if hasattr(self.backend, "encode_batch_to_numpy"):  # crayon-hf's Tokenizer: no Encoding objects
            b = self.backend.encode_batch_to_numpy(texts, add_special_tokens=False)
            return [(b.ids[lo:hi], b.offsets[lo:hi, 0], b.offsets[lo:hi, 1])
                    for lo, hi in zip(b.doc_offsets[:-1], b.doc_offsets[1:])]
        return [self._arrays(e) for e in self.backend.encode_batch(texts, add_special_tokens=False)]

    def unit(self, text: str, p: int) -> int:
        return len(text[:p].encode("utf-8", "surrogatepass")) if self.tiktoken else p

    def one_shot(self, text: str) -> list[int]:
        if self.tiktoken:
            return self.enc.encode_ordinary(text)
        return list(self.backend.encode(text, add_special_tokens=False).ids)


_WORD_EDGE = re.compile(r"(?<=\S)(?=\s)|(?<=\s)(?=\S)")
# Where ParallelEncoder cuts its blocks: the start of a line, or the end of a word before a space
# or tab. Both are token boundaries in the supported pipelines almost always (byte-level tokens
# carry their leading space, Metaspace its ▁; no pattern joins a line break to the letter after
# it), while the end of a line often is not ("。\n" and ".\n\n" are one pre-token in cl100k).
_CUT = re.compile(r"(?<=\n)(?=\S)|(?<=\S)(?=[ \t])")


def _word_boundaries(text: str, start: int, stop: int | None = None) -> list[int]:
    """Positions start < p < stop where whitespace turns into non-whitespace or back, in order."""
    return [m.start() for m in _WORD_EDGE.finditer(text, start + 1, len(text) if stop is None else stop)]


def _boundary_index(starts: Any, ends: Any, u: int) -> int | None:
    """The index of the first token starting at or after offset u if no token crosses u (every
    earlier token ends at or before it), else None. Characters the normalizer drops (a BOM, a
    control character) may lie at u: no token starts exactly there, and none needs to."""
    import numpy as np

    k = int(np.searchsorted(starts, u, side="left"))
    return k if k == 0 or ends[k - 1] <= u else None


def _left_margin(text: str, p: int) -> int:
    """Where a window that hands out tokens from p should start: two word boundaries and at least
    _MARGIN characters before p (0 when there are not two). Looks back a little, then further."""
    stop = p - _MARGIN + 1
    reach = 8 * _MARGIN
    while stop > 1:
        start = max(-1, stop - reach)
        before = _word_boundaries(text, start, stop)
        if len(before) >= 2:
            return before[-2]
        if start < 0:
            break
        reach *= 4
    return 0


def _right_margin(text: str, p: int) -> int | None:
    """Where a window that hands out tokens up to p should end: the second word boundary at least
    _MARGIN characters after p, or None when the text does not reach that far yet."""
    first = _WORD_EDGE.search(text, p + _MARGIN)
    second = _WORD_EDGE.search(text, first.start() + 1) if first else None
    return second.start() if second else None


def _last_cut(text: str, lo: int) -> int | None:
    """The last word boundary after lo that still has its right margin in the text."""
    reach = 8 * _MARGIN
    while True:
        start = max(lo, len(text) - reach)
        found = [q for q in _word_boundaries(text, start) if _right_margin(text, q) is not None]
        if found or start == lo:
            return found[-1] if found else None
        reach *= 4


class _Windows:
    """The buffer and the cutting rules shared by EncodeStream and ParallelEncoder."""

    def __init__(self, tokenizer: Any) -> None:
        import codecs

        self._units = _Units(tokenizer)
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self._reset()

    def _reset(self) -> None:
        self._buf = ""
        self._done = 0  # self._buf[:self._done] is encoded and handed out (kept as left context)
        self._next_try = 0  # try to hand out ids again once the buffer reaches this length

    def _add(self, text: str) -> bool:
        if not isinstance(text, str):
            raise TypeError(f"feed() takes str, not {type(text).__name__} (use feed_bytes for bytes)")
        self._buf += text
        return len(self._buf) >= self._next_try

    def _usable_cuts(self) -> list[int]:
        """Word boundaries after the handed-out text that have their right margin in the buffer."""
        last = _last_cut(self._buf, self._done)
        return [] if last is None else [p for p in _word_boundaries(self._buf, self._done, last + 1)]

    def _resume(self, window: str, offset: int, starts: Any, ends: Any) -> int:
        """Index of the first token not yet handed out in a window starting at buffer offset `offset`."""
        k = _boundary_index(starts, ends, self._units.unit(window, self._done - offset))
        if k is None:  # the context margin was too small for this pipeline: never seen in tests
            raise RuntimeError("crayon-hf encode stream: the text before the last cut changed its tokens; "
                               "please report this with the text")
        return k

    def _advance(self, p: int) -> None:
        """Everything before p is handed out: keep only a left margin before it."""
        keep_from = _left_margin(self._buf, p)
        self._buf = self._buf[keep_from:]
        self._done = p - keep_from
        self._next_try = len(self._buf) + 1

    def _finish(self) -> Any:
        self._buf += self._decoder.decode(b"", final=True)
        ids, starts, ends = self._units.run([self._buf])[0]
        out = ids[self._resume(self._buf, 0, starts, ends):]
        self._reset()
        return out


class EncodeStream(_Windows):
    """Incremental encoding: `feed(text)` returns the ids that are final so far, `finish()` the
    rest; concatenated, they equal `encode_ordinary(text)` (tiktoken faces) or
    `encode(text, add_special_tokens=False).ids` without truncation or padding (tokenizers and
    transformers faces), whatever the chunking. `feed_bytes` takes UTF-8 in pieces that may split
    a character. The stream holds only the text since the last final token plus a margin, so
    memory is bounded by the longest stretch without a word boundary, not by the input."""

    def feed(self, text: str) -> list[int]:
        """Feeds the next piece of text; returns the ids that no later text can change (maybe
        none yet)."""
        return self._emit() if self._add(text) else []

    def feed_bytes(self, data: bytes) -> list[int]:
        """Feeds UTF-8 bytes; a character split between two calls is completed by the next one.
        Invalid UTF-8 raises UnicodeDecodeError."""
        return self.feed(self._decoder.decode(bytes(data), final=False))

    def finish(self) -> list[int]:
        """The remaining ids; the stream is then empty and may encode a new text."""
        return self._finish().tolist()

    def _emit(self) -> list[int]:
        buf = self._buf
        usable = self._usable_cuts()
        self._next_try = len(buf) + max(64, (len(buf) - self._done) // 2)  # amortized: the buffer must grow
        if not usable:
            return []
        ids, starts, ends = self._units.run([buf])[0]
        first = self._resume(buf, 0, starts, ends)
        for p in reversed(usable):
            k = _boundary_index(starts, ends, self._units.unit(buf, p))
            if k is not None and k >= first:
                self._advance(p)
                return ids[first:k].tolist()
        return []


class ParallelEncoder(_Windows):
    """EncodeStream for large inputs on all cores: the pending text is cut into blocks of about
    `block_chars` characters at word boundaries, each block is encoded in a window reaching a
    margin past both of its ends (all windows in one parallel batch), and a block's tokens are
    taken only when its window has token boundaries at both of its cuts; a cut that fails joins
    its two blocks. Returns numpy arrays of uint32 ids."""

    def __init__(self, tokenizer: Any, *, threads: int = 0, block_chars: int = 1 << 20) -> None:
        super().__init__(tokenizer)
        self.threads = threads
        self.block_chars = max(64, int(block_chars))

    def feed(self, text: str) -> np.ndarray:
        """Feeds the next piece of text; returns the ids final so far as a uint32 array."""
        import numpy as np

        return self._emit() if self._add(text) else np.zeros(0, dtype=np.uint32)

    def feed_bytes(self, data: bytes) -> np.ndarray:
        """As `feed`, for UTF-8 bytes that may end inside a character."""
        return self.feed(self._decoder.decode(bytes(data), final=False))

    def finish(self) -> np.ndarray:
        """The remaining ids as a uint32 array; the encoder may then encode a new text."""
        import numpy as np

        return self._finish().astype(np.uint32)

    def _emit(self) -> Any:
        import numpy as np

        buf = self._buf
        empty = np.zeros(0, dtype=np.uint32)
        self._next_try = len(buf) + self.block_chars  # wait for at least one more block of text
        # Block ends: the first word boundary past every block_chars characters, then the last cut.
        last = _last_cut(buf, self._done)
        if last is None:
            return empty
        cuts, goal = [], self._done + self.block_chars
        while goal < last:
            m = _CUT.search(buf, goal, last)
            if m is None:
                break
            cuts.append(m.start())
            goal = m.start() + self.block_chars
        cuts.append(last)
        pieces: list = []
        piece_starts: list[int] = []
        lo = self._done
        # Windows per native call: enough to keep every thread busy, few enough that the call's
        # arrays (ids and offsets of every token) stay a small multiple of block_chars.
        group = 2 * max(1, self.threads or os.cpu_count() or 1)
        while cuts:
            head = cuts[:group]
            starts_at = [lo] + head[:-1]
            windows = []
            for a, b in zip(starts_at, head):
                left = _left_margin(buf, a)
                windows.append((left, buf[left: _right_margin(buf, b) or len(buf)]))
            encoded = self._units.run([w for _, w in windows], self.threads)
            for j, ((left, window), (ids, starts, ends)) in enumerate(zip(windows, encoded)):
                a, b = starts_at[j], head[j]
                first = _boundary_index(starts, ends, self._units.unit(window, a - left))
                last = _boundary_index(starts, ends, self._units.unit(window, b - left))
                if first is None:
                    if not pieces:  # a is where the stream resumes, a boundary before
                        first = self._resume(window, left, starts, ends)  # raises
                    else:  # this window sees no boundary at a: join the blocks before and after a
                        pieces.pop()
                        lo, cuts = piece_starts.pop(), cuts[j:]
                        break
                if last is None:  # no boundary at b: join the blocks before and after b
                    lo, cuts = a, cuts[j + 1:]
                    break
                pieces.append(np.array(ids[first:last], dtype=np.uint32))  # a copy: frees the batch's arrays
                piece_starts.append(a)
                lo = b
            else:
                cuts = cuts[len(head):]
        if lo == self._done:
            return empty
        self._advance(lo)
        return np.concatenate(pieces).astype(np.uint32) if pieces else empty


def encode_iter(tokenizer: Any, chunks: Iterable[str | bytes]) -> Iterator[int]:
    """Yields the ids of the text the chunks make up, as they become final."""
    stream = EncodeStream(tokenizer)
    for chunk in chunks:
        yield from stream.feed_bytes(chunk) if isinstance(chunk, (bytes, bytearray)) else stream.feed(chunk)
    yield from stream.finish()
