"""Token-budget chunking: `chunk_by_tokens` splits a text into pieces whose encodings each fit a
budget, for retrieval (RAG) and context windows.

    text --encode once (any face)--> tokens with their extent in the text
         --valid cuts: token boundaries that fall between characters--> cut positions
         --greedy: the last cut (of the preferred boundary kind) within the budget--> chunk
         --count(chunk) <= max_tokens, else the previous cut--> Chunk(str) with its offsets

Why cuts are checked twice. The plan reads the whole text's encoding: the tokens between two cuts
are the chunk's tokens *in that encoding*. A chunk encoded on its own can differ at its edges
(a pre-tokenizer rule that looks across the cut, SentencePiece's prepended space, the special
tokens a post-processor adds), so every planned chunk is counted again with the tokenizer itself
and moved back to an earlier cut when it would overflow. The promise is on that second count:
``tokenizer.count(chunk) <= max_tokens`` for every chunk, whatever the plan said.

A cut inside a character. Byte-level BPE (GPT-2, cl100k, o200k, Llama 3, Qwen ...) can end a token
in the middle of a character's UTF-8 bytes (a rare CJK character or an emoji is often two or three
tokens). No string slice can cut there, so such boundaries are not cuts: the tokens of that
character stay in one chunk. A text whose smallest uncuttable run exceeds the budget (an emoji of
three tokens under ``max_tokens=2``) raises ValueError instead of returning an over-budget chunk.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Callable, Literal

import numpy as np

__all__ = ["Chunk", "chunk_by_tokens"]

Boundary = Literal["token", "sentence", "paragraph"]
_LEVELS = {"token": 0, "sentence": 1, "paragraph": 2}

# A blank line: a line break, optional spaces, another line break (and the whitespace after it).
_PARAGRAPH = re.compile(r"\n[^\S\n]*\n\s*")
# Sentence-final punctuation (closing quotes and brackets included) followed by whitespace or the
# end, or a CJK full stop, which needs no space after it; and the whitespace after either.
_SENTENCE = re.compile(r"(?:[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s|\Z)|[\u3002\uff01\uff1f\uff61]+[\u300d\u300f\uff09\u201d\u2019]*)")


class Chunk(str):
    """One chunk: the text itself (a `str`), plus where it lies.

    ``text[chunk.start:chunk.end] == chunk``. ``token_start`` / ``token_end`` index the tokens of
    the whole text's encoding (the one `chunk_by_tokens` planned with, without special tokens)
    that lie in the chunk; ``n_tokens`` is the tokenizer's own count of the chunk encoded alone,
    the number that is within the budget."""

    start: int
    end: int
    token_start: int
    token_end: int
    n_tokens: int

    def __new__(cls, value: str, start: int, end: int, token_start: int, token_end: int, n_tokens: int) -> Chunk:
        self = super().__new__(cls, value)
        self.start, self.end = start, end
        self.token_start, self.token_end = token_start, token_end
        self.n_tokens = n_tokens
        return self

    def __repr__(self) -> str:
        return (f"Chunk({str.__repr__(self)}, start={self.start}, end={self.end}, "
                f"tokens=[{self.token_start}:{self.token_end}], n_tokens={self.n_tokens})")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Chunk, (str(self), self.start, self.end, self.token_start, self.token_end, self.n_tokens))


def chunk_by_tokens(
    text: str,
    max_tokens: int,
    *,
    tokenizer: Any,
    overlap: int = 0,
    boundary: Boundary = "token",
    add_special_tokens: bool = True,
) -> list[Chunk]:
    """Splits `text` into chunks whose encodings each hold at most `max_tokens` tokens.

    `tokenizer` is any face -- a `crayon_hf.tiktoken` Encoding, a `crayon_hf.Tokenizer`, a
    `CrayonTokenizer` -- or the reference it replaces (a `tiktoken.Encoding`, a
    `tokenizers.Tokenizer`, a transformers fast tokenizer); the chunks are the same for a face and
    its reference. The budget counts what that tokenizer gives for the chunk alone: tiktoken's
    ordinary encoding; for tokenizer.json and transformers tokenizers also the special tokens the
    post-processor adds (``[CLS]``/``[SEP]``, ``<s>`` ...) unless `add_special_tokens` is False.

    Every chunk ends at a token boundary of the whole text's encoding that falls between two
    characters (see the module docstring). `boundary` says where chunks prefer to end:
    ``"token"`` anywhere (chunks as full as possible); ``"sentence"`` after sentence-final
    punctuation (``. ! ? …``, CJK ``。！？``) and the whitespace after it, or at a line break;
    ``"paragraph"`` at a blank line. A chunk ends at the last preferred boundary within the budget;
    where there is none it falls back to a sentence (for ``"paragraph"``), then to any token.

    With ``overlap=0`` the chunks follow each other: ``"".join(chunks) == text``. With
    ``overlap=k`` each chunk after the first starts at the first cut at or after ``k`` tokens
    before the previous chunk's end, so it repeats at most ``k`` of that chunk's tokens (fewer
    where a cut would fall inside a character, or where the previous chunk is shorter than
    ``k``). In both cases ``text[c.start:c.end] == c`` and the text is the first chunk followed by
    each later chunk's part past its predecessor's end:
    ``chunks[0] + "".join(c[p.end - c.start:] for p, c in zip(chunks, chunks[1:])) == text``.

    Raises ValueError when `max_tokens` leaves no room after the special tokens, when
    ``overlap >= max_tokens`` (no progress), or when a run of tokens that cannot be cut (one
    character's tokens) is longer than the budget. An empty text gives no chunks.

    ```
    >>> import crayon_hf
    >>> enc = crayon_hf.tiktoken.get_encoding("cl100k_base")
    >>> text = "One sentence here. Another one follows it.\\n\\nA new paragraph starts."
    >>> chunks = crayon_hf.chunk_by_tokens(text, 12, tokenizer=enc, boundary="sentence")
    >>> [str(c) for c in chunks]
    ['One sentence here. Another one follows it.\\n\\n', 'A new paragraph starts.']
    >>> "".join(chunks) == text and all(enc.count(c) <= 12 for c in chunks)
    True
    ```
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if boundary not in _LEVELS:
        raise ValueError(f"boundary must be 'token', 'sentence' or 'paragraph', not {boundary!r}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, not {max_tokens}")
    if overlap < 0:
        raise ValueError(f"overlap must be >= 0, not {overlap}")
    face = _face(tokenizer, add_special_tokens)
    if not text:
        return []
    extra = face.count("")  # what the post-processor adds to any chunk
    budget = max_tokens - extra
    if budget < 1:
        raise ValueError(f"max_tokens={max_tokens} leaves no room: the tokenizer adds {extra} special tokens "
                         "to every chunk (pass add_special_tokens=False to leave them out of the budget)")
    if overlap >= budget:
        raise ValueError(f"overlap ({overlap}) must be smaller than the tokens a chunk holds ({budget})")

    cut_tokens, cut_chars = face.cuts(text)  # token index and char position of every valid cut
    n_tokens = int(cut_tokens[-1])
    level = _levels(text, cut_chars, _LEVELS[boundary])

    chunks: list[Chunk] = []
    s = 0  # index into cut_tokens of the current chunk's start
    last = len(cut_tokens) - 1
    while True:
        first_token = int(cut_tokens[s])
        start_char = 0 if s == 0 else int(cut_chars[s])
        hi = int(np.searchsorted(cut_tokens, first_token + budget, side="right")) - 1  # last cut within the plan
        if hi <= s:
            nxt = s + 1
            raise ValueError(
                f"cannot cut the text between characters {start_char} and {int(cut_chars[nxt])}: its "
                f"{int(cut_tokens[nxt]) - first_token} tokens have no boundary between characters and exceed "
                f"max_tokens={max_tokens}")
        end, count = _choose_end(text, face, cut_chars, level, s, hi, last, start_char, max_tokens, boundary)
        end_char = len(text) if end == last else int(cut_chars[end])
        chunks.append(Chunk(text[start_char:end_char], start_char, end_char, first_token, int(cut_tokens[end]), count))
        if end == last:
            return chunks
        if overlap:
            # The first cut at or after `overlap` tokens before the end, past the current start.
            back = int(np.searchsorted(cut_tokens, int(cut_tokens[end]) - overlap, side="left"))
            s = max(back, s + 1)
        else:
            s = end


def _choose_end(text: str, face: _Face, cut_chars: np.ndarray, level: np.ndarray | None, s: int, hi: int,
                last: int, start_char: int, max_tokens: int, boundary: str) -> tuple[int, int]:
    """The chunk's end cut in (s, hi]: preferred levels first, later cuts first, the first whose
    chunk the tokenizer counts within budget. Returns (cut index, its count)."""
    candidates = np.arange(hi, s, -1)
    if level is not None:
        lv = level[candidates]
        # Stable sort by level, highest first: within a level, later cuts stay first.
        candidates = candidates[np.argsort(-lv, kind="stable")]
    tried = 0
    for c in candidates.tolist():
        end_char = len(text) if c == last else int(cut_chars[c])
        count = face.count(text[start_char:end_char])
        if count <= max_tokens:
            return c, count
        tried += 1
    raise ValueError(f"no cut after character {start_char} gives a chunk of at most {max_tokens} tokens "
                     f"({tried} tried)")


def _levels(text: str, cut_chars: np.ndarray, wanted: int) -> np.ndarray | None:
    """Each cut's boundary kind (0 token, 1 sentence or line, 2 paragraph), capped at `wanted`;
    None when every cut will do."""
    if wanted == 0:
        return None
    marks = np.zeros(len(text) + 1, dtype=np.int8)
    for m in re.finditer(r"\n", text):
        marks[m.end()] = 1  # just after a line break
    for m in _SENTENCE.finditer(text):
        ws = m.end()
        while ws < len(text) and text[ws].isspace():
            ws += 1
        marks[m.end():ws + 1] = np.maximum(marks[m.end():ws + 1], 1)
    if wanted >= 2:
        for m in _PARAGRAPH.finditer(text):
            marks[m.start():m.end() + 1] = 2
    level = np.minimum(marks[cut_chars], wanted)
    level[-1] = wanted  # the end of the text is every kind of boundary
    return level


# ---------------------------------------------------------------------------- faces


class _Face:
    """What chunking needs from a tokenizer: the whole text's valid cuts, and a chunk's count."""

    count: Callable[[str], int]

    def cuts(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError


def _face(tok: Any, add_special_tokens: bool) -> _Face:
    if hasattr(tok, "encode_ordinary") and hasattr(tok, "decode_single_token_bytes"):
        return _TiktokenFace(tok)
    if callable(tok) and hasattr(tok, "model_max_length"):
        return _TransformersFace(tok, add_special_tokens)
    if hasattr(tok, "encode") and hasattr(tok, "get_vocab_size"):
        return _TokenizersFace(tok, add_special_tokens)
    raise TypeError(f"chunk_by_tokens needs a tokenizer (a tiktoken Encoding, a tokenizers.Tokenizer or a "
                    f"transformers tokenizer, or their crayon-hf faces), not {type(tok).__name__}")


def _cuts_from_offsets(offsets: np.ndarray, text_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Valid cuts from per-token (start, end) character offsets: boundary k (before token k) is
    one when no token before it ends after a token from k on starts -- the tokens of one
    character share that character's offsets, so a boundary between them never is. Its position
    is where the tokens before it end: text no token covers (the space a ByteLevel post-processor
    trims from " world", the spaces BERT drops) goes with the chunk after, where the token that
    holds it in the whole text's encoding is. Tokens with an empty span bind nothing."""
    n = len(offsets)
    if n == 0:
        return np.array([0], dtype=np.int64), np.array([text_len], dtype=np.int64)
    starts = offsets[:, 0].astype(np.int64)
    ends = offsets[:, 1].astype(np.int64)
    empty = ends <= starts
    big = np.iinfo(np.int64).max
    prefix_end = np.maximum.accumulate(np.where(empty, -1, ends))[:-1]
    suffix_start = np.minimum.accumulate(np.where(empty, big, starts)[::-1])[::-1][1:]
    ok = (prefix_end > 0) & (prefix_end <= suffix_start) & (suffix_start < big) & (prefix_end < text_len)
    k = np.arange(1, n)[ok]
    at = prefix_end[ok]
    if len(at) > 1:  # one cut per position: the last (empty-span tokens go with the chunk before)
        keep = np.append(at[1:] != at[:-1], True)
        k, at = k[keep], at[keep]
    cut_tokens = np.concatenate(([0], k, [n])).astype(np.int64)
    cut_chars = np.concatenate(([0], at, [text_len])).astype(np.int64)
    return cut_tokens, cut_chars


_LENGTHS: weakref.WeakKeyDictionary[Any, np.ndarray] = weakref.WeakKeyDictionary()


class _TiktokenFace(_Face):
    def __init__(self, enc: Any) -> None:
        self.enc = enc
        own = getattr(enc, "count", None)
        self.count = own if callable(own) else (lambda s: len(enc.encode_ordinary(s)))

    def _token_lengths(self) -> np.ndarray:
        try:
            return _LENGTHS[self.enc]
        except (KeyError, TypeError):
            pass
        lengths = np.zeros(self.enc.n_vocab, dtype=np.int64)
        for i in range(self.enc.n_vocab):
            try:
                lengths[i] = len(self.enc.decode_single_token_bytes(i))
            except KeyError:  # a hole in the ranks
                pass
        try:
            _LENGTHS[self.enc] = lengths
        except TypeError:  # not weak-referenceable: computed per call
            pass
        return lengths

    def cuts(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        enc = self.enc
        numpy_batch = getattr(enc, "encode_ordinary_batch_to_numpy", None)
        if numpy_batch is not None:
            ids = numpy_batch([text])[0]
        else:
            ids = np.asarray(enc.encode_ordinary(text), dtype=np.int64)
        token_ends = np.cumsum(self._token_lengths()[ids])
        char_starts = _utf8_positions(text)  # byte offset of every character boundary
        # The last character with that byte offset: a surrogate pair is one character to tiktoken.
        at = np.searchsorted(char_starts, token_ends, side="right") - 1
        ok = char_starts[at] == token_ends
        ok[-1:] = True  # the end of the text
        k = np.flatnonzero(ok[:-1]) + 1
        cut_tokens = np.concatenate(([0], k, [len(ids)])).astype(np.int64)
        cut_chars = np.concatenate(([0], at[k - 1], [len(text)])).astype(np.int64)
        return cut_tokens, cut_chars


def _utf8_positions(text: str) -> np.ndarray:
    """Byte offset of each character boundary (len(text) + 1 entries) in the UTF-8 that tiktoken
    encodes: a lone surrogate becomes U+FFFD (3 bytes), a surrogate pair one 4-byte character (its
    low half 0 bytes, so the boundary inside the pair is no cut)."""
    cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4").astype(np.int64)
    width = np.where(cp < 0x80, 1, np.where(cp < 0x800, 2, np.where(cp < 0x10000, 3, 4)))
    high = (cp >= 0xD800) & (cp < 0xDC00)
    low = (cp >= 0xDC00) & (cp < 0xE000)
    if high.any() or low.any():
        pair_high = high[:-1] & low[1:]
        width[:-1][pair_high] = 4
        width[1:][pair_high] = 0
    out = np.zeros(len(cp) + 1, dtype=np.int64)
    np.cumsum(width, out=out[1:])
    return out


class _TokenizersFace(_Face):
    def __init__(self, tok: Any, add_special_tokens: bool) -> None:
        self.tok = tok
        from crayon_hf.tokenizer import Tokenizer

        ref = getattr(tok, "_ref", None) if isinstance(tok, Tokenizer) else None
        if ref is not None:
            tok = ref  # a tokenizer.json that runs on tokenizers: chunked as tokenizers would
        if isinstance(tok, Tokenizer):
            self.count = lambda s: tok.count(s, add_special_tokens)
            self._offsets = lambda s: tok._encode_batch_to_numpy_with(
                [s], False, None, None, tok.encode_special_tokens).offsets
            return
        plain = tok
        if tok.truncation is not None or tok.padding is not None:
            # tokenizers has no per-call switch: a copy without truncation and padding.
            plain = type(tok).from_str(tok.to_str())
            plain.no_truncation()
            plain.no_padding()
        self.count = lambda s: len(plain.encode(s, add_special_tokens=add_special_tokens).ids)
        self._offsets = lambda s: np.asarray(plain.encode(s, add_special_tokens=False).offsets,
                                             dtype=np.int64).reshape(-1, 2)

    def cuts(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        return _cuts_from_offsets(self._offsets(text), len(text))


class _TransformersFace(_Face):
    def __init__(self, tok: Any, add_special_tokens: bool) -> None:
        self.tok = tok
        own = getattr(tok, "count", None)
        if callable(own) and hasattr(tok, "encode_batch_to_numpy"):  # a CrayonTokenizer
            self.count = lambda s: own(s, add_special_tokens)
            self._offsets = lambda s: tok.encode_batch_to_numpy([s], add_special_tokens=False).offsets
            return
        self.count = lambda s: len(tok(s, add_special_tokens=add_special_tokens, verbose=False)["input_ids"])

        def offsets(s: str) -> np.ndarray:
            out = tok(s, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
            return np.asarray(out["offset_mapping"], dtype=np.int64).reshape(-1, 2)

        self._offsets = offsets

    def cuts(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        return _cuts_from_offsets(self._offsets(text), len(text))

