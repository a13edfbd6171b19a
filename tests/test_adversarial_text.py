"""Adversarial text on every face, compared with the reference's output or its error.

Families: long runs without spaces (one letter, alternating pairs, digits, CJK, emoji, random
bytes decoded as Latin-1), runs of whitespace (spaces, tabs, newlines, mixed, \\r\\n, U+3000, NBSP),
combining marks ('a' + U+0301 x n), every scalar value (in chunks), NUL bytes, lone surrogates,
and invalid UTF-8 where a face takes bytes (EncodeStream.feed_bytes, tiktoken decode of partial
tokens). The default run uses N_DEFAULT characters per family; `-m full` uses N_FULL.
At 10 MB the references can be quadratic, so there the tiktoken face is compared with our slow
oracle (tests/slow_bpe.py) instead, under `-m full`.
"""

from __future__ import annotations

import random
import warnings
from typing import Any, Callable

import pytest

from support import VOCAB, our_encoding, reference_encoding, require_module, require_shared

N_DEFAULT = 4_000
N_FULL = 100_000


def _random_chars(n: int, pick: Callable[[random.Random], str]) -> str:
    rng = random.Random(8)
    return "".join(pick(rng) for _ in range(n))


# Each family: n -> a text of about n characters.
FAMILIES: dict[str, Callable[[int], str]] = {
    "letter": lambda n: "a" * n,
    "pairs": lambda n: "ab" * (n // 2),
    "digits": lambda n: "1234567890" * (n // 10),
    "cjk": lambda n: _random_chars(n, lambda r: chr(0x4E00 + r.randrange(0x5000))),
    "emoji": lambda n: "🙂👍🏽👨‍👩‍👧" * (n // 8),
    "random_latin1": lambda n: random.Random(8).randbytes(n).decode("latin-1"),
    "spaces": lambda n: " " * n,
    "tabs": lambda n: "\t" * n,
    "newlines": lambda n: "\n" * n,
    "crlf": lambda n: "\r\n" * (n // 2),
    "mixed_ws": lambda n: _random_chars(n, lambda r: r.choice(" \t\n\r\u3000\u00a0\u2003")),
    "ideographic_space": lambda n: "\u3000" * n,
    "nbsp": lambda n: "\u00a0" * n,
    "combining": lambda n: "a" + "\u0301" * n,
    "combining_words": lambda n: "e\u0301\u0302\u0303 " * (n // 5),
    "nul": lambda n: "\x00" * n,
    "nul_mixed": lambda n: "ab\x00c " * (n // 5),
}


def _families(n: int) -> dict[str, str]:
    return {name: make(n) for name, make in FAMILIES.items()}


def _all_code_points(chunk: int) -> list[str]:
    scalars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    return ["".join(scalars[i : i + chunk]) for i in range(0, len(scalars), chunk)]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except BaseException as e:  # noqa: BLE001 - references raise Exception / PanicException
        return e


def _same(ours: Callable[[], Any], ref: Callable[[], Any]) -> None:
    expected = _outcome(ref)
    if isinstance(expected, BaseException):
        with pytest.raises(Exception):
            ours()
    else:
        assert ours() == expected


# --- tiktoken face --------------------------------------------------------------------------

TIKTOKEN = ["cl100k_base", "o200k_base", "r50k_base"]


def _check_tiktoken(name: str, n: int) -> None:
    require_module("tiktoken")
    ref, ours = reference_encoding(name), our_encoding(name)
    for family, text in _families(n).items():
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text), family
        assert ours.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all"), family


@pytest.mark.parametrize("name", TIKTOKEN)
def test_tiktoken_adversarial_runs(name: str) -> None:
    _check_tiktoken(name, N_DEFAULT)


@pytest.mark.full
@pytest.mark.parametrize("name", TIKTOKEN)
def test_tiktoken_adversarial_runs_full(name: str) -> None:
    _check_tiktoken(name, N_FULL)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_tiktoken_every_code_point(name: str) -> None:
    ref, ours = reference_encoding(name), our_encoding(name)
    for chunk in _all_code_points(4096):
        ids = ref.encode_ordinary(chunk)
        assert ours.encode_ordinary(chunk) == ids
        assert ours.decode(ids) == chunk


def test_tiktoken_lone_surrogates_and_bytes() -> None:
    """tiktoken replaces lone surrogates with U+FFFD on encode; decode of a partial UTF-8 sequence
    follows `errors`; decode_bytes gives the raw bytes."""
    ref, ours = reference_encoding("cl100k_base"), our_encoding("cl100k_base")
    for text in ["\ud800", "a\udfffb", "\ud83d\ude42", "x\ud800" * 1000, "\udc00\ud800"]:
        _same(lambda: ours.encode(text), lambda: ref.encode(text))
        _same(lambda: ours.encode_ordinary(text), lambda: ref.encode_ordinary(text))
        _same(lambda: ours.encode_batch([text, "ok"]), lambda: ref.encode_batch([text, "ok"]))
    emoji = ref.encode("🙂")
    for ids in ([emoji[0]], emoji[:1] * 7, [emoji[0], 0, emoji[-1]]):
        assert ours.decode_bytes(ids) == ref.decode_bytes(ids)
        for errors in ("replace", "ignore", "strict", "surrogateescape"):
            _same(lambda: ours.decode(ids, errors=errors), lambda: ref.decode(ids, errors=errors))


def test_stream_feed_bytes_invalid_utf8() -> None:
    """EncodeStream.feed_bytes: valid UTF-8 split anywhere equals encode_ordinary; invalid UTF-8
    raises UnicodeDecodeError, as its docstring promises (bytes.decode's behaviour)."""
    from crayon_hf.streaming import EncodeStream

    ours = our_encoding("cl100k_base")
    text = _families(2000)["emoji"] + _families(2000)["cjk"]
    data = text.encode("utf-8")
    stream = EncodeStream(ours)
    out: list[int] = []
    for i in range(0, len(data), 7):
        out += stream.feed_bytes(data[i : i + 7])
    out += stream.finish()
    assert out == reference_encoding("cl100k_base").encode_ordinary(text)
    for bad in (b"\xff", b"a\xc3(", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"):
        with pytest.raises(UnicodeDecodeError):
            s = EncodeStream(ours)
            s.feed_bytes(bad)
            s.finish()


# --- Tokenizer face: one folder per model family ------------------------------------------------

HF = ["gpt2", "mistral_v0_1", "t5_small", "bert_base_uncased"]
_HF_CACHE: dict[str, Any] = {}


def _hf_pair(folder: str) -> tuple[Any, Any]:
    if folder not in _HF_CACHE:
        tokenizers = require_module("tokenizers")
        import crayon_hf

        path = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
        _HF_CACHE[folder] = (tokenizers.Tokenizer.from_file(str(path)), crayon_hf.Tokenizer.from_file(path))
    return _HF_CACHE[folder]


def _check_hf(folder: str, n: int) -> None:
    ref, ours = _hf_pair(folder)
    assert ours._backend == "native", ours._backend
    for family, text in _families(n).items():
        expected = ref.encode(text)
        got = ours.encode(text)
        assert got.ids == expected.ids, family
        assert got.offsets == expected.offsets, family
        assert ours.decode(expected.ids) == ref.decode(expected.ids), family


@pytest.mark.parametrize("folder", HF)
def test_tokenizer_adversarial_runs(folder: str) -> None:
    _check_hf(folder, N_DEFAULT // 2)


@pytest.mark.full
@pytest.mark.parametrize("folder", HF)
def test_tokenizer_adversarial_runs_full(folder: str) -> None:
    _check_hf(folder, N_FULL)


@pytest.mark.parametrize("folder", HF)
def test_tokenizer_every_code_point(folder: str) -> None:
    ref, ours = _hf_pair(folder)
    chunks = _all_code_points(8192)
    assert ours.encode_batch(chunks) and [e.ids for e in ours.encode_batch(chunks)] == [
        e.ids for e in ref.encode_batch(chunks)]


@pytest.mark.parametrize("folder", HF)
def test_tokenizer_lone_surrogates(folder: str) -> None:
    """tokenizers cannot take a str with a lone surrogate (pyo3 refuses to convert it): neither can we."""
    ref, ours = _hf_pair(folder)
    for text in ["\ud800", "a\udfffb", "x\ud800" * 100]:
        _same(lambda: ours.encode(text).ids, lambda: ref.encode(text).ids)
        _same(lambda: [e.ids for e in ours.encode_batch([text, "ok"])],
              lambda: [e.ids for e in ref.encode_batch([text, "ok"])])


# --- transformers face on one folder -------------------------------------------------------------

def test_crayon_tokenizer_adversarial_runs() -> None:
    transformers = require_module("transformers")
    from crayon_hf.transformers import CrayonTokenizer

    path = require_shared(VOCAB / "hf" / "gpt2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = transformers.AutoTokenizer.from_pretrained(path)
        ours = CrayonTokenizer.from_pretrained(path)
    for family, text in _families(N_DEFAULT // 4).items():
        assert ours(text)["input_ids"] == ref(text)["input_ids"], family
        ids = ref(text)["input_ids"]
        assert ours.decode(ids) == ref.decode(ids), family
    for text in ["\ud800", "a\udfffb"]:
        _same(lambda: ours(text)["input_ids"], lambda: ref(text)["input_ids"])


# --- 10 MB: our slow oracle, since the references can be quadratic there -------------------------

@pytest.mark.full
@pytest.mark.parametrize("family", ["letter", "pairs", "spaces", "mixed_ws", "combining", "cjk", "random_latin1"])
def test_tiktoken_10mb_against_slow_oracle(family: str) -> None:
    from slow_bpe import SlowBPE

    ours = our_encoding("cl100k_base")
    oracle = SlowBPE.from_encoding(reference_encoding("cl100k_base"))
    text = FAMILIES[family](10_000_000)
    assert ours.encode_ordinary(text) == oracle.encode(text)


def test_slow_oracle_matches_tiktoken() -> None:
    """The oracle itself, on real text and the adversarial families, against the real tiktoken."""
    from slow_bpe import SlowBPE

    from support import corpus_files, corpus_text

    for name in ("cl100k_base", "r50k_base"):
        ref = reference_encoding(name)
        oracle = SlowBPE.from_encoding(ref)
        texts = [corpus_text(p, 20_000) for p in corpus_files()[:3]] + list(_families(2000).values())
        for text in texts:
            assert oracle.encode(text) == ref.encode_ordinary(text)
