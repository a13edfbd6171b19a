"""`Encoding`: a look-alike of `tokenizers.Encoding` stored as one numpy matrix.

Storage
-------
Every per-token field lives in one C-contiguous int64 matrix ``_m`` of shape ``(7, n)``::

    row 0 ids | 1 type_ids | 2 offset start | 3 offset end | 4 word (-1 = None)
    row 5 special_tokens_mask | 6 attention_mask

so truncation is one slice, concatenation (templates, merges) one ``np.concatenate`` and padding
one ``np.concatenate``; Python lists are built only when a property is read, then cached.

Invariant: a matrix is never written after it is attached to an Encoding (slices share memory
with their parent), so every "mutating" method swaps in a new matrix. That makes copies free.

Tokens are either an explicit ``list[str]`` or *derived*: ``None`` plus a shared ``id_to_token``
sequence (``vocab``), so the common case never builds token strings. Anything that would break
``tokens[i] == vocab[ids[i]]`` (a padding token that is not ``vocab[pad_id]``, a template token
spelled differently from the vocabulary) materializes the list.

Semantics follow `tokenizers` 0.23.3 (tokenizers/src/tokenizer/encoding.rs and the Python binding
bindings/python/src/encoding.rs), quirks included: `token_to_sequence(len(enc))` is 0 when the
encoding has no sequence ranges (and when ranges overlap, after `set_sequence_id` on a merged
encoding, `tokenizers` answers in hash-map order while we answer in insertion order), ranges survive left padding but not right padding, truncation drops
the ranges, and truncating to 0 moves the whole encoding (with its own overflowing) into a single
overflowing entry.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from crayon_hf._lazy_numpy import lazy_numpy

from .errors import PanicException

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

__all__ = ["Encoding", "as_dict"]

ID, TYPE, START, END, WORD, SPECIAL, ATTN = range(7)
# Keys of a lazy encoding's `_cache` besides the rows: its id list while it has never been handed
# out (`ids` gives that very list away), and its length once it has been.
_FRESH, _LENGTH = "fresh", "length"

# The slots a lazy encoding (`Encoding._lazy`) fills when one of them is first read.
_LAZY_FIELDS = frozenset(("_m", "_tokens", "_vocab", "_overflowing", "_ranges"))


def _int_list(row: np.ndarray) -> list[int]:
    """row.tolist(), through the engine's shared cache of small ints when it is available."""
    global _int_list
    try:
        from crayon_hf._native import native

        _int_list = native.int_list
    except ImportError:  # the pure-Python package (tests of this module alone)
        _int_list = np.ndarray.tolist
    return _int_list(row)
_ROWS = 7
_EMPTY_M: Any = None


def _empty() -> np.ndarray:
    """The read-only (7, 0) matrix of an empty encoding, made on first use (numpy is imported lazily)."""
    global _EMPTY_M
    if _EMPTY_M is None:
        _EMPTY_M = np.zeros((_ROWS, 0), dtype=np.int64)
        _EMPTY_M.setflags(write=False)
    return _EMPTY_M

_U32_MAX = 2**32 - 1
_USIZE_MAX = 2**64 - 1

Ranges = dict[int, tuple[int, int]]


def _usize(value: Any) -> int:
    """Argument conversion as pyo3 does it for `usize`/`u32` parameters."""
    if isinstance(value, bool) or not isinstance(value, int):
        # pyo3 accepts anything with __index__; bool is an int subclass and accepted too.
        if isinstance(value, bool):
            return int(value)
        try:
            value = value.__index__()
        except AttributeError:
            raise TypeError(f"'{type(value).__name__}' object cannot be interpreted as an integer") from None
    if value < 0:
        raise OverflowError("can't convert negative int to unsigned")
    if value > _USIZE_MAX:
        raise OverflowError("int too big to convert")
    return value


def _u32(value: Any) -> int:
    value = _usize(value)
    if value > _U32_MAX:
        raise OverflowError("out of range integral type conversion attempted")
    return value


class Encoding:
    """The output of a tokenizer, with the public surface of `tokenizers.Encoding`.

    One row per token: `ids`, `tokens`, `offsets` (character spans in the input), `type_ids`,
    `attention_mask`, `special_tokens_mask`, `word_ids`, `sequence_ids`; the tokens cut off by
    truncation are in `overflowing`. The rows are held as numpy arrays (`ids_array`, ...), and a
    list property builds its list when it is read.

    ```
    >>> enc = tok.encode("Hello world", add_special_tokens=False)
    >>> enc.ids, enc.offsets, enc.char_to_token(7)
    ([9906, 1917], [(0, 5), (5, 11)], 1)
    ```
    """

    __slots__ = ("_m", "_tokens", "_vocab", "_overflowing", "_ranges", "_cache", "_build", "_text", "__weakref__")

    _m: np.ndarray
    _tokens: list[str] | None
    _vocab: Sequence[str] | None
    _overflowing: list[Encoding]
    _ranges: Ranges
    _cache: dict[str | int, Any]  # lists built on access: row index, "tokens", "words", "offsets"

    def __init__(self) -> None:
        """An empty encoding (as ``tokenizers.Encoding()``); tokenizers return filled ones."""
        self._m = _empty()
        self._tokens = []
        self._vocab = None
        self._overflowing = []
        self._ranges = {}
        self._cache = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    def _lazy(cls, ids: list[int], build: Any, text: str) -> Encoding:
        """An encoding whose ids are known and whose other fields are built on first use.

        ``build(text)`` returns the full (eagerly built) `Encoding` of the same call; its ids must
        be `ids`. Until a field other than the ids is read, only ``_cache`` (holding the id list),
        ``_build`` and ``_text`` are set: reading an unset slot falls through to `__getattr__`,
        which builds the encoding and adopts its fields. Encodings built eagerly never reach
        `__getattr__`. One `build` serves a whole batch (`Tokenizer.encode_batch`), whose
        encodings the engine makes as this method does, without a Python frame per document
        (`HfEngine.encode_batch_id_lists`' `lazy`, which keeps to the slots and keys set here).

        `ids` must be a list no one else holds: the first read of `ids` hands that list over instead
        of copying it (tokenizers gives a new list on every read); a later read builds the encoding."""
        enc = object.__new__(cls)
        enc._cache = {_FRESH: ids}
        enc._build = build
        enc._text = text
        return enc

    def __getattr__(self, name: str) -> Any:
        # Only reached for an unset slot: a lazy encoding's fields, before they are built.
        if name in _LAZY_FIELDS:
            try:
                build = object.__getattribute__(self, "_build")
            except AttributeError:
                pass
            else:
                full = build(self._text)
                self._m = full._m
                self._tokens = full._tokens
                self._vocab = full._vocab
                self._overflowing = full._overflowing
                self._ranges = full._ranges
                del self._build, self._text
                return object.__getattribute__(self, name)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    @classmethod
    def _new(
        cls,
        m: np.ndarray,
        tokens: list[str] | None,
        vocab: Sequence[str] | None,
        overflowing: list[Encoding] | None = None,
        ranges: Ranges | None = None,
    ) -> Encoding:
        enc = object.__new__(cls)
        enc._m = m
        enc._tokens = tokens
        enc._vocab = vocab
        enc._overflowing = [] if overflowing is None else overflowing
        enc._ranges = {} if ranges is None else ranges
        enc._cache = {}
        return enc

    @classmethod
    def from_arrays(
        cls,
        ids: Any,
        offsets: Any,
        words: Any = None,
        special_mask: Any = None,
        id_to_token: Sequence[str] | None = None,
        type_id: int = 0,
        tokens: list[str] | None = None,
    ) -> Encoding:
        """The model's output for one sequence, before post-processing (what `tokenizers` calls
        the encoding of a single sequence).

        ids: (n,) ints; offsets: (n, 2) char offsets into the original string; words: (n,) word
        index per token, -1 for None (None: all None); special_mask: (n,) or None for zeros --
        note `tokenizers` leaves it all 0 here even for added/special tokens found in the text,
        so pass None to match it; id_to_token: shared list of token strings indexed by id (tokens
        are then derived lazily); tokens: explicit token strings instead (overrides id_to_token);
        type_id: 0 for the first sequence, 1 for the pair (as `tokenizers` encodes them).
        """
        ids_a = np.asarray(ids)
        n = ids_a.shape[0]
        m = _fresh_matrix(n, type_id)
        m[ID] = ids_a
        if n:
            m[START : END + 1] = np.asarray(offsets).T
        if words is None:
            m[WORD] = -1
        elif isinstance(words, list) and None in words:
            m[WORD] = [-1 if w is None else w for w in words]
        else:
            m[WORD] = words
        if special_mask is not None:
            m[SPECIAL] = special_mask
        m.setflags(write=False)
        if tokens is not None:
            if len(tokens) != n:
                raise ValueError(f"got {len(tokens)} tokens for {n} ids")
            return cls._new(m, list(tokens), None)
        if id_to_token is None:
            raise ValueError("from_arrays needs either id_to_token or tokens")
        return cls._new(m, None, id_to_token)

    @classmethod
    def _from_native_batch(cls, results: Sequence[Any], vocab: Sequence[str], type_id: int = 0) -> list[Encoding]:
        """`from_arrays` for every ``(ids, offsets, words, [(index, token)])`` of
        `HfEngine.encode_batch`, built as views into one matrix (a few numpy calls for the whole
        batch instead of several per document). A view keeps the batch's matrix alive."""
        if not results:
            return []
        bounds = [0]
        for r in results:
            bounds.append(bounds[-1] + r[0].shape[0])
        m = np.empty((_ROWS, bounds[-1]), dtype=np.int64)
        # Straight into the rows (no intermediate arrays: a batch is memory-bound).
        np.concatenate([r[0] for r in results], out=m[ID])
        m[TYPE] = type_id
        if bounds[-1]:
            np.concatenate([r[1].reshape(-1, 2) for r in results], out=m[START : END + 1].T)
        np.concatenate([r[2] for r in results], out=m[WORD])
        m[SPECIAL] = 0
        m[ATTN] = 1
        m.setflags(write=False)
        out = []
        new = cls._new
        for r, a, b in zip(results, bounds, bounds[1:]):
            texts = r[3]
            if texts:
                ids = r[0].tolist()
                lookup = getattr(vocab, "lookup", None)
                tokens = lookup(ids) if lookup is not None else [vocab[i] for i in ids]
                for i, t in texts:
                    tokens[i] = t
                out.append(new(m[:, a:b], tokens, None))
            else:
                out.append(new(m[:, a:b], None, vocab))
        return out

    @classmethod
    def from_matrix(
        cls,
        m: np.ndarray,
        id_to_token: Sequence[str] | None = None,
        tokens: list[str] | None = None,
    ) -> Encoding:
        """Adopt a (7, n) int64 matrix laid out as described in the module docstring (the engine
        can fill one directly). The matrix is marked read-only and must not be written afterwards."""
        if m.dtype != np.int64 or m.ndim != 2 or m.shape[0] != _ROWS or not m.flags.c_contiguous:
            m = np.ascontiguousarray(m, dtype=np.int64).reshape(_ROWS, -1)
        m.setflags(write=False)
        if tokens is None and id_to_token is None:
            raise ValueError("from_matrix needs either id_to_token or tokens")
        return cls._new(m, None if tokens is None else list(tokens), None if tokens is not None else id_to_token)

    @classmethod
    def from_tokenizers(cls, enc: Any) -> Encoding:
        """Copy a `tokenizers.Encoding` (used by tests and by the fallback path). Sequence ranges
        are recovered from `sequence_ids` (exact for every encoding `tokenizers` produces)."""
        n = len(enc.ids)
        m = np.empty((_ROWS, n), dtype=np.int64)
        m[ID] = enc.ids
        m[TYPE] = enc.type_ids
        if n:
            m[START:END + 1] = np.asarray(enc.offsets, dtype=np.int64).T
        m[WORD] = [-1 if w is None else w for w in enc.word_ids]
        m[SPECIAL] = enc.special_tokens_mask
        m[ATTN] = enc.attention_mask
        m.setflags(write=False)
        ranges: Ranges = {}
        seq = enc.sequence_ids
        if enc.n_sequences > 1 or None in seq:
            for i, s in enumerate(seq):
                if s is not None:
                    a, _ = ranges.get(s, (i, i))
                    ranges[s] = (a, i + 1)
        return cls._new(m, list(enc.tokens), None, [cls.from_tokenizers(o) for o in enc.overflowing], ranges)

    def _clone(self) -> Encoding:
        """A deep copy (matrices are immutable, so sharing them is a copy)."""
        return Encoding._new(
            self._m, self._tokens, self._vocab, [o._clone() for o in self._overflowing], dict(self._ranges)
        )

    def _set_m(self, m: np.ndarray) -> None:
        self._m = m
        self._cache = {}

    # ------------------------------------------------------------------ dunder

    def __len__(self) -> int:
        cache = self._cache
        ids = cache.get(ID)  # when cached, the ids row as a list
        if ids is None:
            ids = cache.get(_FRESH)  # a lazy encoding's, before the ids are read
        if ids is not None:
            return len(ids)
        n = cache.get(_LENGTH)  # a lazy encoding whose list was handed over
        return n if n is not None else self._m.shape[1]

    def __repr__(self) -> str:
        return (
            f"Encoding(num_tokens={self._m.shape[1]}, attributes=[ids, type_ids, tokens, offsets, "
            "attention_mask, special_tokens_mask, overflowing])"
        )

    def __getstate__(self) -> dict[str, Any]:
        # Never pickle the shared vocabulary: tokens are materialized instead.
        return {
            "m": np.array(self._m),
            "tokens": self._token_list(),
            "overflowing": [o.__getstate__() for o in self._overflowing],
            "ranges": dict(self._ranges),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        m = state["m"]
        m.setflags(write=False)
        self._m = m
        self._tokens = state["tokens"]
        self._vocab = None
        self._overflowing = []
        for o in state["overflowing"]:
            child = object.__new__(Encoding)
            child.__setstate__(o)
            self._overflowing.append(child)
        self._ranges = dict(state["ranges"])
        self._cache = {}

    def __copy__(self) -> Encoding:
        return self._clone()

    def __deepcopy__(self, memo: dict[int, Any]) -> Encoding:
        return self._clone()

    # ------------------------------------------------------------------ lists, cached

    def _row_list(self, row: int) -> list[int]:
        cached = self._cache.get(row)  # rows are cached under their int index
        if cached is None:
            cached = self._cache[row] = _int_list(self._m[row])
        return cached

    def _token_list(self) -> list[str]:
        if self._tokens is not None:
            return self._tokens
        cached = self._cache.get("tokens")
        if cached is None:
            vocab = self._vocab
            assert vocab is not None
            ids = self._row_list(ID)
            # A vocabulary that can look many ids up at once (the tokenizers face's) does so.
            lookup = getattr(vocab, "lookup", None)
            cached = self._cache["tokens"] = lookup(ids) if lookup is not None else list(map(vocab.__getitem__, ids))
        return cached

    def _word_list(self) -> list[int | None]:
        cached = self._cache.get("words")
        if cached is None:
            w = self._m[WORD]
            cached = w.tolist()
            for i in np.flatnonzero(w < 0).tolist():
                cached[i] = None
            self._cache["words"] = cached
        return cached

    def _offset_list(self) -> list[tuple[int, int]]:
        cached = self._cache.get("offsets")
        if cached is None:
            cached = self._cache["offsets"] = list(zip(self._row_list(START), self._row_list(END)))
        return cached

    # ------------------------------------------------------------------ properties

    @property
    def ids(self) -> list[int]:
        """The token ids."""
        cache = self._cache
        ids = cache.pop(_FRESH, None)  # the engine's own list, never seen outside (see _lazy)
        if ids is not None:
            cache[_LENGTH] = len(ids)
            return ids
        return list(self._row_list(ID))

    @property
    def type_ids(self) -> list[int]:
        """The type id of each token: 0 for the first sequence, 1 for the pair (as the post-processor
        sets them)."""
        return list(self._row_list(TYPE))

    @property
    def tokens(self) -> list[str]:
        """The token strings, as the vocabulary spells them."""
        return list(self._token_list())

    @property
    def offsets(self) -> list[tuple[int, int]]:
        """Each token's ``(start, end)`` character span in its input sequence; (0, 0) for special
        tokens the post-processor added."""
        return list(self._offset_list())

    @property
    def attention_mask(self) -> list[int]:
        """1 for each token, 0 for padding."""
        return list(self._row_list(ATTN))

    @property
    def special_tokens_mask(self) -> list[int]:
        """1 for special tokens added by the post-processor (and padding), 0 for the others."""
        return list(self._row_list(SPECIAL))

    @property
    def word_ids(self) -> list[int | None]:
        """The index of the pre-tokenized word each token comes from (None for added special tokens)."""
        return list(self._word_list())

    @property
    def words(self) -> list[int | None]:
        """Deprecated alias of `word_ids` (warns, as `tokenizers` does)."""
        warnings.warn(
            "Deprecated in 0.9.4: Encoding.words is deprecated, please use Encoding.word_ids instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.word_ids

    @property
    def sequence_ids(self) -> list[int | None]:
        """Which input sequence each token belongs to: 0 or 1 for a pair, None for special tokens
        the post-processor added."""
        n = len(self)
        if not self._ranges:
            return [0] * n
        out: list[int | None] = [None] * n
        for seq_id in range(self.n_sequences):
            start, stop = self._ranges.get(seq_id, (0, n))
            out[start:stop] = [seq_id] * (stop - start)
        return out

    @property
    def overflowing(self) -> list[Encoding]:
        """The windows truncation cut off, as encodings of their own (copies)."""
        return [o._clone() for o in self._overflowing]

    @property
    def n_sequences(self) -> int:
        """The number of input sequences: 1, or 2 for a pair."""
        return len(self._ranges) or 1

    # numpy views for fast consumers (read-only).
    @property
    def ids_array(self) -> np.ndarray:
        """`ids` as a read-only int64 numpy view (no list built)."""
        return self._m[ID]

    @property
    def attention_mask_array(self) -> np.ndarray:
        """`attention_mask` as a read-only int64 numpy view."""
        return self._m[ATTN]

    @property
    def type_ids_array(self) -> np.ndarray:
        """`type_ids` as a read-only int64 numpy view."""
        return self._m[TYPE]

    @property
    def special_tokens_mask_array(self) -> np.ndarray:
        """`special_tokens_mask` as a read-only int64 numpy view."""
        return self._m[SPECIAL]

    @property
    def offsets_array(self) -> np.ndarray:
        """`offsets` as a read-only int64 numpy view of shape ``(n_tokens, 2)``."""
        return self._m[START : END + 1].T

    # ------------------------------------------------------------------ sequences

    def set_sequence_id(self, sequence_id: int) -> None:
        """Marks every token as belonging to sequence `sequence_id`."""
        self._ranges[_usize(sequence_id)] = (0, len(self))

    def _sequence_range(self, sequence_id: int) -> tuple[int, int]:
        return self._ranges.get(sequence_id, (0, len(self)))

    def token_to_sequence(self, token_index: int) -> int | None:
        """The sequence (0 or 1) that the token at `token_index` belongs to, or None."""
        token = _usize(token_index)
        if token > len(self):
            return None
        if not self._ranges:
            return 0
        for seq_id, (start, stop) in self._ranges.items():
            if start <= token < stop:
                return seq_id
        return None

    def token_to_chars(self, token_index: int) -> tuple[int, int] | None:
        """The ``(start, end)`` character span of the token at `token_index` in its sequence, or
        None when there is no such token."""
        token = _usize(token_index)
        if self.token_to_sequence(token) is None or token >= len(self):
            return None
        return int(self._m[START, token]), int(self._m[END, token])

    def token_to_word(self, token_index: int) -> int | None:
        """The word the token at `token_index` comes from, or None (special tokens, padding)."""
        token = _usize(token_index)
        if self.token_to_sequence(token) is None or token >= len(self):
            return None
        w = int(self._m[WORD, token])
        return None if w < 0 else w

    def word_to_tokens(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        """The ``(first, last + 1)`` token indices of word `word_index` in sequence
        `sequence_index`, or None when the word has no token."""
        word = _u32(word_index)
        start, stop = self._sequence_range(_usize(sequence_index))
        if start > stop or stop > len(self):
            return None
        w = self._m[WORD, start:stop]
        # tokenizers walks while `word_id <= Some(word)` (None sorts first) and keeps the equal ones.
        beyond = np.flatnonzero(w > word)
        if beyond.size:
            w = w[: beyond[0]]
        hit = np.flatnonzero(w == word)
        if hit.size == 0:
            return None
        return start + int(hit[0]), start + int(hit[-1]) + 1

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        """The ``(start, end)`` character span of word `word_index` in sequence `sequence_index`,
        or None."""
        span = self.word_to_tokens(word_index, sequence_index)
        if span is None or span[1] == 0:
            return None
        return int(self._m[START, span[0]]), int(self._m[END, span[1] - 1])

    def char_to_token(self, char_pos: int, sequence_index: int = 0) -> int | None:
        """The index of the token covering character `char_pos` of sequence `sequence_index`, or
        None when no token covers it."""
        pos = _usize(char_pos)
        start, stop = self._sequence_range(_usize(sequence_index))
        if start > stop or stop > len(self):
            return None
        m = self._m
        hit = np.flatnonzero((m[START, start:stop] <= pos) & (pos < m[END, start:stop]))
        if hit.size == 0:
            return None
        return start + int(hit[0])

    def char_to_word(self, char_pos: int, sequence_index: int = 0) -> int | None:
        """The word covering character `char_pos` of sequence `sequence_index`, or None."""
        token = self.char_to_token(char_pos, sequence_index)
        if token is None:
            return None
        return self.token_to_word(token)

    # ------------------------------------------------------------------ truncation

    def _slice(self, start: int, stop: int) -> Encoding:
        tokens = self._tokens[start:stop] if self._tokens is not None else None
        return Encoding._new(self._m[:, start:stop], tokens, self._vocab)

    def truncate(self, max_length: int, stride: int = 0, direction: str = "right") -> None:
        """Truncates in place to `max_length` tokens, from the `direction` side ("right" or
        "left"); the rest becomes `overflowing` windows overlapping by `stride` tokens."""
        if direction not in ("left", "right"):
            raise ValueError(f"Invalid truncation direction value : {direction}")
        self._truncate(_usize(max_length), _usize(stride), direction)

    def _truncate(self, max_len: int, stride: int, direction: str) -> None:
        n = len(self)
        if max_len >= n:
            return
        if max_len == 0:
            old = Encoding._new(self._m, self._tokens, self._vocab, self._overflowing, self._ranges)
            self._set_m(_empty())
            self._tokens, self._vocab, self._ranges = [], None, {}
            self._overflowing = [old]
            return
        if stride >= max_len:
            raise PanicException(
                f"`stride` must be strictly less than `max_len={max_len}` (note that `max_len` may be shorter "
                "than the max length of the original model, as it subtracts the number of special characters"
            )
        step = max_len - stride
        parts: list[tuple[int, int]] = []
        if direction == "right":
            for start in range(0, n, step):
                stop = min(start + max_len, n)
                parts.append((start, stop))
                if stop == n:
                    break
        else:
            for last in range(n - 1, -1, -step):
                stop = last + 1
                start = max(stop - max_len, 0)
                parts.append((start, stop))
                if start == 0:
                    break
        first = parts[0]
        self._overflowing = [self._slice(a, b) for a, b in parts[1:]]
        self._ranges = {}
        head = self._slice(*first)
        self._tokens, self._vocab = head._tokens, head._vocab
        self._set_m(head._m)

    # ------------------------------------------------------------------ padding

    def pad(self, length: int, **kwargs: Any) -> None:
        """Pads in place (overflowing windows too) to `length` tokens. Keyword arguments, as in
        `tokenizers`: ``direction`` ("right" or "left"), ``pad_id`` (0), ``pad_type_id`` (0),
        ``pad_token`` ("[PAD]")."""
        direction, pad_id, pad_type_id, pad_token = "right", 0, 0, "[PAD]"
        for key, value in kwargs.items():
            if key == "direction":
                if not isinstance(value, str):
                    raise TypeError(f"'{type(value).__name__}' object cannot be converted to 'PyString'")
                if value not in ("left", "right"):
                    raise ValueError(f"Unknown `direction`: `{value}`. Use one of `left` or `right`")
                direction = value
            elif key == "pad_id":
                pad_id = _u32(value)
            elif key == "pad_type_id":
                pad_type_id = _u32(value)
            elif key == "pad_token":
                if not isinstance(value, str):
                    raise TypeError(f"'{type(value).__name__}' object cannot be converted to 'PyString'")
                pad_token = value
            else:
                print(f"Ignored unknown kwarg option {key}")
        self._pad(_usize(length), pad_id, pad_type_id, pad_token, direction == "left")

    def _pad(self, target: int, pad_id: int, pad_type_id: int, pad_token: str, left: bool) -> None:
        for o in self._overflowing:
            o._pad(target, pad_id, pad_type_id, pad_token, left)
        n = len(self)
        if n >= target:
            return
        k = target - n
        block = _pad_block(k, pad_id, pad_type_id)
        m = np.concatenate((block, self._m) if left else (self._m, block), axis=1)
        m.setflags(write=False)
        # Tokens stay derived when the pad token is the vocabulary's spelling of pad_id.
        vocab = self._vocab
        if self._tokens is None and vocab is not None and _vocab_spells(vocab, pad_id, pad_token):
            tokens = None
        else:
            base = self._token_list()
            tokens = [pad_token] * k + base if left else base + [pad_token] * k
            vocab = None
        if left and self._ranges:
            self._ranges = {s: (a + k, b + k) for s, (a, b) in self._ranges.items()}
        self._tokens, self._vocab = tokens, vocab
        self._set_m(m)

    # ------------------------------------------------------------------ merge

    @staticmethod
    def merge(encodings: Iterable[Encoding], growing_offsets: bool = True) -> Encoding:
        """Concatenates encodings into a new one (overflowing windows combined as `tokenizers`
        does); with `growing_offsets`, each one's offsets continue after the previous one's end."""
        return _merge(list(encodings), growing_offsets)

    def _merge_with(self, pair: Encoding, growing_offsets: bool) -> None:
        """`Encoding::merge_with`: concatenate, combining overflowings pairwise."""
        overflowings: list[Encoding] = []
        for self_o in self._overflowing:
            combined = self_o._clone()
            combined._merge_with(pair._clone(), growing_offsets)
            overflowings.append(combined)
            for other_o in pair._overflowing:
                combined = self_o._clone()
                combined._merge_with(other_o._clone(), growing_offsets)
                overflowings.append(combined)
        for other_o in pair._overflowing:
            combined = self._clone()
            combined._merge_with(other_o._clone(), growing_offsets)
            overflowings.append(combined)
        merged = _concat([self, pair], growing_offsets)
        self._tokens, self._vocab, self._ranges = merged._tokens, merged._vocab, merged._ranges
        self._overflowing = overflowings
        self._set_m(merged._m)

    # ------------------------------------------------------------------ helpers for tests

    def to_dict(self) -> dict[str, Any]:
        """Every observable field, overflowing included (for tests and debugging)."""
        return as_dict(self)


_BASES: dict[int, np.ndarray] = {}


def _fresh_matrix(n: int, type_id: int) -> np.ndarray:
    """A new writable (7, n) matrix with TYPE = type_id, SPECIAL = 0, ATTN = 1 (other rows
    arbitrary): one copy of a cached template instead of three row fills."""
    if n > 65536:  # not worth keeping a template that large
        m = np.zeros((_ROWS, n), dtype=np.int64)
        m[TYPE] = type_id
        m[ATTN] = 1
        return m
    base = _BASES.get(type_id)
    if base is None or base.shape[1] < n:
        if len(_BASES) >= 16:
            _BASES.clear()
        base = np.zeros((_ROWS, min(65536, max(n, 4096, 0 if base is None else 2 * base.shape[1]))), dtype=np.int64)
        base[TYPE] = type_id
        base[ATTN] = 1
        base.setflags(write=False)
        _BASES[type_id] = base
    return base[:, :n].copy()


def _vocab_spells(vocab: Sequence[str], token_id: int, token: str) -> bool:
    try:
        return 0 <= token_id < len(vocab) and vocab[token_id] == token
    except (IndexError, TypeError):
        return False


_PAD_CACHE: dict[tuple[int, int, int], np.ndarray] = {}


def _pad_block(k: int, pad_id: int, pad_type_id: int) -> np.ndarray:
    key = (k, pad_id, pad_type_id)
    block = _PAD_CACHE.get(key)
    if block is None:
        block = np.zeros((_ROWS, k), dtype=np.int64)
        block[ID] = pad_id
        block[TYPE] = pad_type_id
        block[WORD] = -1
        block[SPECIAL] = 1
        block.setflags(write=False)
        if len(_PAD_CACHE) < 256:
            _PAD_CACHE[key] = block
    return block


def _concat(parts: list[Encoding], growing_offsets: bool) -> Encoding:
    """Concatenate encodings ignoring their overflowings (one numpy call)."""
    parts = [p for p in parts if len(p) or p._ranges] or parts[:1]
    if not parts:
        return Encoding()
    if growing_offsets:
        mats = []
        shift = 0
        for p in parts:
            if shift and len(p):
                m = p._m.copy()
                m[START] += shift
                m[END] += shift
                mats.append(m)
                shift = int(m[END, -1])
            else:
                mats.append(p._m)
                if len(p):
                    shift = int(p._m[END, -1])
    else:
        mats = [p._m for p in parts]
    m = mats[0] if len(mats) == 1 else np.concatenate(mats, axis=1)
    m.setflags(write=False)
    ranges: Ranges = {}
    pos = 0
    vocab: Sequence[str] | None = None
    derived = True
    for p in parts:
        for seq_id, (a, b) in p._ranges.items():
            ranges[seq_id] = (a + pos, b + pos)
        pos += len(p)
        if len(p):
            if p._tokens is not None or (vocab is not None and p._vocab is not vocab):
                derived = False
            elif vocab is None:
                vocab = p._vocab
    if derived and vocab is not None:
        return Encoding._new(m, None, vocab, None, ranges)
    tokens: list[str] = []
    for p in parts:
        tokens.extend(p._token_list())
    return Encoding._new(m, tokens, None, None, ranges)


def _merge(encodings: list[Encoding], growing_offsets: bool) -> Encoding:
    """`Encoding::merge`: fold `merge_with` from an empty encoding. Without overflowings this is
    a single concatenation; with them, the pairwise combination of `merge_with` is reproduced."""
    if not any(e._overflowing for e in encodings):
        return _concat(encodings, growing_offsets) if encodings else Encoding()
    acc = Encoding()
    for e in encodings:
        acc._merge_with(e, growing_offsets)
    return acc


def as_dict(enc: Any) -> dict[str, Any]:
    """Every observable field of an encoding (ours or `tokenizers`'), overflowing recursively."""
    return {
        "ids": enc.ids,
        "type_ids": enc.type_ids,
        "tokens": enc.tokens,
        "offsets": [tuple(o) for o in enc.offsets],
        "attention_mask": enc.attention_mask,
        "special_tokens_mask": enc.special_tokens_mask,
        "word_ids": enc.word_ids,
        "sequence_ids": enc.sequence_ids,
        "n_sequences": enc.n_sequences,
        "len": len(enc),
        "overflowing": [as_dict(o) for o in enc.overflowing],
    }
