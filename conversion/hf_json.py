"""tokenizer.json -> cartridge: BPE (byte-level and SentencePiece-style), WordPiece, Unigram, WordLevel.

    tokenizer.json --parse_tokenizer_json--> dict
                   --plan_native--> NativePlan (what the engine needs, flattened)   | Unsupported
                   --build_hf_cartridge--> cartridge image (bytes)

`plan_native` walks the pipeline the way `tokenizers` would run it and decides, component by
component, whether the native engine reproduces it exactly. The first component it cannot run
is reported as an `Unsupported` with its JSON path (``pre_tokenizer.pretokenizers[2]``); the
Python face then runs the whole tokenizer with the real `tokenizers` library instead. Nothing is
approximated.

The cartridge keeps the source JSON (section TJSN), so `save()` writes back a tokenizer.json
that `tokenizers` loads and tokenizes identically.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from crayon_hf._hf.decoders import bytes_to_unicode
from crayon_hf._hf.errors import PanicException

# The pipeline helpers loading shares with compiling live in crayon_hf._hf.pipeline (a load does
# not import this module); they are re-exported here for the compiler's callers.
from crayon_hf._hf.pipeline import (  # noqa: F401
    PRECOMPILED_BITMAP_BYTES,
    added_token_rows,
    engine_components,
    sentencepiece_shortcut,
    token_strings,
)

__all__ = [
    "Unsupported",
    "NativePlan",
    "parse_tokenizer_json",
    "plan_native",
    "build_hf_cartridge",
]

# Components the engine runs natively (the native side re-checks and may still refuse).
# Bump when plan_native accepts something it used to refuse: refusals are remembered in the cache
# (crayon_hf/tokenizer.py) under this number, so a newer engine looks at those files again.
SUPPORT_GENERATION = 2

_NORMALIZERS = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Replace", "Prepend", "Strip", "BertNormalizer",
                "Precompiled"}
_PRE_TOKENIZERS = {"ByteLevel", "Split", "Digits", "Punctuation", "Whitespace", "WhitespaceSplit", "Metaspace",
                   "BertPreTokenizer"}


class Unsupported(Exception):
    """A component the native engine does not reproduce exactly: `path` is its JSON path."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


# GPT-2's bytes_to_unicode, shared with the ByteLevel decoder: character -> the byte it stands for.
_CHAR_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}


# The same as a str.translate table: each alphabet character to the Latin-1 character of its byte,
# every other character below 256 to one that Latin-1 cannot encode (those above 256 fail as they
# are), so that translate + encode("latin-1") is _to_bytes in two C calls.
_TO_LATIN1 = {cp: "\uffff" for cp in range(256)}
_TO_LATIN1.update({ord(c): chr(b) for c, b in _CHAR_TO_BYTE.items()})


def _to_bytes(token: str) -> bytes | None:
    """A byte-level token's bytes, or None when a character is outside the alphabet."""
    try:
        return token.translate(_TO_LATIN1).encode("latin-1")
    except UnicodeEncodeError:
        return None


# Exact powers of ten as f64 (Python's literals are correctly rounded, as Rust's are).
_POW10 = [float(f"1e{k}") for k in range(309)]
_U64_MAX = 2**64 - 1


def tokenizers_float(text: str) -> float:
    """A JSON number as `tokenizers` reads it: serde_json without its `float_roundtrip` feature,
    which is not correctly rounded (Unigram scores written the usual way come back 1 ulp off
    about a quarter of the time, and Viterbi ties follow those bits).

    The digits (integer, then fraction) accumulate in a u64 until the next one would overflow
    it; later fraction digits are ignored, later integer digits only raise the exponent. The u64
    becomes an f64 (round half to even), then one multiplication or division by an exact power of
    ten (repeated by 1e308 when the exponent is below -308) applies the decimal exponent."""
    s = text
    negative = s.startswith("-")
    if negative:
        s = s[1:]
    mantissa, _, exp_text = s.replace("E", "e").partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    significand, exponent = 0, 0
    overflowed = False
    digits = int_part + frac_part
    if len(digits) <= 19 and digits.isdigit() and digits.isascii():
        # Nineteen digits never overflow a u64: the loops below would take every digit.
        significand, exponent = int(digits), -len(frac_part)
        int_part = frac_part = ""
    for c in int_part:
        if overflowed or significand * 10 + int(c) > _U64_MAX:
            overflowed = True
            exponent += 1
        else:
            significand = significand * 10 + int(c)
    for c in frac_part:
        if overflowed or significand * 10 + int(c) > _U64_MAX:
            overflowed = True
            break
        significand = significand * 10 + int(c)
        exponent -= 1
    if exp_text:
        exponent += int(exp_text)
    f = float(significand)
    while True:
        if abs(exponent) < len(_POW10):
            f = f * _POW10[exponent] if exponent >= 0 else f / _POW10[-exponent]
            break
        if f == 0.0:
            break
        if exponent >= 0:
            raise ValueError(f"number out of range: {text}")
        f /= 1e308
        exponent += 308
    return -f if negative else f


def parse_tokenizer_json(text: str | bytes, source: str = "tokenizer.json", exact_floats: bool = False) -> dict[str, Any]:
    """The parsed file. Floats are read as `tokenizers` reads them (tokenizers_float) unless
    `exact_floats`: for JSON that tokenizers' own to_str() wrote from values in memory, where the
    correctly rounded reading gives those values back."""
    try:
        data = json.loads(text, parse_float=None if exact_floats else tokenizers_float)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{source} is not valid JSON: {e}") from None
    except RecursionError:
        # Python's json recurses per nesting level; no tokenizer.json nests more than a few levels.
        raise ValueError(f"{source} is nested too deeply to be a tokenizer.json") from None
    return checked_tokenizer_json(data, source)


def checked_tokenizer_json(data: Any, source: str = "tokenizer.json") -> dict[str, Any]:
    """`data` (parsed JSON) when it has the shape of a tokenizer.json; else ValueError."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise ValueError(f"{source} is not a tokenizer.json: it has no 'model' object")
    return data


def model_type(model: dict[str, Any]) -> str:
    """The model's type; old files leave it out and `tokenizers` infers it from the fields."""
    t = model.get("type")
    if isinstance(t, str):
        return t
    if t is not None:
        raise ValueError(f"model.type must be a string such as 'BPE', got {t!r:.100}")
    if "merges" in model:
        return "BPE"
    if "unk_id" in model:
        return "Unigram"
    if "max_input_chars_per_word" in model:
        return "WordPiece"
    return "WordLevel"


@dataclass
class NativePlan:
    kind: str = "bpe_bytes"  # bpe_bytes, bpe_chars, wordpiece, unigram, wordlevel
    normalizers: list[dict[str, Any]] = field(default_factory=list)
    normalizer_paths: list[str] = field(default_factory=list)
    pre_tokenizers: list[dict[str, Any]] = field(default_factory=list)
    pre_tokenizer_paths: list[str] = field(default_factory=list)
    byte_tokens: list[tuple[bytes, int]] = field(default_factory=list)
    added_tokens: list[dict[str, Any]] = field(default_factory=list)  # ids as tokenizers assigns them
    decode_bytes: list[bytes | None] | None = None  # ByteLevel decoder output per id (byte-level BPE)
    merges: list[tuple[int, int, int]] = field(default_factory=list)
    scores: list[float] | None = None  # Unigram
    vocab_strings: list[str | None] = field(default_factory=list)
    vocab_bytes: list[bytes | None] = field(default_factory=list)  # byte-level: each vocab_strings' bytes
    n_ids: int = 0
    unk_id: int = -1
    fuse_unk: bool = False
    ignore_merges: bool = False
    byte_fallback: bool = False
    prefix: bytes = b""
    suffix: bytes = b""
    max_input_chars_per_word: int = 0


def _flatten(node: Any, path: str, list_key: str) -> list[tuple[str, dict[str, Any]]]:
    if node is None:
        return []
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise ValueError(f"{path} must be an object with a 'type'")
    if node["type"] == "Sequence":
        items = node.get(list_key)
        if not isinstance(items, list):
            raise ValueError(f"{path}.{list_key} must be a list")
        out: list[tuple[str, dict[str, Any]]] = []
        for i, child in enumerate(items):
            out.extend(_flatten(child, f"{path}.{list_key}[{i}]", list_key))
        return out
    return [(path, node)]


def _pattern(d: dict[str, Any], path: str) -> tuple[str, bool]:
    p = d.get("pattern")
    if isinstance(p, dict) and isinstance(p.get("Regex"), str):
        return p["Regex"], True
    if isinstance(p, dict) and isinstance(p.get("String"), str):
        return p["String"], False
    raise Unsupported(path, "pattern must be {'String': ...} or {'Regex': ...}")


_BEHAVIORS = {
    "Removed": "removed",
    "Isolated": "isolated",
    "MergedWithPrevious": "merged_with_previous",
    "MergedWithNext": "merged_with_next",
    "Contiguous": "contiguous",
}


def _behavior(value: Any, path: str) -> str:
    if value not in _BEHAVIORS:
        raise Unsupported(path, f"unknown split behavior {value!r}")
    return _BEHAVIORS[value]


def _normalizer_desc(path: str, d: dict[str, Any]) -> dict[str, Any]:
    t = d["type"]
    if t not in _NORMALIZERS:
        raise Unsupported(path, f"normalizer {t} is not implemented natively")
    desc: dict[str, Any] = {"type": t}
    if t == "Replace":
        desc["pattern"], desc["regex"] = _pattern(d, path)
        desc["content"] = str(d.get("content", ""))
    elif t == "Prepend":
        desc["pattern"] = str(d.get("prepend", ""))
    elif t == "Strip":
        desc["left"] = bool(d.get("strip_left", True))
        desc["right"] = bool(d.get("strip_right", True))
    elif t == "BertNormalizer":
        lowercase = bool(d.get("lowercase", True))
        strip = d.get("strip_accents")
        desc["clean_text"] = bool(d.get("clean_text", True))
        desc["handle_chinese_chars"] = bool(d.get("handle_chinese_chars", True))
        desc["strip_accents"] = lowercase if strip is None else bool(strip)  # None follows lowercase
        desc["lowercase"] = lowercase
    elif t == "Precompiled":
        charsmap = d.get("precompiled_charsmap")
        if not isinstance(charsmap, str):
            raise Unsupported(path, "precompiled_charsmap must be a base64 string")
        try:
            base64.b64decode(charsmap, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{path}.precompiled_charsmap is not valid base64") from None
        desc["charsmap"] = charsmap  # base64 in META; engine_components() decodes it
    return desc


def _pre_tokenizer_desc(path: str, d: dict[str, Any]) -> dict[str, Any]:
    t = d["type"]
    if t not in _PRE_TOKENIZERS:
        raise Unsupported(path, f"pre-tokenizer {t} is not implemented natively")
    desc: dict[str, Any] = {"type": t}
    if t == "ByteLevel":
        desc["add_prefix_space"] = bool(d.get("add_prefix_space", True))
        desc["use_regex"] = bool(d.get("use_regex", True))
    elif t == "Split":
        desc["pattern"], desc["regex"] = _pattern(d, path)
        desc["behavior"] = _behavior(d.get("behavior"), path)
        desc["invert"] = bool(d.get("invert", False))
    elif t == "Digits":
        desc["individual_digits"] = bool(d.get("individual_digits", False))
    elif t == "Punctuation":
        desc["behavior"] = _behavior(d.get("behavior", "Isolated"), path)
    elif t == "Metaspace":
        replacement = d.get("replacement", "\u2581")
        if not isinstance(replacement, str) or len(replacement) != 1:
            raise Unsupported(path, "Metaspace replacement must be one character")
        scheme = d.get("prepend_scheme")
        if scheme is None:  # files older than prepend_scheme
            scheme = "always" if d.get("add_prefix_space", True) else "never"
        if scheme not in ("always", "first", "never"):
            raise Unsupported(path, f"unknown Metaspace prepend_scheme {scheme!r}")
        desc["replacement"] = replacement
        desc["prepend_scheme"] = scheme
        desc["split"] = bool(d.get("split", True))
    return desc


def _token_string_section(strings: list[str | None]) -> bytes:
    """VSTI: {u32 n, u32 blob size, u32 offsets[n + 1], u8 present[n], the UTF-8 strings}."""
    encoded = [b"" if s is None else s.encode("utf-8") for s in strings]
    offsets = [0]
    for e in encoded:
        offsets.append(offsets[-1] + len(e))
    blob = b"".join(encoded)
    present = bytes(0 if s is None else 1 for s in strings)
    return struct.pack(f"<II{len(offsets)}I", len(strings), len(blob), *offsets) + present + blob


def _merge_pair(m: Any, i: int) -> tuple[str, str]:
    if isinstance(m, str):
        parts = m.split(" ")
        if len(parts) != 2:
            raise ValueError(f"model.merges[{i}] must be two tokens separated by one space: {m!r}")
        return parts[0], parts[1]
    if isinstance(m, list) and len(m) == 2 and all(isinstance(x, str) for x in m):
        return m[0], m[1]
    raise ValueError(f"model.merges[{i}] must be 'a b' or ['a', 'b']: {m!r}")


def _merge_ids(vocab: dict[str, int], merges: list[Any], prefix: str) -> list[tuple[int, int, int]]:
    """model.merges as (left, right, merged) ids, or ValueError naming the first bad merge."""
    get = vocab.get
    out = []
    for i, m in enumerate(merges):
        # Strings with one space are the common form; one lookup per token.
        if type(m) is str and m.count(" ") == 1:
            a, b = m.split(" ")
        else:
            a, b = _merge_pair(m, i)
        ia, ib = get(a), get(b)
        if ia is None or ib is None:
            raise ValueError(f"model.merges[{i}]: token {a if ia is None else b!r} is not in the vocabulary")
        merged = a + (b[len(prefix):] if prefix and b.startswith(prefix) else b)
        im = get(merged)
        if im is None:
            raise ValueError(f"model.merges[{i}]: the merged token {merged!r} is not in the vocabulary")
        out.append((ia, ib, im))
    return out


def added_token_string(token: dict[str, Any], normalizers: list[dict[str, Any]]) -> str:
    """The string `tokenizers` shows for an added token: its content, normalized by the
    tokenizer's normalizer when the token is `normalized`."""
    content = token["content"]
    if not normalizers or not token.get("normalized", True):
        return content
    from crayon_hf._native import native

    return native.hf_normalize(engine_components(normalizers), content)


def _vocab_dict(model: dict[str, Any]) -> dict[str, int]:
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise ValueError("model.vocab must be an object mapping tokens to ids")
    for tok, i in vocab.items():
        # tokenizers reads ids as u32 and refuses anything else at load.
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < 2**32:
            raise ValueError(f"model.vocab[{tok!r}] must be an integer id in [0, 2**32), got {i!r}")
    _check_dense_ids(vocab.values(), len(vocab), "model.vocab")
    return vocab


# The engine keeps per-id tables (strings, decode bytes) indexed by id, so a file whose ids are far
# sparser than its vocabulary would cost memory proportional to its largest id. tokenizers accepts
# such files (it keeps a hash map), so they run there instead, exactly.
_MAX_ID_SLACK = 1 << 20


def _check_dense_ids(ids: Any, count: int, path: str) -> None:
    seen: set[int] = set()
    top = -1
    for i in ids:
        if i in seen:
            # tokenizers keeps the last token for the id when it decodes; the engine's per-id tables
            # hold one token each, so it does not reproduce that.
            raise Unsupported(path, f"id {i} is given to two tokens; the native engine needs one token per id")
        seen.add(i)
        top = max(top, i)
    if top >= 2 * count + _MAX_ID_SLACK:
        raise Unsupported(path, f"ids are sparse (largest {top} for {count} tokens); the native engine stores "
                                "ids densely")


def _utf8(token: str) -> bytes:
    return token.encode("utf-8", "surrogatepass")


def _plan_text_vocab(vocab: dict[str, int], plan: NativePlan, keys: bool = True) -> None:
    """Token strings by id and (`keys`) the trie's keys (UTF-8) for a model over characters."""
    strings: list[str | None] = [None] * (max(vocab.values(), default=-1) + 1)
    for tok, i in vocab.items():
        strings[i] = tok
    plan.vocab_strings = strings
    if keys:
        plan.byte_tokens = [(_utf8(tok), i) for tok, i in vocab.items() if tok]


def plan_native(data: dict[str, Any]) -> NativePlan:
    """What the native engine needs; raises Unsupported naming the first component it cannot run
    exactly, ValueError when the file itself is inconsistent (as `tokenizers` would refuse it)."""
    model = data["model"]
    mtype = model_type(model)
    plan = NativePlan()
    for path, d in _flatten(data.get("normalizer"), "normalizer", "normalizers"):
        plan.normalizers.append(_normalizer_desc(path, d))
        plan.normalizer_paths.append(path)
    for path, d in _flatten(data.get("pre_tokenizer"), "pre_tokenizer", "pretokenizers"):
        plan.pre_tokenizers.append(_pre_tokenizer_desc(path, d))
        plan.pre_tokenizer_paths.append(path)
    types = [p["type"] for p in plan.pre_tokenizers]
    byte_level = "ByteLevel" in types
    if "Metaspace" in types and types.index("Metaspace") != len(types) - 1:
        path = plan.pre_tokenizer_paths[types.index("Metaspace")]
        raise Unsupported(path, "Metaspace before another pre-tokenizer is not implemented natively")
    if byte_level and (mtype != "BPE" or "Metaspace" in types):
        raise Unsupported("pre_tokenizer", f"ByteLevel with a {mtype} model (or with Metaspace) is not implemented natively")

    if mtype == "BPE":
        vocab = _plan_bpe(model, plan, byte_level)
    elif mtype == "WordPiece":
        vocab = _vocab_dict(model)
        _plan_text_vocab(vocab, plan)
        plan.kind = "wordpiece"
        unk = model.get("unk_token", "[UNK]")
        if unk not in vocab:
            raise Unsupported("model.unk_token", "WordPiece without its unk token in the vocabulary fails in tokenizers")
        plan.unk_id = vocab[unk]
        plan.prefix = _utf8(str(model.get("continuing_subword_prefix", "##")))
        limit = model.get("max_input_chars_per_word", 100)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            # tokenizers does not refuse this: its untagged model enum reads the file as WordLevel.
            raise ValueError(f"model.max_input_chars_per_word must be a non-negative integer, got {limit!r:.50}")
        # tokenizers takes a usize; no word of a str that fits in memory reaches 2**32 - 1 characters.
        plan.max_input_chars_per_word = min(limit, 2**32 - 1)
    elif mtype == "Unigram":
        vocab = _plan_unigram(model, plan)
    elif mtype == "WordLevel":
        vocab = _vocab_dict(model)
        _plan_text_vocab(vocab, plan)
        plan.kind = "wordlevel"
        unk = model.get("unk_token")
        if unk not in vocab:
            raise Unsupported("model.unk_token", "WordLevel without its unk token in the vocabulary fails in tokenizers")
        plan.unk_id = vocab[unk]
    else:
        raise Unsupported("model", f"model type {mtype} is not implemented natively")

    n_ids = len(plan.vocab_strings)
    # tokenizers re-adds the added tokens at load: one whose content is already in the model's
    # vocabulary takes the model's id, whatever the file says.
    added = data.get("added_tokens") or []
    if not isinstance(added, list):
        raise ValueError("added_tokens must be a list of objects with 'id' and 'content'")
    for k, tok in enumerate(added):
        if not isinstance(tok, dict) or not isinstance(tok.get("content"), str):
            raise ValueError(f"added_tokens[{k}] must be an object with a string 'content', got {tok!r:.200}")
        tid = tok.get("id")
        if not isinstance(tid, int) or isinstance(tid, bool) or not 0 <= tid < 2**32:
            raise ValueError(f"added_tokens[{k}].id must be an integer id in [0, 2**32), got {tid!r}")
        if tid >= 2 * max(n_ids, 1) + _MAX_ID_SLACK:
            raise Unsupported(f"added_tokens[{k}]", f"id {tid} is far past the vocabulary ({n_ids} ids); the "
                                                    "native engine stores ids densely")
    for tok in added:
        t = dict(tok)
        if t.get("content") in vocab:
            t["id"] = vocab[t["content"]]
        plan.added_tokens.append(t)
        n_ids = max(n_ids, int(t["id"]) + 1)
    if n_ids == 0:
        # Valid for tokenizers (`Tokenizer(BPE())` before any token is added); a cartridge needs ids.
        raise Unsupported("model.vocab", "the model's vocabulary is empty and no token is added")
    plan.n_ids = n_ids
    plan.vocab_strings += [None] * (n_ids - len(plan.vocab_strings))
    if plan.kind == "bpe_bytes":
        # What the ByteLevel decoder turns each token into: its bytes when every character is in
        # the byte-level alphabet, else its own UTF-8 (added tokens included). tokenizers gives an
        # added token with normalized=true the *normalized* content as its string (id_to_token,
        # decode), while token_to_id still takes the original content.
        by_id: list[str | None] = list(plan.vocab_strings)
        for tok in plan.added_tokens:
            by_id[int(tok["id"])] = added_token_string(tok, plan.normalizers)
        known, strings = plan.vocab_bytes, plan.vocab_strings
        plan.decode_bytes = [
            None if t is None
            else known[i] if i < len(known) and t is strings[i] and known[i] is not None
            else b if (b := _to_bytes(t)) is not None else _utf8(t)
            for i, t in enumerate(by_id)
        ]
    if plan.kind == "unigram" and plan.scores is not None:
        # Added tokens past the model's vocabulary have no score; +inf keeps them out of the
        # minimum the unk score derives from (they are never in the trie).
        plan.scores += [float("inf")] * (n_ids - len(plan.scores))
    return plan


def _plan_bpe(model: dict[str, Any], plan: NativePlan, byte_level: bool) -> dict[str, int]:
    if model.get("dropout") not in (None, 0, 0.0):
        raise Unsupported("model.dropout", "BPE dropout is random; only tokenizers reproduces it")
    if "vocab" not in model or "merges" not in model:
        raise ValueError("a BPE model needs both model.vocab and model.merges (tokenizers refuses it too)")
    vocab = _vocab_dict(model)
    plan.kind = "bpe_bytes" if byte_level else "bpe_chars"
    plan.byte_fallback = bool(model.get("byte_fallback", False))
    prefix = model.get("continuing_subword_prefix") or ""
    suffix = model.get("end_of_word_suffix") or ""
    _plan_text_vocab(vocab, plan, keys=not byte_level)
    if byte_level:
        if plan.byte_fallback:
            raise Unsupported("model.byte_fallback", "byte_fallback with a ByteLevel pre-tokenizer is not implemented natively")
        # Each token's bytes, once: the trie's keys here, the decoder's table in plan_native.
        strings = plan.vocab_strings
        plan.vocab_bytes = [None if t is None else _to_bytes(t) for t in strings]
        plan.byte_tokens = []
        for tok, i in vocab.items():
            # (strings[i] is tok unless two tokens share an id; the first then needs its own bytes)
            b = plan.vocab_bytes[i] if strings[i] is tok else _to_bytes(tok)
            if b:
                plan.byte_tokens.append((b, i))
        pb, sb = _to_bytes(prefix), _to_bytes(suffix)
        if pb is None or sb is None:
            raise Unsupported("model", "continuing_subword_prefix/end_of_word_suffix outside the byte-level alphabet")
        plan.prefix, plan.suffix = pb, sb
    else:
        if plan.byte_fallback and (prefix or suffix):
            raise Unsupported("model.byte_fallback", "byte_fallback with a subword prefix or suffix is not implemented natively")
        plan.prefix, plan.suffix = _utf8(prefix), _utf8(suffix)

    merges = model.get("merges") or []
    if not isinstance(merges, list):
        raise ValueError("model.merges must be a list")
    from crayon_hf._native import native

    # The native resolution is the same lookup in a hash table of UTF-8 keys (a half to a third of
    # the time); it leaves anything unusual, and every error, to _merge_ids.
    resolved = native.hf_merge_ids(vocab, merges, prefix) if isinstance(prefix, str) else None
    plan.merges = resolved if resolved is not None else _merge_ids(vocab, merges, prefix)

    unk = model.get("unk_token")
    if unk is not None:
        if unk not in vocab:
            # tokenizers loads such a file and fails only when a word needs the unk token.
            raise Unsupported("model.unk_token", f"{unk!r} is not in the vocabulary")
        plan.unk_id = vocab[unk]
    plan.fuse_unk = bool(model.get("fuse_unk", False))
    plan.ignore_merges = bool(model.get("ignore_merges", False))
    return vocab


def _plan_unigram(model: dict[str, Any], plan: NativePlan) -> dict[str, int]:
    pieces = model.get("vocab")
    if not isinstance(pieces, list):
        raise ValueError("model.vocab of a Unigram model must be a list of [token, score]")
    plan.kind = "unigram"
    vocab: dict[str, int] = {}  # token_to_ids: a repeated token keeps its last id, as in tokenizers
    scores: list[float] = []
    strings: list[str | None] = []
    for i, item in enumerate(pieces):
        if (not isinstance(item, (list, tuple)) or len(item) != 2 or not isinstance(item[0], str)
                or not isinstance(item[1], (int, float)) or isinstance(item[1], bool)):
            raise ValueError(f"model.vocab[{i}] must be [token, score], got {item!r}")
        vocab[item[0]] = i
        strings.append(item[0])
        scores.append(float(item[1]))
    unk = model.get("unk_id")
    if unk is None:
        raise Unsupported("model.unk_id", "a Unigram model without unk_id fails in tokenizers on unknown characters")
    if not isinstance(unk, int) or not 0 <= unk < len(pieces):
        raise ValueError(f"model.unk_id {unk!r} is out of range")
    plan.unk_id = unk
    plan.byte_fallback = bool(model.get("byte_fallback", False))
    plan.byte_tokens = [(_utf8(tok), i) for tok, i in vocab.items() if tok]
    plan.vocab_strings = strings
    plan.scores = scores
    return vocab


def build_hf_cartridge(source: str | bytes, plan: NativePlan, meta: dict[str, Any],
                       data: dict[str, Any] | None = None) -> bytes:
    """The cartridge image for a planned tokenizer.json (`source` is stored verbatim in TJSN).
    `data`: the parsed source, where the caller has it (parsing a large file again costs as much
    as a good part of the build).

    META carries everything the Python face needs at load, so loading never parses the
    (megabytes of) source JSON: the flattened pipeline, the added tokens, the post-processor,
    decoder, truncation and padding objects, and the model's vocabulary size."""
    from crayon_hf._native import native

    raw = source.encode("utf-8") if isinstance(source, str) else source
    if data is None:
        data = parse_tokenizer_json(raw)
    meta = dict(meta)
    meta.setdefault("source_sha256", hashlib.sha256(raw).hexdigest())
    meta["engine"] = "hf"
    # Format 3: the added tokens and Precompiled charsmaps live in sections of their own (HADJ,
    # HNnn), so META stays small and loading reads nothing proportional to them.
    meta["format"] = 3
    meta["model"] = plan.kind
    # The source's normalizer object is not copied: the engine runs the flattened `normalizers`,
    # and a Precompiled one would bring its whole charsmap, in base64, back into META.
    for key in ("post_processor", "decoder", "truncation", "padding"):
        meta[key] = data.get(key)
    vocab = data["model"].get("vocab")
    meta["model_vocab_size"] = len(vocab) if isinstance(vocab, (dict, list)) else 0
    # The character tables the engine reproduces tokenizers 0.23.3 with (each probed from it; see
    # docs/regex.md and docs/normalizers.md). The header's unicode_version is the regex classes'.
    meta["unicode"] = {
        "regex_classes": "16.0",
        "nfc_nfd_nfkc_nfkd": "9.0",
        "lowercase": "16.0",
        "added_token_word_characters": "16.0",
        "punctuation_pre_tokenizer": "tokenizers 0.23.3 is_punc table (older than 16.0)",
    }
    sections: dict[str, bytes] = {"HADJ": json.dumps(plan.added_tokens, ensure_ascii=False).encode("utf-8")}
    meta["normalizers"] = []
    for i, d in enumerate(plan.normalizers):
        if "charsmap" in d and i < 100:
            # The engine's lookup bitmaps are computed here, once, instead of at every load. A
            # charsmap tokenizers rejects stays in META, where loading refuses it as before.
            try:
                image = native.precompiled_section(base64.b64decode(d["charsmap"]))
            except ValueError:
                image = None
            if image is not None:
                sid = f"HN{i:02d}"
                sections[sid] = image
                d = {k: v for k, v in d.items() if k != "charsmap"}
                d["charsmap_section"] = sid
        meta["normalizers"].append(d)
    meta["normalizer_paths"] = plan.normalizer_paths
    meta["pre_tokenizers"] = plan.pre_tokenizers
    meta["pre_tokenizer_paths"] = plan.pre_tokenizer_paths
    model = {
        "kind": plan.kind,
        "byte_tokens": plan.byte_tokens,
        "merges": plan.merges,
        "scores": plan.scores,
        "n_ids": plan.n_ids,
        "unk_id": plan.unk_id,
        "fuse_unk": plan.fuse_unk,
        "ignore_merges": plan.ignore_merges,
        "byte_fallback": plan.byte_fallback,
        "prefix": plan.prefix,
        "suffix": plan.suffix,
        "max_input_chars_per_word": plan.max_input_chars_per_word,
    }
    # The added-token matchers, compiled: loading uses them in place whatever their number.
    components = engine_components(plan.normalizers)
    normalize = (lambda text: native.hf_normalize(components, text)) if components else (lambda text: text)
    try:
        model["added_raw"], model["added_normalized"], _ = added_token_rows(plan.added_tokens, normalize,
                                                                            plan.vocab_strings)
        meta["n_added_normalized"] = len(model["added_normalized"])
        sections["VSTI"] = _token_string_section(token_strings(plan.vocab_strings, plan.added_tokens, normalize))
    except (ValueError, native.UnsupportedComponent, PanicException):
        # A normalizer the engine refuses, or one that panics on a token's content: no HADR / HADN,
        # so loading builds the matchers itself and meets the same error where it met it before.
        model.pop("added_raw", None)
        model.pop("added_normalized", None)
    model["sections"] = sections
    return native.build_hf_cartridge(
        model,
        json.dumps(meta, ensure_ascii=False),
        raw,
        json.dumps(plan.vocab_strings, ensure_ascii=False).encode("utf-8"),
        plan.decode_bytes,
    )
