"""Post-processors, built from the ``post_processor`` object of a tokenizer.json.

Each processor maps the list of encodings (one per input sequence) to a new list, exactly like
``PostProcessor::process_encodings`` in `tokenizers` (tokenizers/src/processors/*.rs); the list
is merged into one `Encoding` afterwards by `PostProcessor.process`. Keeping the list semantics
matters for ``Sequence``: after ``TemplateProcessing`` the list holds one encoding per template
piece, and a following processor sees those pieces.

Supported types: ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence.
Anything else raises `UnsupportedComponent` naming its JSON path.
"""

from __future__ import annotations

from collections.abc import Sequence as SequenceABC
from typing import TYPE_CHECKING, Any

from crayon_hf._lazy_numpy import lazy_numpy

from .encoding import ATTN, END, ID, SPECIAL, START, TYPE, WORD, Encoding, _merge
from .errors import UnsupportedComponent, build_sequence

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

__all__ = [
    "PostProcessor",
    "ByteLevelProcessor",
    "TemplateProcessing",
    "RobertaProcessing",
    "BertProcessing",
    "SequenceProcessor",
    "build_post_processor",
    "trim_offsets",
]

# Rust's `char::is_whitespace` (Unicode White_Space), plus 'Ġ', the byte-level spelling of ' '.
_RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)

_TRIM_CHARS = _RUST_WHITESPACE + "\u0120"


def _with_type_ids(enc: Encoding, type_id: int) -> None:
    """`set_type_ids(vec![type_id; len])` on the encoding itself (not its overflowings)."""
    m = enc._m
    if m.shape[1] and not (m[TYPE] == type_id).all():
        m = m.copy()
        m[TYPE] = type_id
        m.setflags(write=False)
        enc._set_m(m)


class Layout:
    """What `PostProcessor.process` does to fresh sequences, as data, for the fast path of
    `post_process` (crayon_hf/_hf/postprocess.py). Valid only for inputs without overflowing
    and without sequence ranges -- every raw encoding when nothing gets truncated.

    pieces: the output in order; ``(i, type_id)`` is sequence i with its type ids set to
        type_id (None: kept as given), a `_SpecialPiece` is a block of added tokens.
    trim: None, or ``add_prefix_space`` when ByteLevel offset trimming runs over each sequence
        before the layout (at most one trimming step: trimming twice is not idempotent).
    masks: sequence tokens get special mask 0 and attention 1 (Bert/Roberta wrapping).
    ranged: each sequence piece sets its sequence range (in piece order; a later piece of the
        same sequence overwrites, as `_concat` does).

    The general path (process + `_merge`) is the oracle; tests/test_hf_postprocess.py compares
    them on every processor variant."""

    __slots__ = ("pieces", "trim", "masks", "ranged")

    def __init__(self, pieces: tuple[Any, ...], trim: bool | None = None, masks: bool = False, ranged: bool = True) -> None:
        self.pieces = pieces
        self.trim = trim
        self.masks = masks
        self.ranged = ranged


def _plain_layout(is_pair: bool, trim: bool | None = None) -> Layout:
    """`process` alone: sequence i gets type i and range i."""
    return Layout(((0, 0), (1, 1)) if is_pair else ((0, 0),), trim)


class PostProcessor:
    """Interface: `added_tokens(is_pair)` and `process_encodings(list, add_special_tokens)`;
    `_layout` optionally describes the result for fresh sequences (see `Layout`)."""

    def added_tokens(self, is_pair: bool) -> int:
        raise NotImplementedError

    def _layout(self, is_pair: bool, add_special_tokens: bool) -> Layout | None:
        return None

    def layout(self, is_pair: bool, add_special_tokens: bool) -> Layout | None:
        """`_layout`, compiled once per (is_pair, add_special_tokens)."""
        cache = self.__dict__.get("_layouts")
        if cache is None:
            cache = self.__dict__["_layouts"] = {}
        key = (is_pair, add_special_tokens) if type(add_special_tokens) is bool else (bool(is_pair), bool(add_special_tokens))
        try:
            return cache[key]
        except KeyError:
            layout = cache[key] = self._layout(bool(is_pair), bool(add_special_tokens))
            return layout

    def process_encodings(self, encodings: list[Encoding], add_special_tokens: bool) -> list[Encoding]:
        raise NotImplementedError

    def process(
        self, encoding: Encoding, pair_encoding: Encoding | None = None, add_special_tokens: bool = True
    ) -> Encoding:
        """`PostProcessor::process`: tag sequences and type ids, process, merge. Mutates its inputs
        (like the Rust version, which consumes them); `post_process` hands it private copies."""
        encodings = [encoding] if pair_encoding is None else [encoding, pair_encoding]
        for i, enc in enumerate(encodings):
            enc.set_sequence_id(i)
            for o in enc._overflowing:
                o.set_sequence_id(i)
            _with_type_ids(enc, i)
        return _merge(self.process_encodings(encodings, add_special_tokens), False)


# ---------------------------------------------------------------------------- ByteLevel


_TRIM_TABLES: dict[int, tuple[SequenceABC[str], np.ndarray, np.ndarray]] = {}


def _space_counts(tokens: SequenceABC[str]) -> tuple[np.ndarray, np.ndarray]:
    lead = np.fromiter((len(t) - len(t.lstrip(_TRIM_CHARS)) for t in tokens), dtype=np.int64, count=len(tokens))
    trail = np.fromiter((len(t) - len(t.rstrip(_TRIM_CHARS)) for t in tokens), dtype=np.int64, count=len(tokens))
    return lead, trail


def _vocab_space_counts(vocab: SequenceABC[str]) -> tuple[np.ndarray, np.ndarray]:
    """Leading/trailing whitespace counts for a whole vocabulary, computed once per vocabulary."""
    entry = _TRIM_TABLES.get(id(vocab))
    if entry is None or entry[0] is not vocab:
        if len(_TRIM_TABLES) >= 8:
            _TRIM_TABLES.clear()
        lead, trail = _space_counts([t if isinstance(t, str) else "" for t in vocab])
        entry = _TRIM_TABLES[id(vocab)] = (vocab, lead, trail)
    return entry[1], entry[2]


def trimmed_matrix(
    m: np.ndarray,
    tokens: SequenceABC[str] | None,
    vocab: SequenceABC[str] | None,
    add_prefix_space: bool,
    firsts: np.ndarray | None = None,
) -> np.ndarray:
    """`byte_level::process_offsets` on a (7, n) matrix: drop leading/trailing whitespace of
    each token from its offsets, counting the token's *characters* (so 'Ġ' counts one, whatever
    the offsets unit). A first token (index 0, or offset start 0) keeps exactly one leading
    space when `add_prefix_space`, since that space was added by the pre-tokenizer.

    Returns `m` itself when nothing changes, else a new read-only matrix. Tokens are `tokens`,
    or `vocab[id]` when tokens is None. `firsts`: column indices that start an encoding (several
    encodings concatenated, trimmed in one go); None means just column 0."""
    n = m.shape[1]
    if n == 0:
        return m
    if tokens is None and vocab is not None:
        lead_t, trail_t = _vocab_space_counts(vocab)
        ids = m[ID]
        lead, trail = lead_t[ids], trail_t[ids]
    else:
        lead, trail = _space_counts(tokens if tokens is not None else [])
    if not (lead.any() or trail.any()):
        return m
    start, end = m[START], m[END]
    if add_prefix_space:
        first = start == 0
        if firsts is None:
            first[0] = True
        else:
            first[firsts] = True
        lead = np.where(first & (lead == 1), 0, lead)
    new_start = np.where(lead > 0, np.minimum(start + lead, end), start)
    new_end = np.where((trail > 0) & (end >= trail), np.maximum(end - trail, new_start), end)
    out = m.copy()
    out[START] = new_start
    out[END] = new_end
    out.setflags(write=False)
    return out


def trim_offsets(enc: Encoding, add_prefix_space: bool) -> None:
    """`byte_level::process_offsets` on an encoding, in place (see `trimmed_matrix`)."""
    m = trimmed_matrix(enc._m, enc._tokens, enc._vocab, add_prefix_space)
    if m is not enc._m:
        enc._set_m(m)


def _trim_all(encodings: list[Encoding], add_prefix_space: bool) -> None:
    """trim_offsets on each encoding and its overflowing parts."""
    for enc in encodings:
        trim_offsets(enc, add_prefix_space)
        for o in enc._overflowing:
            trim_offsets(o, add_prefix_space)


class ByteLevelProcessor(PostProcessor):
    """As a post-processor, ByteLevel only trims offsets (when `trim_offsets`)."""

    def __init__(self, add_prefix_space: bool = True, trim_offsets: bool = True, use_regex: bool = True) -> None:
        self.add_prefix_space = add_prefix_space
        self.trim_offsets = trim_offsets
        self.use_regex = use_regex

    def added_tokens(self, is_pair: bool) -> int:
        return 0

    def process_encodings(self, encodings: list[Encoding], add_special_tokens: bool) -> list[Encoding]:
        if self.trim_offsets:
            _trim_all(encodings, self.add_prefix_space)
        for i, enc in enumerate(encodings):
            enc.set_sequence_id(i)
        return encodings

    def _layout(self, is_pair: bool, add_special_tokens: bool) -> Layout | None:
        return _plain_layout(is_pair, self.add_prefix_space if self.trim_offsets else None)


# ---------------------------------------------------------------------------- Template


def _special_block(ids: SequenceABC[int], type_id: int) -> np.ndarray:
    k = len(ids)
    m = np.zeros((7, k), dtype=np.int64)
    m[ID] = ids
    m[TYPE] = type_id
    m[WORD] = -1
    m[SPECIAL] = 1
    m[ATTN] = 1
    m.setflags(write=False)
    return m


class _SpecialPiece:
    __slots__ = ("ids", "tokens", "type_id", "_block", "_spelled")

    def __init__(self, ids: list[int], tokens: list[str], type_id: int) -> None:
        self.ids = ids
        self.tokens = tokens
        self.type_id = type_id
        self._block: np.ndarray | None = None
        self._spelled: dict[int, tuple[Any, bool]] = {}

    @property
    def block(self) -> np.ndarray:
        """The piece as a (7, k) matrix; made on first use, so ids-only encodes need no numpy."""
        if self._block is None:
            self._block = _special_block(self.ids, self.type_id)
        return self._block

    def spelled_by(self, vocab: SequenceABC[str]) -> bool:
        """Whether `vocab[id]` gives this piece's tokens (cached per vocabulary object)."""
        hit = self._spelled.get(id(vocab))
        if hit is None or hit[0] is not vocab:
            ok = all(0 <= i < len(vocab) and vocab[i] == t for i, t in zip(self.ids, self.tokens))
            hit = self._spelled[id(vocab)] = (vocab, ok)
        return hit[1]

    def encoding(self, vocab: SequenceABC[str] | None) -> Encoding:
        """A fresh encoding for this piece; tokens derived from `vocab` when it spells them alike."""
        if vocab is not None and self.spelled_by(vocab):
            return Encoding._new(self.block, None, vocab)
        return Encoding._new(self.block, list(self.tokens), None)


def _parse_piece(p: Any, path: str) -> tuple[str, Any, int]:
    """A template piece: ("seq", 0|1, type_id) or ("special", name, type_id)."""
    if isinstance(p, dict) and len(p) == 1:
        ((kind, body),) = p.items()
        if kind == "Sequence" and isinstance(body, dict) and body.get("id") in ("A", "B"):
            return ("seq", 0 if body["id"] == "A" else 1, int(body.get("type_id", 0)))
        if kind == "SpecialToken" and isinstance(body, dict) and isinstance(body.get("id"), str):
            return ("special", body["id"], int(body.get("type_id", 0)))
    if isinstance(p, str):  # the builder's string form, "$A:1" / "[CLS]:0"
        parts = p.split(":")
        if len(parts) in (1, 2):
            type_id = int(parts[1]) if len(parts) == 2 else 0
            name = parts[0]
            if name.startswith("$"):
                rest = name[1:]
                if rest in ("", "A", "a"):
                    return ("seq", 0, type_id)
                if rest in ("B", "b"):
                    return ("seq", 1, type_id)
                if rest.isdigit():
                    return ("seq", 0, int(rest))
            else:
                return ("special", name, type_id)
    raise UnsupportedComponent(path, "TemplateProcessing", f"a template piece of unknown form ({p!r})")


class TemplateProcessing(PostProcessor):
    """`TemplateProcessing`: lay out sequences and special tokens following a template."""

    def __init__(self, single: list[Any], pair: list[Any], special_tokens: dict[str, Any], path: str = "post_processor") -> None:
        self.special_tokens: dict[str, tuple[list[int], list[str]]] = {}
        for name, spec in (special_tokens or {}).items():
            if isinstance(spec, dict):
                ids, tokens = list(spec.get("ids", [])), list(spec.get("tokens", []))
            else:  # (token, id) pair
                tokens, ids = [spec[0]], [spec[1]]
            if len(ids) != len(tokens):
                raise UnsupportedComponent(f"{path}.special_tokens", "TemplateProcessing", "given ids and tokens of different lengths")
            self.special_tokens[name] = ([int(i) for i in ids], [str(t) for t in tokens])
        self.single = [_parse_piece(p, f"{path}.single[{i}]") for i, p in enumerate(single)]
        self.pair = [_parse_piece(p, f"{path}.pair[{i}]") for i, p in enumerate(pair)]
        for label, template in (("single", self.single), ("pair", self.pair)):
            for kind, ident, _ in template:
                if kind == "special" and ident not in self.special_tokens:
                    # tokenizers loads this and panics at encode time; let it.
                    raise UnsupportedComponent(f"{path}.{label}", "TemplateProcessing", f"missing special token {ident!r}")
        if any(kind == "seq" and ident == 1 for kind, ident, _ in self.single):
            raise UnsupportedComponent(f"{path}.single", "TemplateProcessing", "a single template using $B")
        self._compiled = {
            False: [self._compile(p) for p in self.single],
            True: [self._compile(p) for p in self.pair],
        }
        self._added = {False: self._count(self.single), True: self._count(self.pair)}

    def _compile(self, piece: tuple[str, Any, int]) -> tuple[int, int] | _SpecialPiece:
        kind, ident, type_id = piece
        if kind == "seq":
            return (ident, type_id)
        ids, tokens = self.special_tokens[ident]
        return _SpecialPiece(ids, tokens, type_id)

    def _count(self, template: list[tuple[str, Any, int]]) -> int:
        return sum(len(self.special_tokens[ident][0]) for kind, ident, _ in template if kind == "special")

    def added_tokens(self, is_pair: bool) -> int:
        return self._added[bool(is_pair)]

    def process_encodings(self, encodings: list[Encoding], add_special_tokens: bool) -> list[Encoding]:
        if len(encodings) not in (1, 2):
            raise ValueError("encodings vector length must be either 1 or 2")
        vocab = next((e._vocab for e in encodings if e._vocab is not None), None)
        out: list[Encoding] = []
        for piece in self._compiled[len(encodings) == 2]:
            if isinstance(piece, tuple):
                i, type_id = piece
                enc = encodings[i]
                _with_type_ids(enc, type_id)
                enc.set_sequence_id(i)
                out.append(enc._clone())
            elif add_special_tokens:
                out.append(piece.encoding(vocab))
        return out

    def _layout(self, is_pair: bool, add_special_tokens: bool) -> Layout | None:
        pieces = tuple(p for p in self._compiled[is_pair] if isinstance(p, tuple) or add_special_tokens)
        return Layout(pieces)


# ---------------------------------------------------------------------------- Roberta / Bert


def _wrap(
    enc: Encoding,
    before: tuple[str, int] | None,
    after: tuple[str, int],
    type_ids: tuple[int | None, int | None, int | None],
    seq_id: int,
) -> Encoding:
    """`[before] enc [after]` as Bert/Roberta build it: inner special mask 0, attention 1, no
    overflowing, and a sequence range that excludes the added tokens. `type_ids` gives the type
    of (before, inner, after); inner None keeps the encoding's own."""
    n = len(enc)
    lead = 1 if before is not None else 0
    m = np.empty((7, n + lead + 1), dtype=np.int64)
    m[:, lead : lead + n] = enc._m
    if type_ids[1] is not None:
        m[TYPE, lead : lead + n] = type_ids[1]
    m[SPECIAL, lead : lead + n] = 0
    m[ATTN] = 1
    added = [(lead + n, after, type_ids[2])]
    if before is not None:
        added.append((0, before, type_ids[0]))
    for col, (_, token_id), type_id in added:
        m[:, col] = (token_id, type_id, 0, 0, -1, 1, 1)
    m.setflags(write=False)
    vocab = enc._vocab
    ends = [t for t in (before, after) if t is not None]
    if enc._tokens is None and vocab is not None and all(
        0 <= t[1] < len(vocab) and vocab[t[1]] == t[0] for t in ends
    ):
        tokens = None
    else:
        vocab = None
        tokens = ([before[0]] if before else []) + enc._token_list() + [after[0]]
    return Encoding._new(m, tokens, vocab, None, {seq_id: (lead, lead + n)})


def _token_pair(value: Any, path: str, type_name: str) -> tuple[str, int]:
    if isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], int):
        return (value[0], int(value[1]))
    raise UnsupportedComponent(path, type_name, f"a malformed token pair ({value!r})")


class RobertaProcessing(PostProcessor):
    """`<s> A </s>` and `</s> B </s>`; every type id is 0; optional ByteLevel offset trimming."""

    def __init__(self, sep: tuple[str, int], cls: tuple[str, int], trim_offsets: bool = True, add_prefix_space: bool = True) -> None:
        self.sep, self.cls = sep, cls
        self.trim_offsets, self.add_prefix_space = trim_offsets, add_prefix_space

    def added_tokens(self, is_pair: bool) -> int:
        return 4 if is_pair else 2

    def _layout(self, is_pair: bool, add_special_tokens: bool) -> Layout | None:
        trim = self.add_prefix_space if self.trim_offsets else None
        if not add_special_tokens:
            return Layout(((0, 0), (1, 0)) if is_pair else ((0, 0),), trim)
        cls = _SpecialPiece([self.cls[1]], [self.cls[0]], 0)
        sep = _SpecialPiece([self.sep[1]], [self.sep[0]], 0)
        pieces: tuple[Any, ...] = (cls, (0, 0), sep)
        if is_pair:
            pieces += (sep, (1, 0), sep)
        return Layout(pieces, trim, masks=True)

    def process_encodings(self, encodings: list[Encoding], add_special_tokens: bool) -> list[Encoding]:
        if self.trim_offsets:
            _trim_all(encodings, self.add_prefix_space)
        for enc in encodings:
            _with_type_ids(enc, 0)
        if not add_special_tokens:
            return encodings
        out = []
        for i, enc in enumerate(encodings):
            first = self.cls if i == 0 else self.sep
            wrapped = _wrap(enc, first, self.sep, (0, None, 0), 0 if i == 0 else 1)
            wrapped._overflowing = [_wrap(o, first, self.sep, (0, 0, 0), 0 if i == 0 else 1) for o in enc._overflowing]
            out.append(wrapped)
        return out


class BertProcessing(PostProcessor):
    """`[CLS] A [SEP]` (type 0) and `B [SEP]` (type 1)."""

    def __init__(self, sep: tuple[str, int], cls: tuple[str, int]) -> None:
        self.sep, self.cls = sep, cls

    def added_tokens(self, is_pair: bool) -> int:
        return 3 if is_pair else 2

    def _layout(self, is_pair: bool, add_special_tokens: bool) -> Layout | None:
        if not add_special_tokens:
            return _plain_layout(is_pair)
        pieces: tuple[Any, ...] = (
            _SpecialPiece([self.cls[1]], [self.cls[0]], 0), (0, 0), _SpecialPiece([self.sep[1]], [self.sep[0]], 0),
        )
        if is_pair:
            pieces += ((1, 1), _SpecialPiece([self.sep[1]], [self.sep[0]], 1))
        return Layout(pieces, masks=True)

    def process_encodings(self, encodings: list[Encoding], add_special_tokens: bool) -> list[Encoding]:
        if not add_special_tokens:
            return encodings
        out = []
        for i, enc in enumerate(encodings):
            if i == 0:
                wrapped = _wrap(enc, self.cls, self.sep, (0, None, 0), 0)
                wrapped._overflowing = [_wrap(o, self.cls, self.sep, (0, None, 0), 0) for o in enc._overflowing]
            else:
                wrapped = _wrap(enc, None, self.sep, (None, None, 1), 1)
                wrapped._overflowing = [_wrap(o, None, self.sep, (None, None, 1), 1) for o in enc._overflowing]
            out.append(wrapped)
        return out


# ---------------------------------------------------------------------------- Sequence


class SequenceProcessor(PostProcessor):
    """Runs each processor over the list of encodings in turn; added tokens add up."""

    def __init__(self, processors: list[PostProcessor]) -> None:
        self.processors = processors

    def added_tokens(self, is_pair: bool) -> int:
        return sum(p.added_tokens(is_pair) for p in self.processors)

    def process_encodings(self, encodings: list[Encoding], add_special_tokens: bool) -> list[Encoding]:
        for p in self.processors:
            encodings = p.process_encodings(encodings, add_special_tokens)
        return encodings

    def _layout(self, is_pair: bool, add_special_tokens: bool) -> Layout | None:
        # Only ByteLevel steps followed by at most one other processor: ByteLevel on the raw
        # sequences is just a trim. Anything after a template sees one encoding per piece.
        *head, last = self.processors or [ByteLevelProcessor(trim_offsets=False)]
        if not all(type(p) is ByteLevelProcessor for p in head) or type(last) is SequenceProcessor:
            return None
        base = last.layout(is_pair, add_special_tokens)
        if base is None:
            return None
        trims = [p.add_prefix_space for p in head if p.trim_offsets]
        if base.trim is not None:
            trims.append(base.trim)
        if len(trims) > 1:
            return None
        return Layout(base.pieces, trims[0] if trims else None, base.masks, base.ranged)


# ---------------------------------------------------------------------------- building


def _bool(d: dict[str, Any], key: str, default: bool) -> bool:
    value = d.get(key, default)
    return bool(value)


def build_post_processor(d: dict[str, Any] | None, path: str = "post_processor") -> PostProcessor | None:
    """The processor described by a tokenizer.json ``post_processor`` object (None for null)."""
    if d is None:
        return None
    if not isinstance(d, dict):
        raise UnsupportedComponent(path, type(d).__name__, "not an object")
    kind = d.get("type")
    if kind == "ByteLevel":
        return ByteLevelProcessor(
            _bool(d, "add_prefix_space", True), _bool(d, "trim_offsets", True), _bool(d, "use_regex", True)
        )
    if kind == "TemplateProcessing":
        return TemplateProcessing(d.get("single") or [], d.get("pair") or [], d.get("special_tokens") or {}, path)
    if kind == "RobertaProcessing":
        return RobertaProcessing(
            _token_pair(d.get("sep"), f"{path}.sep", kind),
            _token_pair(d.get("cls"), f"{path}.cls", kind),
            _bool(d, "trim_offsets", True),
            _bool(d, "add_prefix_space", True),
        )
    if kind == "BertProcessing":
        return BertProcessing(_token_pair(d.get("sep"), f"{path}.sep", kind), _token_pair(d.get("cls"), f"{path}.cls", kind))
    if kind == "Sequence":
        return SequenceProcessor(build_sequence(d, path, "processors", build_post_processor))
    raise UnsupportedComponent(path, kind)
