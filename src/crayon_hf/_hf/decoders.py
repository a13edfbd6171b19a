"""Decoders, built from the ``decoder`` object of a tokenizer.json, and `Tokenizer.decode`.

    ids --(id_to_token, drop unknown ids, skip special tokens)--> tokens
        --decoder.decode_chain--> pieces --"".join--> text       (no decoder: " ".join(tokens))

Mirrors tokenizers/src/decoders/*.rs, the decoder halves of pre_tokenizers/byte_level.rs and
pre_tokenizers/metaspace.rs, normalizers/replace.rs and `Tokenizer::decode`. Where `tokenizers`
panics (Strip on a too-short token) we raise `PanicException` too.

Supported: ByteLevel, Sequence, Replace (String patterns; Regex patterns only when they are
plain literals), Strip, Fuse, ByteFallback, Metaspace, WordPiece, BPEDecoder, CTC.
"""

from __future__ import annotations

import functools

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from .errors import PanicException, UnsupportedComponent, build_sequence

__all__ = [
    "Decoder",
    "build_decoder",
    "decode_ids",
    "skip_ids",
    "bytes_to_unicode",
]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (printable Latin-1 bytes map to themselves,
    the other 68 to U+0100 onwards in byte order)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table: dict[int, str] = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_CHAR_BYTES: dict[str, int] = {c: b for b, c in bytes_to_unicode().items()}


class Decoder:
    """Interface: `decode_chain(tokens) -> list[str]`; `decode` joins the chain's output."""

    def decode_chain(self, tokens: list[str]) -> list[str]:
        raise NotImplementedError

    def decode(self, tokens: Iterable[str]) -> str:
        return "".join(self.decode_chain(list(tokens)))


class ByteLevelDecoder(Decoder):
    """Map each character back to its byte; a token with any character outside the table
    contributes its own UTF-8 bytes. Bytes are decoded lossily (U+FFFD per maximal invalid
    subpart, as Rust's `from_utf8_lossy` and Python's 'replace' handler both do)."""

    _MAX_CACHE = 1 << 20

    def __init__(self) -> None:
        self._cache: dict[str, bytes] = {}

    def _token_bytes(self, token: str) -> bytes:
        out = self._cache.get(token)
        if out is None:
            try:
                out = bytes([_CHAR_BYTES[c] for c in token])
            except KeyError:
                out = token.encode("utf-8", "surrogatepass")
            if len(self._cache) < self._MAX_CACHE:
                self._cache[token] = out
        return out

    def decode_chain(self, tokens: list[str]) -> list[str]:
        cache = self._cache
        get = cache.get
        parts = [get(t) for t in tokens]
        if None in parts:
            parts = [p if p is not None else self._token_bytes(t) for p, t in zip(parts, tokens)]
        return [b"".join(parts).decode("utf-8", "replace")]  # type: ignore[arg-type]


class SequenceDecoder(Decoder):
    def __init__(self, decoders: list[Decoder]) -> None:
        self.decoders = decoders

    def decode_chain(self, tokens: list[str]) -> list[str]:
        for d in self.decoders:
            tokens = d.decode_chain(tokens)
        return tokens


class ReplaceDecoder(Decoder):
    """Replace every (leftmost, non-overlapping) occurrence of a literal in each token."""

    def __init__(self, pattern: str, content: str) -> None:
        self.pattern = pattern
        self.content = content

    def decode_chain(self, tokens: list[str]) -> list[str]:
        p, c = self.pattern, self.content
        return [t.replace(p, c) for t in tokens]


class StripDecoder(Decoder):
    """Remove up to `start` leading and `stop` trailing `content` characters of each token."""

    def __init__(self, content: str, start: int, stop: int) -> None:
        self.content, self.start, self.stop = content, start, stop

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        c = self.content
        for token in tokens:
            n = len(token)
            start_cut = 0
            for i in range(min(self.start, n)):
                if token[i] == c:
                    start_cut = i + 1
                else:
                    break
            stop_cut = n
            for i in range(self.stop):
                index = n - i - 1
                if index < 0:
                    raise PanicException(f"index out of bounds: the len is {n} but the index is {2**64 + index}")
                if token[index] == c:
                    stop_cut = index
                else:
                    break
            if start_cut > stop_cut:
                raise PanicException(f"slice index starts at {start_cut} but ends at {stop_cut}")
            out.append(token[start_cut:stop_cut])
        return out


class FuseDecoder(Decoder):
    def decode_chain(self, tokens: list[str]) -> list[str]:
        return ["".join(tokens)]


def _byte_token(token: str) -> int | None:
    """`<0xHH>` -> HH, parsed like Rust's `u8::from_str_radix(_, 16)` (an optional '+' sign)."""
    if len(token.encode("utf-8", "surrogatepass")) != 6 or not token.startswith("<0x") or not token.endswith(">"):
        return None
    digits = token[3:-1]
    if digits.startswith("+"):
        digits = digits[1:]
    if not digits or any(ch not in "0123456789abcdefABCDEF" for ch in digits):
        return None
    return int(digits, 16)


_byte_token_cached = functools.lru_cache(maxsize=1024)(_byte_token)
_CANONICAL_BYTE_TOKENS = {f"<0x{b:02X}>": b for b in range(256)}


class ByteFallbackDecoder(Decoder):
    """Runs of `<0xHH>` tokens become the string they encode, or one U+FFFD per byte when the
    run is not valid UTF-8 as a whole."""

    def decode_chain(self, tokens: list[str]) -> list[str]:
        if "<0x" not in "".join(tokens):
            return tokens  # no token can start with "<0x": nothing to do
        out: list[str] = []
        run = bytearray()
        canonical = _CANONICAL_BYTE_TOKENS
        for token in tokens:
            b = canonical.get(token)
            if b is None and token[:3] == "<0x":
                b = _byte_token_cached(token)  # other spellings: lowercase hex, a '+' sign
            if b is not None:
                run.append(b)
                continue
            if run:
                out.extend(_flush(run))
                run = bytearray()
            out.append(token)
        if run:
            out.extend(_flush(run))
        return out


def _flush(run: bytearray) -> list[str]:
    try:
        return [run.decode("utf-8")]
    except UnicodeDecodeError:
        return ["\ufffd"] * len(run)


class MetaspaceDecoder(Decoder):
    """Replacement character -> space, except in the first token when a prefix was prepended."""

    def __init__(self, replacement: str, prepend_scheme: str, split: bool = True) -> None:
        self.replacement, self.prepend_scheme, self.split = replacement, prepend_scheme, split

    def decode_chain(self, tokens: list[str]) -> list[str]:
        r = self.replacement
        out = [t.replace(r, " ") for t in tokens]
        if out and self.prepend_scheme != "never":
            out[0] = tokens[0].replace(r, "")
        return out


_CLEANUP = (
    (" .", "."),
    (" ?", "?"),
    (" !", "!"),
    (" ,", ","),
    (" ' ", "'"),
    (" n't", "n't"),
    (" 'm", "'m"),
    (" do not", " don't"),
    (" 's", "'s"),
    (" 've", "'ve"),
    (" 're", "'re"),
)


# Every cleanup pattern is a space followed by one of these: text without such a pair is left alone.
_CLEANUP_TRIGGER = re.compile(r" [.?!,'nd]")


def _cleanup(text: str) -> str:
    if _CLEANUP_TRIGGER.search(text) is None:
        return text
    for a, b in _CLEANUP:
        text = text.replace(a, b)
    return text


class WordPieceDecoder(Decoder):
    def __init__(self, prefix: str = "##", cleanup: bool = True) -> None:
        self.prefix, self.cleanup = prefix, cleanup

    def decode_chain(self, tokens: list[str]) -> list[str]:
        prefix, n = self.prefix, len(self.prefix)
        out = []
        for i, token in enumerate(tokens):
            if i != 0:
                token = token[n:] if token.startswith(prefix) else " " + token
            if self.cleanup:
                token = _cleanup(token)
            out.append(token)
        return out


class BPEDecoder(Decoder):
    """The end-of-word suffix becomes a space, except in the last token where it is dropped."""

    def __init__(self, suffix: str = "</w>") -> None:
        self.suffix = suffix

    def decode_chain(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [t.replace(self.suffix, "" if i == last else " ") for i, t in enumerate(tokens)]


class CTCDecoder(Decoder):
    """Collapse repeats, drop pad tokens, optionally clean up and turn delimiters into spaces."""

    def __init__(self, pad_token: str = "<pad>", word_delimiter_token: str = "|", cleanup: bool = True) -> None:
        self.pad_token, self.word_delimiter_token, self.cleanup = pad_token, word_delimiter_token, cleanup

    def decode_chain(self, tokens: list[str]) -> list[str]:
        out = []
        previous: str | None = None
        for i, token in enumerate(tokens):
            if i and token == previous:
                continue
            previous = token
            text = token.replace(self.pad_token, "")
            if self.cleanup:
                text = _cleanup(text).replace(self.word_delimiter_token, " ")
            if text:
                out.append(text)
        return out


# ---------------------------------------------------------------------------- building

_REGEX_META = set(".^$*+?()[]{}|\\")


def _literal_regex(pattern: str) -> str | None:
    """The literal an Oniguruma pattern matches when it is nothing but literal characters and
    backslash-escaped punctuation (then leftmost non-overlapping matching is `str.replace`);
    None for anything else, which we do not claim to reproduce."""
    out = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= len(pattern):
                return None
            nxt = pattern[i + 1]
            if nxt.isascii() and not nxt.isalnum() and nxt not in " \t\n\r" and nxt.isprintable():
                out.append(nxt)
                i += 2
                continue
            return None
        if ch in _REGEX_META:
            return None
        out.append(ch)
        i += 1
    return "".join(out)


def _char(value: Any, path: str, kind: str, field: str) -> str:
    if isinstance(value, str) and len(value) == 1:
        return value
    raise UnsupportedComponent(f"{path}.{field}", kind, f"given a {field} that is not one character ({value!r})")


def build_decoder(d: dict[str, Any] | None, path: str = "decoder") -> Decoder | None:
    """The decoder described by a tokenizer.json ``decoder`` object (None for null)."""
    if d is None:
        return None
    if not isinstance(d, dict):
        raise UnsupportedComponent(path, type(d).__name__, "not an object")
    kind = d.get("type")
    if kind == "ByteLevel":
        return ByteLevelDecoder()
    if kind == "Sequence":
        return SequenceDecoder(build_sequence(d, path, "decoders", build_decoder))
    if kind == "Replace":
        pattern = d.get("pattern")
        content = d.get("content")
        if not isinstance(pattern, dict) or len(pattern) != 1 or not isinstance(content, str):
            raise UnsupportedComponent(f"{path}.pattern", kind, f"given a pattern of unknown form ({pattern!r})")
        ((form, text),) = pattern.items()
        if not isinstance(text, str):
            raise UnsupportedComponent(f"{path}.pattern", kind, f"given a pattern of unknown form ({pattern!r})")
        literal = text if form == "String" else _literal_regex(text) if form == "Regex" else None
        if literal is None:
            raise UnsupportedComponent(f"{path}.pattern", f"Replace({form}={text!r})", "not proven equivalent")
        if literal == "":
            raise UnsupportedComponent(f"{path}.pattern", f"Replace({form}={text!r})", "an empty pattern, which is not supported")
        return ReplaceDecoder(literal, content)
    if kind == "Strip":
        return StripDecoder(_char(d.get("content"), path, kind, "content"), int(d.get("start", 0)), int(d.get("stop", 0)))
    if kind == "Fuse":
        return FuseDecoder()
    if kind == "ByteFallback":
        return ByteFallbackDecoder()
    if kind == "Metaspace":
        replacement = _char(d.get("replacement"), path, kind, "replacement")
        scheme = d.get("prepend_scheme", "always")
        if scheme not in ("first", "never", "always"):
            raise UnsupportedComponent(f"{path}.prepend_scheme", kind, f"given an unknown prepend_scheme ({scheme!r})")
        if d.get("add_prefix_space") is False:
            if scheme != "never":  # tokenizers refuses to load this (the scheme defaults to always)
                raise UnsupportedComponent(path, kind, "given add_prefix_space=false with a prepend_scheme other than never")
            scheme = "never"
        split = d.get("split")
        return MetaspaceDecoder(replacement, scheme, True if split is None else bool(split))
    if kind == "WordPiece":
        return WordPieceDecoder(str(d.get("prefix", "##")), bool(d.get("cleanup", True)))
    if kind == "BPEDecoder":
        return BPEDecoder(str(d.get("suffix", "</w>")))
    if kind == "CTC":
        return CTCDecoder(str(d.get("pad_token", "<pad>")), str(d.get("word_delimiter_token", "|")), bool(d.get("cleanup", True)))
    raise UnsupportedComponent(path, kind)


# ---------------------------------------------------------------------------- Tokenizer.decode


def skip_ids(id_to_token: Sequence[str | None], special_tokens: Iterable[str]) -> frozenset[int]:
    """The ids `decode(..., skip_special_tokens=True)` drops: every id whose token string is the
    content of a special added token (`tokenizers` tests the string, not the id). Compute once
    per tokenizer; `special_tokens` are the contents of the added tokens marked special."""
    specials = set(special_tokens)
    if not specials:
        return frozenset()
    return frozenset(i for i, t in enumerate(id_to_token) if t is not None and t in specials)


def _check_u32(i: Any) -> int:
    if isinstance(i, bool) or not isinstance(i, int):
        try:
            i = i.__index__()
        except AttributeError:
            raise TypeError(f"'{type(i).__name__}' object cannot be interpreted as an integer") from None
    if i < 0:
        raise OverflowError("number too small to fit in target type")
    if i > 0xFFFFFFFF:
        raise OverflowError("number too large to fit in target type")
    return i


def decode_ids(
    ids: Iterable[int],
    skip_special_tokens: bool,
    id_to_token: Sequence[str | None],
    special_ids: Collection[int],
    decoder: Decoder | None,
) -> str:
    """`Tokenizer.decode`: ids with no token are dropped, special ones too when asked
    (`special_ids` from `skip_ids`), then the decoder (or a plain " ".join) runs."""
    ids = list(ids)
    n = len(id_to_token)
    try:
        # Fast path: a list of in-range Python ints.
        if skip_special_tokens and special_ids:
            tokens = [id_to_token[i] for i in ids if i not in special_ids and 0 <= i < n]
        else:
            tokens = [id_to_token[i] for i in ids if 0 <= i < n]
        if ids and (min(ids) < 0 or max(ids) > 0xFFFFFFFF):
            raise TypeError
    except TypeError:
        checked = [_check_u32(i) for i in ids]
        return decode_ids(checked, skip_special_tokens, id_to_token, special_ids, decoder)
    if None in tokens:
        tokens = [t for t in tokens if t is not None]
    if decoder is not None:
        return decoder.decode(tokens)  # type: ignore[arg-type]
    return " ".join(tokens)  # type: ignore[arg-type]
