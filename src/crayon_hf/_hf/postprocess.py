"""Truncation, padding and the whole `post_process` step of `tokenizers.Tokenizer`.

    raw encoding(s) --truncate (max_length minus the tokens the processor adds)-->
    --processor.process (or the default merge)--> --pad--> final Encoding

Mirrors tokenizers/src/utils/truncation.rs, utils/padding.rs and `TokenizerImpl::post_process`
in tokenizers/src/tokenizer/mod.rs, plus the validation and dict shapes of the Python binding
(`enable_truncation`, `enable_padding`, `Tokenizer.truncation`, `Tokenizer.padding`).

Lengths are `usize` there, and `max_length - added_tokens` wraps around when the processor adds
more tokens than `max_length` allows: truncation then silently keeps everything. We reproduce it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from crayon_hf._lazy_numpy import lazy_numpy

from .encoding import ATTN, SPECIAL, TYPE, Encoding, _merge, _u32, _usize
from .processors import Layout, PostProcessor, trimmed_matrix

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_numpy(globals())

__all__ = [
    "TruncationParams",
    "PaddingParams",
    "truncate_encodings",
    "pad_encodings",
    "post_process",
    "post_process_batch",
]

_USIZE_MOD = 2**64

_STRATEGIES = {"longest_first": "LongestFirst", "only_first": "OnlyFirst", "only_second": "OnlySecond"}
_STRATEGIES_JSON = {v: k for k, v in _STRATEGIES.items()}


def _str_arg(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"'{type(value).__name__}' object cannot be converted to 'PyString'")
    return value


# The two parameter sets are NamedTuples (immutable, compared by value) rather than frozen
# dataclasses: importing dataclasses imports inspect, 8 ms of every fresh process's first load.
class TruncationParams(NamedTuple):
    max_length: int = 512
    stride: int = 0
    strategy: str = "longest_first"  # longest_first | only_first | only_second
    direction: str = "right"  # left | right

    @classmethod
    def from_kwargs(cls, max_length: int, **kwargs: Any) -> TruncationParams:
        """What `Tokenizer.enable_truncation(max_length, **kwargs)` builds (same errors)."""
        max_length = _usize(max_length)
        stride, strategy, direction = 0, "longest_first", "right"
        for key, value in kwargs.items():
            if key == "stride":
                stride = _usize(value)
            elif key == "strategy":
                value = _str_arg(value)
                if value not in _STRATEGIES:
                    raise ValueError(
                        f"Unknown `strategy`: `{value}`. Use one of `longest_first`, `only_first`, or `only_second`"
                    )
                strategy = value
            elif key == "direction":
                value = _str_arg(value)
                if value not in ("left", "right"):
                    raise ValueError(f"Unknown `direction`: `{value}`. Use one of `left` or `right`.")
                direction = value
            else:
                print(f"Ignored unknown kwarg option {key}")
        return cls(max_length, stride, strategy, direction)

    def validate(self, added_tokens_single: int) -> None:
        """`Tokenizer::with_truncation`: the stride must fit in the length left once the
        processor's tokens for a *single* sequence are taken out (ValueError otherwise)."""
        effective = (self.max_length - added_tokens_single) % _USIZE_MOD
        if effective < self.stride:
            raise ValueError(
                f"tokenizer stride set to {self.stride}, which is greater than or equal to its effective max "
                f"length of {effective} (= {self.max_length} original max length - {added_tokens_single} added "
                "special tokens), "
            )

    def as_dict(self) -> dict[str, Any]:
        """The shape of `tokenizers.Tokenizer.truncation`."""
        return {"max_length": self.max_length, "stride": self.stride, "strategy": self.strategy, "direction": self.direction}

    def to_json(self) -> dict[str, Any]:
        """The tokenizer.json ``truncation`` object."""
        return {
            "direction": self.direction.capitalize(),
            "max_length": self.max_length,
            "strategy": _STRATEGIES[self.strategy],
            "stride": self.stride,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> TruncationParams | None:
        if d is None:
            return None
        return cls(
            int(d["max_length"]),
            int(d.get("stride", 0)),
            _STRATEGIES_JSON[d.get("strategy", "LongestFirst")],
            str(d.get("direction", "Right")).lower(),
        )


class PaddingParams(NamedTuple):
    length: int | None = None  # None: BatchLongest, else Fixed(length)
    direction: str = "right"
    pad_to_multiple_of: int | None = None
    pad_id: int = 0
    pad_type_id: int = 0
    pad_token: str = "[PAD]"

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> PaddingParams:
        """What `Tokenizer.enable_padding(**kwargs)` builds (same errors and messages)."""
        length: int | None = None
        direction, multiple, pad_id, pad_type_id, pad_token = "right", None, 0, 0, "[PAD]"
        for key, value in kwargs.items():
            if key == "direction":
                value = _str_arg(value)
                if value not in ("left", "right"):
                    raise ValueError(f"Unknown `direction`: `{value}`. Use one of `left` or `right`")
                direction = value
            elif key == "pad_to_multiple_of":
                if value is not None:
                    multiple = _usize(value)
            elif key == "pad_id":
                pad_id = _u32(value)
            elif key == "pad_type_id":
                pad_type_id = _u32(value)
            elif key == "pad_token":
                pad_token = _str_arg(value)
            elif key in ("length", "max_length"):
                if key == "max_length":
                    print("enable_padding(max_length=X) is deprecated, use enable_padding(length=X) instead")
                length = None if value is None else _usize(value)
            else:
                print(f"Ignored unknown kwarg option {key}")
        return cls(length, direction, multiple, pad_id, pad_type_id, pad_token)

    def as_dict(self) -> dict[str, Any]:
        """The shape of `tokenizers.Tokenizer.padding`."""
        return {
            "length": self.length,
            "pad_to_multiple_of": self.pad_to_multiple_of,
            "pad_id": self.pad_id,
            "pad_token": self.pad_token,
            "pad_type_id": self.pad_type_id,
            "direction": self.direction,
        }

    def to_json(self) -> dict[str, Any]:
        """The tokenizer.json ``padding`` object."""
        return {
            "strategy": "BatchLongest" if self.length is None else {"Fixed": self.length},
            "direction": self.direction.capitalize(),
            "pad_to_multiple_of": self.pad_to_multiple_of,
            "pad_id": self.pad_id,
            "pad_type_id": self.pad_type_id,
            "pad_token": self.pad_token,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> PaddingParams | None:
        if d is None:
            return None
        strategy = d.get("strategy", "BatchLongest")
        length = None if strategy == "BatchLongest" else int(strategy["Fixed"])
        return cls(
            length,
            str(d.get("direction", "Right")).lower(),
            d.get("pad_to_multiple_of"),
            int(d.get("pad_id", 0)),
            int(d.get("pad_type_id", 0)),
            str(d.get("pad_token", "[PAD]")),
        )


def truncate_encodings(
    encoding: Encoding, pair_encoding: Encoding | None, params: TruncationParams, max_length: int | None = None
) -> None:
    """`utils::truncation::truncate_encodings`, in place. `max_length` overrides the params' one
    (post_process passes it reduced by the processor's added tokens)."""
    max_len = params.max_length if max_length is None else max_length
    stride, direction = params.stride, params.direction
    if max_len == 0:
        encoding._truncate(0, stride, direction)
        if pair_encoding is not None:
            pair_encoding._truncate(0, stride, direction)
        return
    total = len(encoding) + (len(pair_encoding) if pair_encoding is not None else 0)
    if total <= max_len:
        return
    to_remove = total - max_len
    if params.strategy == "longest_first":
        if pair_encoding is None:
            encoding._truncate(total - to_remove, stride, direction)
            return
        n1, n2 = len(encoding), len(pair_encoding)
        swap = n1 > n2
        if swap:
            n1, n2 = n2, n1
        n2 = n1 if n1 > max_len else max(n1, max_len - n1)
        if n1 + n2 > max_len:
            n1 = max_len // 2
            n2 = n1 + max_len % 2
        if swap:
            n1, n2 = n2, n1
        encoding._truncate(n1, stride, direction)
        pair_encoding._truncate(n2, stride, direction)
        return
    if params.strategy == "only_first":
        target = encoding
    elif pair_encoding is not None:
        target = pair_encoding
    else:
        raise Exception("Truncation error: Second sequence not provided")
    if len(target) > to_remove:
        target._truncate(len(target) - to_remove, stride, direction)
    else:
        raise Exception("Truncation error: Sequence to truncate too short to respect the provided max_length")


def pad_encodings(encodings: Sequence[Encoding], params: PaddingParams) -> None:
    """`utils::padding::pad_encodings`, in place: Fixed pads to `length`, BatchLongest to the
    longest encoding of the batch (overflowings are padded to the same length, not counted)."""
    if not encodings:
        return
    target = params.length if params.length is not None else max(len(e) for e in encodings)
    multiple = params.pad_to_multiple_of
    if multiple and target % multiple:
        target += multiple - target % multiple
    left = params.direction == "left"
    for enc in encodings:
        enc._pad(target, params.pad_id, params.pad_type_id, params.pad_token, left)


# ---------------------------------------------------------------------------- fast path
#
# What `post_process` does when nothing is truncated is fixed per (processor, is_pair,
# add_special_tokens): a `Layout` (processors.py). Applying it is one concatenation of the
# sequences' matrices with precomputed special-token blocks, plus the trim, instead of clones,
# per-processor encodings and a merge. The general path below stays the reference; the layout
# is only used for inputs it describes exactly (no overflowing, no sequence ranges).

_PLAIN_PAIR = Layout(((0, None), (1, None)))  # no processor: `merge` with ranges, types kept
assert ATTN == SPECIAL + 1


def _layout(processor: PostProcessor | None, is_pair: bool, add_special_tokens: bool) -> Layout | None:
    if processor is not None:
        return processor.layout(is_pair, add_special_tokens)
    return _PLAIN_PAIR if is_pair else None


def _fresh(enc: Encoding) -> bool:
    return not enc._overflowing and not enc._ranges


def _fits(truncation: TruncationParams, processor: PostProcessor | None, add_special_tokens: bool, total: int, is_pair: bool) -> bool:
    """Whether `truncate_encodings` would leave these lengths untouched (and raise nothing)."""
    added = processor.added_tokens(is_pair) if processor is not None else 0
    max_len = (truncation.max_length - added) % _USIZE_MOD if add_special_tokens and added > 0 else truncation.max_length
    return total <= max_len


def _apply_layout(layout: Layout, encs: list[Encoding], mats: list[np.ndarray]) -> Encoding:
    """The processed encoding of `encs` (whose matrices, trimmed when the layout trims, are
    `mats`); equal to `processor.process` on fresh inputs."""
    pieces = layout.pieces
    if len(pieces) == 1 and not layout.masks:
        (i, t), = pieces
        enc, m = encs[i], mats[i]
        n = m.shape[1]
        if t is not None and n and (m[TYPE].any() if t == 0 else (m[TYPE] != t).any()):
            m = m.copy()
            m[TYPE] = t
            m.setflags(write=False)
        return Encoding._new(m, enc._tokens, enc._vocab, None, {i: (0, n)} if layout.ranged else None)

    parts = []
    spans = []
    pos = 0
    for p in pieces:
        if type(p) is tuple:
            m = mats[p[0]]
            n = m.shape[1]
            spans.append((p, pos, pos + n))
        else:
            m = p.block
            n = m.shape[1]
        parts.append(m)
        pos += n
    m = np.concatenate(parts, axis=1)
    ranges = {}
    masks = layout.masks
    for (i, t), a, b in spans:
        if a < b:
            if t is not None:
                m[TYPE, a:b] = t
            if masks:
                m[SPECIAL : ATTN + 1, a:b] = ((0,), (1,))  # rows SPECIAL, ATTN of a wrapped sequence
        if layout.ranged:
            ranges[i] = (a, b)
    m.setflags(write=False)

    # Tokens stay derived when every non-empty piece is spelled by one vocabulary (as `_concat`).
    vocab = next((e._vocab for e in encs if e._vocab is not None), None)
    derived = vocab is not None
    if derived:
        for p in pieces:
            if type(p) is tuple:
                e = encs[p[0]]
                if len(e) and (e._tokens is not None or e._vocab is not vocab):
                    derived = False
                    break
            elif p.ids and not p.spelled_by(vocab):
                derived = False
                break
    if derived:
        return Encoding._new(m, None, vocab, None, ranges)
    tokens: list[str] = []
    for p in pieces:
        tokens.extend(encs[p[0]]._token_list() if type(p) is tuple else p.tokens)
    return Encoding._new(m, tokens, None, None, ranges)


def _trimmed(enc: Encoding, add_prefix_space: bool) -> np.ndarray:
    return trimmed_matrix(enc._m, enc._tokens, enc._vocab, add_prefix_space)


def post_process(
    encoding: Encoding,
    pair_encoding: Encoding | None = None,
    add_special_tokens: bool = True,
    truncation: TruncationParams | None = None,
    padding: PaddingParams | None = None,
    processor: PostProcessor | None = None,
) -> Encoding:
    """`TokenizerImpl::post_process`. The inputs are the raw encodings of the model (the pair's
    with type id 1); they are left untouched."""
    is_pair = pair_encoding is not None
    if _fresh(encoding) and (pair_encoding is None or _fresh(pair_encoding)):
        layout = _layout(processor, is_pair, add_special_tokens)
        encs = [encoding] if pair_encoding is None else [encoding, pair_encoding]
        if processor is None and pair_encoding is None:  # nothing to do but a copy
            if truncation is None or _fits(truncation, processor, add_special_tokens, len(encoding), False):
                final = encoding._clone()
                if padding is not None:
                    pad_encodings([final], padding)
                return final
        elif layout is not None and (truncation is None or _fits(truncation, processor, add_special_tokens, sum(map(len, encs)), is_pair)):
            trim = layout.trim
            mats = [e._m for e in encs] if trim is None else [_trimmed(e, trim) for e in encs]
            final = _apply_layout(layout, encs, mats)
            if padding is not None:
                pad_encodings([final], padding)
            return final
        elif pair_encoding is None and processor is not None and truncation is not None:
            final = _post_process_windows(encoding, add_special_tokens, truncation, processor)
            if final is not None:
                if padding is not None:
                    pad_encodings([final], padding)
                return final
    return _post_process_general(encoding, pair_encoding, add_special_tokens, truncation, padding, processor)


def _post_process_windows(
    encoding: Encoding, add_special_tokens: bool, truncation: TruncationParams, processor: PostProcessor
) -> Encoding | None:
    """The general path for one sequence that truncation cuts into windows, without its merges:
    `_merge` of the processed pieces pairs every overflowing window with the fixed pieces around
    it, so each window comes out as the layout applied to it alone, and the first window's result
    holds the others' as its overflowing. None where the layout does not say that: the sequence
    used twice (`_merge` then pairs windows with windows), or with a type id other than 0 (the
    general path retypes the first window only)."""
    layout = processor.layout(False, add_special_tokens)
    if layout is None:
        return None
    sequences = [p for p in layout.pieces if type(p) is tuple]
    if len(sequences) != 1 or sequences[0][1] not in (None, 0):
        return None
    enc = encoding._clone()
    added = processor.added_tokens(False)
    if add_special_tokens and added > 0:
        truncate_encodings(enc, None, truncation, (truncation.max_length - added) % _USIZE_MOD)
    else:
        truncate_encodings(enc, None, truncation)
    windows, enc._overflowing = enc._overflowing, []
    if any(w._overflowing or w._ranges for w in windows):
        return None
    trim = layout.trim

    def apply(w: Encoding) -> Encoding:
        return _apply_layout(layout, [w], [w._m if trim is None else _trimmed(w, trim)])

    final = apply(enc)
    final._overflowing = [apply(w) for w in windows]
    return final


def post_process_batch(
    encodings: Sequence[Encoding],
    add_special_tokens: bool = True,
    truncation: TruncationParams | None = None,
    processor: PostProcessor | None = None,
) -> list[Encoding]:
    """`[post_process(e, None, add_special_tokens, truncation, None, processor) for e in
    encodings]`, with the offset trim of a ByteLevel step done once over the whole batch."""
    layout = _layout(processor, False, add_special_tokens)
    out: list[Encoding | None] = [None] * len(encodings)
    batch: list[int] = []
    if layout is not None:
        for k, e in enumerate(encodings):
            if _fresh(e) and (truncation is None or _fits(truncation, processor, add_special_tokens, len(e), False)):
                batch.append(k)
    if batch and layout is not None:
        trim = layout.trim
        trimmed: list[np.ndarray] | None = None
        if trim is not None:
            vocab = encodings[batch[0]]._vocab
            if vocab is not None and all(encodings[k]._tokens is None and encodings[k]._vocab is vocab for k in batch):
                mats = [encodings[k]._m for k in batch]
                lens = np.fromiter(map(len, (encodings[k] for k in batch)), dtype=np.int64, count=len(batch))
                bounds = np.zeros(len(batch) + 1, dtype=np.int64)
                np.cumsum(lens, out=bounds[1:])
                big = np.concatenate(mats, axis=1) if len(mats) > 1 else mats[0]
                starts = bounds[:-1][lens > 0]
                big = trimmed_matrix(big, None, vocab, trim, starts)
                b = bounds.tolist()
                trimmed = [big[:, b[j] : b[j + 1]] for j in range(len(batch))]
            else:
                trimmed = [_trimmed(encodings[k], trim) for k in batch]
        for j, k in enumerate(batch):
            e = encodings[k]
            out[k] = _apply_layout(layout, [e], [e._m if trimmed is None else trimmed[j]])
    for k, e in enumerate(encodings):
        if out[k] is None:
            out[k] = post_process(e, None, add_special_tokens, truncation, None, processor)
    return out  # type: ignore[return-value]


def _post_process_general(
    encoding: Encoding,
    pair_encoding: Encoding | None,
    add_special_tokens: bool,
    truncation: TruncationParams | None,
    padding: PaddingParams | None,
    processor: PostProcessor | None,
) -> Encoding:
    """The step-by-step path: clone, truncate, `processor.process` (or merge), pad."""
    encoding = encoding._clone()
    pair = pair_encoding._clone() if pair_encoding is not None else None

    if truncation is not None:
        added = processor.added_tokens(pair is not None) if processor is not None else 0
        if add_special_tokens and added > 0:
            truncate_encodings(encoding, pair, truncation, (truncation.max_length - added) % _USIZE_MOD)
        else:
            truncate_encodings(encoding, pair, truncation)

    if processor is not None:
        final = processor.process(encoding, pair, add_special_tokens)
    elif pair is None:
        final = encoding
    else:
        encoding.set_sequence_id(0)
        pair.set_sequence_id(1)
        final = _merge([encoding, pair], False)

    if padding is not None:
        pad_encodings([final], padding)
    return final
