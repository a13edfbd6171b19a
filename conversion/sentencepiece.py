"""SentencePiece model files (``tokenizer.model``, ``spiece.model``) -> tokenizer.json.

    .model bytes --parse_model--> SentencePieceModel (pieces, trainer_spec, normalizer_spec)
                 --tokenizer_json--> tokenizer.json dict (what transformers v5 builds from that file)
                 --crayon_hf.Tokenizer.from_buffer--> cartridge, or the tokenizers library

A .model file is a protobuf ``ModelProto`` (google/sentencepiece, src/sentencepiece_model.proto).
It is read here by a small wire-format reader that knows the four messages involved, so neither
`sentencepiece` nor `protobuf` is needed. The reader only moves forward: every field consumes at
least its tag byte, every length is checked against what is left, and messages nest two levels
deep at most, so no input can make it loop or recurse without end; anything malformed or cut off
raises ValueError naming the field and the byte offset.

Which tokenizer.json: the one transformers 5 builds when it loads a folder holding only the .model
---------------------------------------------------------------------------------------------------
transformers 5 has no generic converter for a bare .model. ``AutoTokenizer`` on such a folder (no
tokenizer_config naming a class) builds a ``TokenizersBackend`` via
``SpmConverter.build_tokenizer_from_spm_proto``: a Replace(" ", "▁") normalizer and *no*
pre-tokenizer, so the dummy-prefix "▁" SentencePiece puts before the text is lost ("Hello" is not
"▁Hello") and ids differ from SentencePiece's own. The model classes get it right, each in its
``__init__``, from the vocabulary that ``SentencePieceExtractor.extract`` reads out of the .model
(``TokenizersBackend.convert_to_native_format`` -> ``_convert_from_sentencepiece``). The reference
is therefore, by model type:

* BPE: ``LlamaTokenizer.from_pretrained(folder)`` (``LlamaTokenizerFast`` is the same class), what
  Llama, Mistral and most SentencePiece-BPE checkpoints load as. Vocabulary: every piece with its
  id. Merges: ``generate_merges(vocab)`` of ``tokenization_utils_base`` -- for each piece in id
  order, each split ``left + right`` with both halves in the vocabulary, shorter left half first.
  The piece scores are *not* consulted (in SentencePiece BPE files the score order is the id
  order). Model: BPE with ``fuse_unk`` and ``byte_fallback``; no normalizer; pre-tokenizer
  Metaspace("▁", prepend_scheme "first", split false) (``legacy=False``, the default); decoder
  Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0).
* Unigram: the pipeline T5Tokenizer and XLMRobertaTokenizer (the classes of the two best-known
  SentencePiece Unigram files) build: normalizer Precompiled(the .model's charsmap) or none when it
  is empty; pre-tokenizer Sequence[WhitespaceSplit, Metaspace("▁", "always", split true)]; model
  Unigram with every piece and its score; decoder Metaspace("▁", "always", split true). Those
  classes hard-code their own layout (T5: unk id 2 and 100 ``<extra_id_N>`` sentinels; XLM-R:
  fairseq's id offset and ``<mask>``); a bare .model says nothing about them, so the unk id and
  ``byte_fallback`` come from the file's trainer_spec and the vocabulary is the pieces as stored.
  For t5's spiece.model this equals T5Tokenizer's ids (below its sentinel ids), for XLM-R's
  sentencepiece.bpe.model it equals XLMRobertaTokenizer's ids under the fairseq offset.

Both: control and user-defined pieces (and the unknown piece) become added tokens with
``normalized: false``, control and unknown ones ``special: true``, user-defined ones
``special: false``, as ``SentencePieceExtractor.extract`` marks them. The post-processor is the one
transformers gives a bare .model (``add_bos_token`` and ``add_eos_token`` default to False):
TemplateProcessing ``$A`` / ``$A $B:1`` with no special tokens; a .model does not say which
special tokens a model expects around a sequence.

Where a file departs from those classes' assumptions, the conversion follows the file (what
SentencePiece itself does; checked against the `sentencepiece` library in the tests) rather than
the class:

* ``add_dummy_prefix: false``: no prefix and no Strip in the decoder (for BPE this is what
  GemmaTokenizer builds);
* a non-empty charsmap in a BPE file: a Precompiled normalizer;
* ``remove_extra_whitespaces`` in a BPE file: normalizers that drop leading and trailing spaces
  and collapse runs of spaces; a Unigram file without it, or without the dummy prefix, gets those
  normalizers (or none), a Prepend("▁") normalizer for the prefix, and Metaspace only to split;
* BPE ``byte_fallback`` and ``unk_token`` come from the trainer_spec (transformers sets
  ``byte_fallback`` and leaves ``unk_token`` unset, which changes nothing while all 256 byte pieces
  exist).

WORD and CHAR models have no transformers tokenizer and are refused. Unigram scores are written so
that `tokenizers`' JSON reader gets back exactly the floats transformers builds from (all but about
0.1% of float32 values; see `dumps`).
"""

from __future__ import annotations

import base64
import enum
import json
import json.encoder
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

__all__ = [
    "PieceType",
    "ModelType",
    "Piece",
    "TrainerSpec",
    "NormalizerSpec",
    "SentencePieceModel",
    "looks_like_model",
    "parse_model",
    "tokenizer_json",
    "dumps",
    "convert_model",
]

SPACE = "\u2581"  # "▁", SentencePiece's visible space


class PieceType(enum.IntEnum):
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class ModelType(enum.IntEnum):
    UNIGRAM = 1
    BPE = 2
    WORD = 3
    CHAR = 4


class Piece(NamedTuple):
    piece: str
    score: float = 0.0
    type: PieceType = PieceType.NORMAL


@dataclass
class TrainerSpec:
    """The fields of sentencepiece.TrainerSpec that say how to tokenize (the training options
    are skipped), with the .proto's defaults."""

    model_type: ModelType = ModelType.UNIGRAM
    vocab_size: int = 8000
    byte_fallback: bool = False
    unk_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = -1
    unk_piece: str = "<unk>"
    bos_piece: str = "<s>"
    eos_piece: str = "</s>"
    pad_piece: str = "<pad>"
    unk_surface: str = " \u2047 "
    control_symbols: list[str] = field(default_factory=list)
    user_defined_symbols: list[str] = field(default_factory=list)
    split_by_unicode_script: bool = True
    split_by_number: bool = True
    split_by_whitespace: bool = True
    split_digits: bool = False
    treat_whitespace_as_suffix: bool = False
    allow_whitespace_only_pieces: bool = False
    max_sentencepiece_length: int = 16


@dataclass
class NormalizerSpec:
    name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    normalization_rule_tsv: str = ""


@dataclass
class SentencePieceModel:
    pieces: list[Piece]
    trainer_spec: TrainerSpec
    normalizer_spec: NormalizerSpec
    denormalizer_spec: NormalizerSpec | None = None

    def describe(self) -> str:
        return f"SentencePiece {self.trainer_spec.model_type.name}, {len(self.pieces):,} pieces"


# ---------------------------------------------------------------------------- protobuf wire format
#
# A message is a sequence of (tag, value); tag = field_number << 3 | wire_type. Wire types used by
# these messages: 0 varint, 1 fixed 64-bit, 2 length-delimited, 5 fixed 32-bit. Groups (3, 4) are
# not used by sentencepiece_model.proto and are refused. Fields the reader does not know (training
# options, self_test_data, extensions) are skipped by wire type, as protobuf does.

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


def _varint(buf: bytes, pos: int, end: int, where: str) -> tuple[int, int]:
    result = shift = 0
    for i in range(10):
        if pos + i >= end:
            raise ValueError(f"{where}: truncated varint at byte {pos}")
        b = buf[pos + i]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if i == 9 and b > 1:
                raise ValueError(f"{where}: varint at byte {pos} overflows 64 bits")
            return result, pos + i + 1
        shift += 7
    raise ValueError(f"{where}: varint at byte {pos} is longer than 10 bytes")


def _field(buf: bytes, pos: int, end: int, where: str, names: dict[int, str] | None = None) -> tuple[int, int, Any, int]:
    """The field whose tag is at buf[pos]: (field number, wire type, value, offset after it); the
    value is an int for varints and fixed-width fields, (start, end) for length-delimited ones.
    `names` (field number -> name) only makes error messages clearer."""
    tag, after = _varint(buf, pos, end, where)
    number, wire = tag >> 3, tag & 7
    if number == 0:
        raise ValueError(f"{where}: field number 0 at byte {pos}")
    label = f"field {number}" + (f" ({names[number]})" if names and number in names else "")
    if wire == _VARINT:
        return (number, wire, *_varint(buf, after, end, where))
    if wire == _LEN:
        n, after = _varint(buf, after, end, where)
        if n > end - after:
            raise ValueError(f"{where}: {label} at byte {pos} claims {n} bytes, {end - after} are left")
        return number, wire, (after, after + n), after + n
    if wire == _FIXED32 or wire == _FIXED64:
        width = 4 if wire == _FIXED32 else 8
        if end - after < width:
            raise ValueError(f"{where}: truncated {width * 8}-bit {label} at byte {pos}")
        return number, wire, int.from_bytes(buf[after : after + width], "little"), after + width
    raise ValueError(f"{where}: {label} at byte {pos} has wire type {wire}, which "
                     "sentencepiece_model.proto does not use")


def _fields(buf: bytes, start: int, end: int, where: str, names: dict[int, str] | None = None):
    """(field number, wire type, value, offset of the tag) for each field of buf[start:end]."""
    pos = start
    while pos < end:
        number, wire, value, after = _field(buf, pos, end, where, names)
        yield number, wire, value, pos
        pos = after


# Field kinds: how a value is read, and which wire type it must arrive with.
def _string(buf: bytes, span: tuple[int, int], where: str) -> str:
    raw = buf[span[0] : span[1]]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: not valid UTF-8 ({e.reason} at byte {span[0] + e.start})") from None


def _int32(value: int, where: str) -> int:
    if value >= 1 << 63:
        value -= 1 << 64
    if not -(1 << 31) <= value < 1 << 31:
        raise ValueError(f"{where}: {value} does not fit an int32")
    return value


_F32 = struct.Struct("<f")
_KINDS: dict[str, tuple[int, Callable[[bytes, Any, str], Any]]] = {
    "string": (_LEN, _string),
    "bytes": (_LEN, lambda buf, v, where: buf[v[0] : v[1]]),
    "float": (_FIXED32, lambda buf, v, where: _F32.unpack(v.to_bytes(4, "little"))[0]),
    "bool": (_VARINT, lambda buf, v, where: v != 0),
    "int32": (_VARINT, lambda buf, v, where: _int32(v, where)),
}

# field number -> (attribute, kind, repeated); kind "enum:<Enum>" is an int32 checked against Enum.
_PIECE_FIELDS = {1: ("piece", "string", False), 2: ("score", "float", False), 3: ("type", "enum:PieceType", False)}
_TRAINER_FIELDS = {
    3: ("model_type", "enum:ModelType", False),
    4: ("vocab_size", "int32", False),
    20: ("max_sentencepiece_length", "int32", False),
    21: ("split_by_unicode_script", "bool", False),
    22: ("split_by_whitespace", "bool", False),
    23: ("split_by_number", "bool", False),
    24: ("treat_whitespace_as_suffix", "bool", False),
    25: ("split_digits", "bool", False),
    26: ("allow_whitespace_only_pieces", "bool", False),
    30: ("control_symbols", "string", True),
    31: ("user_defined_symbols", "string", True),
    35: ("byte_fallback", "bool", False),
    40: ("unk_id", "int32", False),
    41: ("bos_id", "int32", False),
    42: ("eos_id", "int32", False),
    43: ("pad_id", "int32", False),
    44: ("unk_surface", "string", False),
    45: ("unk_piece", "string", False),
    46: ("bos_piece", "string", False),
    47: ("eos_piece", "string", False),
    48: ("pad_piece", "string", False),
}
_NORMALIZER_FIELDS = {
    1: ("name", "string", False),
    2: ("precompiled_charsmap", "bytes", False),
    3: ("add_dummy_prefix", "bool", False),
    4: ("remove_extra_whitespaces", "bool", False),
    5: ("escape_whitespaces", "bool", False),
    6: ("normalization_rule_tsv", "string", False),
}
_ENUMS = {"PieceType": PieceType, "ModelType": ModelType}
_MODEL_FIELDS = {1: "pieces", 2: "trainer_spec", 3: "normalizer_spec", 5: "denormalizer_spec"}


def _read_message(buf: bytes, span: tuple[int, int], schema: dict, where: str, into: dict[str, Any]) -> None:
    """Reads the known fields of one message into `into` (a later scalar wins and repeated fields
    append, as protobuf merges them)."""
    for number, wire, value, at in _fields(buf, span[0], span[1], where, {n: f[0] for n, f in schema.items()}):
        known = schema.get(number)
        if known is None:
            continue
        name, kind, repeated = known
        here = f"{where}.{name} (byte {at})"
        if kind.startswith("enum:"):
            if wire != _VARINT:
                raise ValueError(f"{here}: wire type {wire}, expected a varint")
            enum_type = _ENUMS[kind[5:]]
            number_value = _int32(value, here)
            try:
                parsed: Any = enum_type(number_value)
            except ValueError:
                raise ValueError(f"{here}: {number_value} is not a {enum_type.__name__}") from None
        else:
            expected, read = _KINDS[kind]
            if wire != expected:
                raise ValueError(f"{here}: wire type {wire}, expected {expected} for a {kind}")
            parsed = read(buf, value, here)
        if repeated:
            into.setdefault(name, []).append(parsed)
        else:
            into[name] = parsed


def looks_like_model(head: bytes) -> bool:
    """Whether `head` (the start of a file) begins the way a SentencePiece ModelProto does: field 1
    (the first piece), holding a non-empty UTF-8 piece string and no field but the three of a
    piece. Strict enough that JSON, rank files and cartridges never pass."""
    buf = bytes(head)
    if len(buf) < 2 or buf[0] != 0x0A:
        return False
    try:
        n, pos = _varint(buf, 1, len(buf), "head")
        if not 0 < n <= len(buf) - pos:
            return False
        if any(number not in _PIECE_FIELDS for number, *_ in _fields(buf, pos, pos + n, "head")):
            return False
        fields: dict[str, Any] = {}
        _read_message(buf, (pos, pos + n), _PIECE_FIELDS, "head", fields)
        return bool(fields.get("piece"))
    except ValueError:
        return False


_PIECE_TYPES = {t.value: t for t in PieceType}


def _read_piece(buf: bytes, start: int, end: int, source: str, index: int) -> Piece:
    """One SentencePiece message, through the general reader."""
    fields: dict[str, Any] = {}
    _read_message(buf, (start, end), _PIECE_FIELDS, f"{source}: pieces[{index}]", fields)
    return Piece(fields.get("piece", ""), float(fields.get("score", 0.0)), fields.get("type", PieceType.NORMAL))


def parse_model(data: bytes, source: str = "SentencePiece model") -> SentencePieceModel:
    """Reads a serialized sentencepiece.ModelProto; ValueError for anything malformed."""
    buf = bytes(data)
    end = len(buf)
    pieces: list[Piece] = []
    trainer: dict[str, Any] = {}
    normalizer: dict[str, Any] = {}
    denormalizer: dict[str, Any] | None = None
    pos = 0
    unpack_f32, types = _F32.unpack_from, _PIECE_TYPES
    while pos < end:
        # Fast path, for the layout SentencePiece writes nearly every field in: a piece message
        # (tag 0x0A) under 128 bytes holding a piece string under 128 bytes, a score and maybe a
        # one-byte type, in that order. Anything else takes the general reader below.
        if buf[pos] == 0x0A and pos + 3 < end and buf[pos + 1] < 0x80 and buf[pos + 2] == 0x0A and buf[pos + 3] < 0x80:
            stop = pos + 2 + buf[pos + 1]
            text_end = pos + 4 + buf[pos + 3]
            if stop <= end and text_end + 5 <= stop and buf[text_end] == 0x15:
                kind = 1
                if text_end + 5 == stop or (text_end + 7 == stop and buf[text_end + 5] == 0x18 and buf[text_end + 6] in types):
                    if text_end + 7 == stop:
                        kind = buf[text_end + 6]
                    try:
                        text = buf[pos + 4 : text_end].decode("utf-8")
                    except UnicodeDecodeError:
                        pass  # the general reader names the piece
                    else:
                        pieces.append(Piece(text, unpack_f32(buf, text_end + 1)[0], types[kind]))
                        pos = stop
                        continue
        at = pos
        number, wire, value, pos = _field(buf, pos, end, source, _MODEL_FIELDS)
        if number in (1, 2, 3, 5) and wire != _LEN:
            raise ValueError(f"{source}: field {number} ({_MODEL_FIELDS[number]}) at byte {at} has wire type {wire}, "
                             "expected a message")
        if number == 1:
            pieces.append(_read_piece(buf, value[0], value[1], source, len(pieces)))
        elif number == 2:
            _read_message(buf, value, _TRAINER_FIELDS, f"{source}: trainer_spec", trainer)
        elif number == 3:
            _read_message(buf, value, _NORMALIZER_FIELDS, f"{source}: normalizer_spec", normalizer)
        elif number == 5:
            denormalizer = denormalizer if denormalizer is not None else {}
            _read_message(buf, value, _NORMALIZER_FIELDS, f"{source}: denormalizer_spec", denormalizer)
    model = SentencePieceModel(
        pieces,
        TrainerSpec(**trainer),
        NormalizerSpec(**normalizer),
        None if denormalizer is None else NormalizerSpec(**denormalizer),
    )
    _validate(model, source)
    return model


def _validate(model: SentencePieceModel, source: str) -> None:
    """What SentencePiece itself refuses to load, plus what a tokenizer.json cannot express."""
    if not model.pieces:
        raise ValueError(f"{source} holds no pieces: it is not a SentencePiece model (or it is empty or cut off)")
    seen: dict[str, int] = {}
    for i, p in enumerate(model.pieces):
        if not p.piece:
            raise ValueError(f"{source}: pieces[{i}] is empty")
        if p.piece in seen:
            raise ValueError(f"{source}: pieces[{i}] {p.piece!r} is already pieces[{seen[p.piece]}]")
        seen[p.piece] = i
    spec = model.trainer_spec
    if spec.model_type in (ModelType.WORD, ModelType.CHAR):
        raise ValueError(
            f"{source} is a SentencePiece {spec.model_type.name} model; transformers has no tokenizer for "
            "those and crayon-hf converts only BPE and Unigram models"
        )
    unk = spec.unk_id
    if not 0 <= unk < len(model.pieces) or model.pieces[unk].type is not PieceType.UNKNOWN:
        unknown = [i for i, p in enumerate(model.pieces) if p.type is PieceType.UNKNOWN]
        raise ValueError(
            f"{source}: trainer_spec.unk_id is {unk}, but the unknown piece is "
            f"{'missing' if not unknown else f'pieces[{unknown[0]}]'}"
        )


# ---------------------------------------------------------------------------- tokenizer.json


def _bpe_merges(vocab: dict[str, int]) -> list[list[str]]:
    """transformers' generate_merges(vocab) without scores: each piece in id order, then each way
    to cut it into two pieces of the vocabulary, shorter left half first."""
    merges: list[list[str]] = []
    for piece in vocab:  # insertion order is id order
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in vocab and right in vocab:
                merges.append([left, right])
    return merges


def _added_tokens(model: SentencePieceModel) -> list[dict[str, Any]]:
    added = []
    for i, p in enumerate(model.pieces):
        if p.type in (PieceType.UNKNOWN, PieceType.CONTROL, PieceType.USER_DEFINED):
            added.append({"id": i, "content": p.piece, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": p.type is not PieceType.USER_DEFINED})
    return added


def _precompiled(spec: NormalizerSpec) -> list[dict[str, Any]]:
    if not spec.precompiled_charsmap:
        return []
    return [{"type": "Precompiled", "precompiled_charsmap": base64.b64encode(spec.precompiled_charsmap).decode("ascii")}]


def _sequence(items: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    if not items:
        return None
    if len(items) == 1:
        return items[0]
    return {"type": "Sequence", key: items}


def _metaspace(prepend_scheme: str, split: bool) -> dict[str, Any]:
    return {"type": "Metaspace", "replacement": SPACE, "prepend_scheme": prepend_scheme, "split": split}


_NO_SPECIALS_TEMPLATE = {
    "type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {},
}


def _remove_extra_spaces(keep_one_leading: bool) -> list[dict[str, Any]]:
    """SentencePiece's remove_extra_whitespaces (after the charsmap): no leading or trailing
    spaces, runs of spaces collapsed to one. Oniguruma's ^ and $ are line anchors, hence \\A, \\z."""
    steps = [
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        {"type": "Replace", "pattern": {"Regex": r" \z"}, "content": ""},
    ]
    if not keep_one_leading:
        steps.append({"type": "Replace", "pattern": {"Regex": r"\A "}, "content": ""})
    return steps


def _bpe_pipeline(model: SentencePieceModel) -> dict[str, Any]:
    spec, norm = model.trainer_spec, model.normalizer_spec
    vocab = {p.piece: i for i, p in enumerate(model.pieces)}
    normalizers = _precompiled(norm)
    if norm.remove_extra_whitespaces:
        # A leading space is kept (as one) when the dummy prefix follows: Metaspace's "first"
        # prepends only to text that still starts at offset 0, and "▁" is the prefix anyway.
        normalizers += _remove_extra_spaces(keep_one_leading=norm.add_dummy_prefix)
    decoders: list[dict[str, Any]] = [
        {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]
    if norm.add_dummy_prefix:
        decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
    return {
        "normalizer": _sequence(normalizers, "normalizers"),
        "pre_tokenizer": _metaspace("first" if norm.add_dummy_prefix else "never", split=False),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": model.pieces[spec.unk_id].piece,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": spec.byte_fallback,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": _bpe_merges(vocab),
        },
        "decoder": {"type": "Sequence", "decoders": decoders},
    }


def _unigram_pipeline(model: SentencePieceModel) -> dict[str, Any]:
    spec, norm = model.trainer_spec, model.normalizer_spec
    normalizers = _precompiled(norm)
    if norm.add_dummy_prefix and norm.remove_extra_whitespaces:
        # T5Tokenizer's and XLMRobertaTokenizer's pipeline.
        pre = [{"type": "WhitespaceSplit"}, _metaspace("always", split=True)]
    else:
        # Files that keep spaces or add no dummy prefix (SentencePiece's behaviour; no transformers
        # class to follow): spaces are handled by normalizers, the prefix is prepended even to text
        # that starts with a space (Metaspace's "always" would skip that), Metaspace only splits.
        if norm.remove_extra_whitespaces:
            normalizers += _remove_extra_spaces(keep_one_leading=False)
        if norm.add_dummy_prefix:
            normalizers.append({"type": "Prepend", "prepend": SPACE})
        pre = [_metaspace("never", split=True)]
    prepend = "always" if norm.add_dummy_prefix else "never"
    if spec.byte_fallback:
        # Metaspace's decoder would leave <0xNN> pieces as they are; transformers' byte-fallback
        # decoder (LlamaTokenizer's) turns them back into bytes.
        decoders: list[dict[str, Any]] = [
            {"type": "Replace", "pattern": {"String": SPACE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
        ]
        if norm.add_dummy_prefix:
            decoders.append({"type": "Strip", "content": " ", "start": 1, "stop": 0})
        decoder: dict[str, Any] = {"type": "Sequence", "decoders": decoders}
    else:
        decoder = _metaspace(prepend, split=True)
    return {
        "normalizer": _sequence(normalizers, "normalizers"),
        "pre_tokenizer": _sequence(pre, "pretokenizers"),
        "model": {
            "type": "Unigram",
            "unk_id": spec.unk_id,
            "vocab": [[p.piece, p.score] for p in model.pieces],
            "byte_fallback": spec.byte_fallback,
        },
        "decoder": decoder,
    }


def tokenizer_json(model: SentencePieceModel) -> dict[str, Any]:
    """The tokenizer.json for a parsed model (see the module docstring for which one and why)."""
    if model.trainer_spec.model_type is ModelType.BPE:
        pipeline = _bpe_pipeline(model)
    elif model.trainer_spec.model_type is ModelType.UNIGRAM:
        pipeline = _unigram_pipeline(model)
    else:  # parse_model refuses these; a hand-built SentencePieceModel may not
        raise ValueError(f"SentencePiece {model.trainer_spec.model_type.name} models cannot be converted")
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _added_tokens(model),
        "normalizer": pipeline["normalizer"],
        "pre_tokenizer": pipeline["pre_tokenizer"],
        "post_processor": dict(_NO_SPECIALS_TEMPLATE),
        "decoder": pipeline["decoder"],
        "model": pipeline["model"],
    }


# ---------------------------------------------------------------------------- Unigram scores as text
#
# `tokenizers` reads a tokenizer.json with serde_json, whose default float parser is not correctly
# rounded: it reads the digits into a u64 S and the decimal places k, then computes (S as f64) /
# 10^k -- two roundings when S > 2^53, so the shortest repr of a score (17 digits) can come back
# 1 ulp off. transformers builds its Unigram from Python floats, and on t5's vocabulary that ulp
# flips ties in the Viterbi search ("----------" as "-", "---", ... or "---", "---", "-", ...).
# So each score is written as decimal digits S and places k with S exactly representable and
# S / 10^k correctly rounding to the score: then serde's division is a single, correct rounding and
# a correctly rounding parser (Python's json, the native engine) agrees. The few scores with no
# such S below 2^64 keep their repr.

_POW10 = [float(10**k) for k in range(23)]


def _serde_value(digits: int, places: int) -> float:
    return float(digits) / _POW10[places]


def _score_text(x: float) -> str:
    text = repr(x)
    if "e" in text or "n" in text or x == 0.0:  # exponents, inf, nan: never a SentencePiece score
        return text
    sign, a = ("-", -x) if x < 0 else ("", x)
    places = len(text.partition(".")[2])
    if _serde_value(int(text.lstrip("-").replace(".", "")), places) == a:
        return text
    num, den = a.as_integer_ratio()
    for k in range(places, len(_POW10)):
        nearest = (2 * num * 10**k + den) // (2 * den)  # round(a * 10^k), half up: ties need no care
        if nearest >= 1 << 64:
            break
        step = 1 << max(0, nearest.bit_length() - 53)  # spacing of doubles near `nearest`
        below = nearest - nearest % step
        for digits in (below, below + step, below - step):
            if digits > 0 and _serde_value(digits, k) == a:
                padded = str(digits).rjust(k + 1, "0")
                candidate = f"{sign}{padded[:-k]}.{padded[-k:]}"
                if float(candidate) == x:
                    return candidate
    return text


def dumps(data: dict[str, Any]) -> str:
    """tokenizer.json text for `tokenizer_json`'s dict, Unigram scores written as above."""
    model = data["model"]
    if model.get("type") != "Unigram":
        return json.dumps(data, ensure_ascii=False)
    # The model is the last key, so the marker's last occurrence is the vocabulary's place.
    marker = "\x00unigram vocabulary\x00"
    text = json.dumps({**data, "model": {**model, "vocab": marker}}, ensure_ascii=False)
    head, _, tail = text.rpartition(json.dumps(marker))
    quote = json.encoder.encode_basestring  # json.dumps(piece, ensure_ascii=False), without the call overhead
    vocab = ",".join(f"[{quote(piece)},{_score_text(score)}]" for piece, score in model["vocab"])
    return f"{head}[{vocab}]{tail}"


def convert_model(data: bytes, source: str = "SentencePiece model") -> str:
    """A .model file's bytes -> tokenizer.json text."""
    return dumps(tokenizer_json(parse_model(data, source)))
