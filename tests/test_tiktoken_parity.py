"""Token parity with the real tiktoken on every rank file in ../shared/vocab/tiktoken.

Every assertion compares our ids with tiktoken's for the same input: corpus samples, thousands of
random slices, hypothesis-generated Unicode, special-token cases and long pathological pieces.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import (
    CORPORA,
    TIKTOKEN_VOCABS,
    corpus_files,
    corpus_text,
    our_encoding,
    random_slices,
    reference_encoding,
    short_docs,
)


def assert_same(ref, ours, text: str) -> None:
    expected = ref.encode_ordinary(text)
    got = ours.encode_ordinary(text)
    if got != expected:
        # Find the first differing position to make the failure readable.
        i = next((k for k, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
        context = ref.decode(expected[max(0, i - 5) : i + 5])
        pytest.fail(
            f"{ref.name}: ids differ at token {i} near {context!r}\n"
            f"  tiktoken: {expected[max(0, i - 5) : i + 5]}\n  crayon:   {got[max(0, i - 5) : i + 5]}"
        )


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_sample(pair, path):
    ref, ours = pair
    assert_same(ref, ours, corpus_text(path))


def test_short_docs(pair):
    ref, ours = pair
    docs = short_docs(2000)
    assert ours.encode_ordinary_batch(docs) == [ref.encode_ordinary(d) for d in docs]


def test_random_slices(pair):
    ref, ours = pair
    slices = []
    for i, path in enumerate(corpus_files()):
        slices += random_slices(corpus_text(path, 64 * 1024), 300, seed=i)
    assert len(slices) >= 3000
    assert ours.encode_ordinary_batch(slices) == ref.encode_ordinary_batch(slices)


# Characters chosen to hit every branch of the four split patterns: letters of every case class,
# marks, digits of several scripts, the contraction letters and U+017F (long s, which (?i) matches),
# every kind of whitespace, punctuation and slashes, CJK, emoji and the edges of UTF-8 lengths.
ALPHABET = list(
    "aAbsStTdDmMlLvVeErR'’ſ0123456789٣७" " \t\r\n\u00a0\u3000\u2028\u0085\x0b\x0c"
    ".,!?;:/\\-_()[]{}<>|\"#$%&*+=@^`~"
    "\u0301\u0308\u20dd\u0903"  # marks (Mn, Me, Mc)
    "ǅᾈ"  # title case
    "ʰˆ々"  # modifier letters
    "中文日本語한국어ไทย"  # other letters
    "ßéÉñÑøØ"
    "ΑαΩω"
    "😀👍🏽\U0001f9d1\u200d\U0001f4bb"
    "\u0000\u007f\u0080\u07ff\u0800\uffff\U00010000\U0010ffff"
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ALPHABET), min_size=0, max_size=40).map("".join))
def test_hypothesis_alphabet(text):
    for name in TIKTOKEN_VOCABS:
        assert_same(reference_encoding(name), our_encoding(name), text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=60))
def test_hypothesis_any_unicode(text):
    for name in TIKTOKEN_VOCABS:
        assert_same(reference_encoding(name), our_encoding(name), text)


PATHOLOGICAL = [
    "a" * 100_000,
    " " * 100_000,
    "\n" * 50_000,
    " \n" * 30_000,
    "1" * 100_000,
    "中" * 50_000,
    "\u0301" * 30_000,
    "a\u0301" * 30_000,
    "!" * 100_000,
    "'s" * 30_000,
    "".join(chr(c) for c in range(0x20, 0x3000) if not 0xD800 <= c < 0xE000),
    "AbC" * 30_000 + "  x",
    "\t " * 40_000 + "x",
]


@pytest.mark.parametrize("index", range(len(PATHOLOGICAL)))
def test_long_pathological_pieces(pair, index):
    ref, ours = pair
    assert_same(ref, ours, PATHOLOGICAL[index])


def test_ascii_pieces_around_the_quadratic_loops_limit(pair):
    """ASCII pieces of 9 to 30 bytes: up to 24 they take the quadratic merge loop, past it
    backtracking (models/piece_encoder.h, prefers_small). Rare words made of real ones, random
    letters, identifiers, punctuation runs, each piece new to the caches and also met again; and
    the words with one accented letter (two bytes: still the loop, is_mostly_ascii) or two (the
    other scripts' path)."""
    ref, ours = pair
    rng = random.Random(24)
    words = corpus_text(CORPORA / "en_gutenberg_big.txt", 60_000).split()
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    pieces = []
    for n in range(9, 31):
        for _ in range(40):
            glued = "".join(rng.choice(words) for _ in range(4)).strip(".,;:!?\"'()")[:n]
            cut = rng.randrange(len(glued) - 1) if len(glued) > 1 else 0
            pieces += [
                glued,
                glued[:cut] + rng.choice("éüñçà") + glued[cut + 1:],
                glued[:cut] + "öß" + glued[cut + 2:],
                "".join(rng.choice(alphabet) for _ in range(n)),
                "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(n)),
                "".join(rng.choice("=-*#~+/") for _ in range(n)),
            ]
    for piece in pieces:
        assert_same(ref, ours, " " + piece)
    text = " ".join(pieces)
    assert_same(ref, ours, text)
    assert_same(ref, ours, text)  # now every piece is in the caches


def test_random_bytes_as_text(pair):
    ref, ours = pair
    rng = random.Random(7)
    for _ in range(200):
        text = bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))).decode("utf-8", errors="replace")
        assert_same(ref, ours, text)


# ---- special tokens ----------------------------------------------------------------------


def special_texts(ref) -> list[str]:
    specials = sorted(ref.special_tokens_set)[:6]
    a, b = specials[0], specials[-1]
    return [
        a,
        f"hello {a} world",
        f"{a}{b}{a}",
        f"{a}{a}",
        f"  {a}  ",
        f"x\n\n{a}\n\ny",
        f"<|{a}|>",
        a[:-1] + " " + a,
        f"{a[:3]}{a}{a[3:]}",
        "no specials here",
        f"{b}start",
        f"end{b}",
    ]


def test_special_allowed_all(pair):
    ref, ours = pair
    for text in special_texts(ref):
        assert ours.encode(text, allowed_special="all") == ref.encode(text, allowed_special="all")


def test_special_allowed_subset(pair):
    ref, ours = pair
    a = sorted(ref.special_tokens_set)[0]
    for text in special_texts(ref):
        kwargs = dict(allowed_special={a}, disallowed_special=())
        assert ours.encode(text, **kwargs) == ref.encode(text, **kwargs)


def test_special_disallowed_raises_same_error(pair):
    ref, ours = pair
    for text in special_texts(ref):
        for kwargs in [{}, {"allowed_special": set(sorted(ref.special_tokens_set)[:1])}, {"disallowed_special": "all"}]:
            try:
                expected = ref.encode(text, **kwargs)
            except ValueError as e:
                with pytest.raises(ValueError) as got:
                    ours.encode(text, **kwargs)
                assert str(got.value) == str(e)
            else:
                assert ours.encode(text, **kwargs) == expected


def test_special_ordinary_text(pair):
    ref, ours = pair
    for text in special_texts(ref):
        assert ours.encode(text, disallowed_special=()) == ref.encode(text, disallowed_special=())
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text)


def test_disallowed_arbitrary_strings():
    ref, ours = reference_encoding("cl100k_base"), our_encoding("cl100k_base")
    for text in ["hello world", "say foo now", "<|endoftext|> foo"]:
        for disallowed in [("foo",), ("foo", "<|endoftext|>"), frozenset({"wor"})]:
            try:
                expected = ref.encode(text, disallowed_special=disallowed)
            except ValueError as e:
                with pytest.raises(ValueError, match="disallowed special token") as got:
                    ours.encode(text, disallowed_special=disallowed)
                assert str(got.value) == str(e)
            else:
                assert ours.encode(text, disallowed_special=disallowed) == expected


def test_special_batch(pair):
    ref, ours = pair
    texts = special_texts(ref)
    assert ours.encode_batch(texts, allowed_special="all") == ref.encode_batch(texts, allowed_special="all")
    with pytest.raises(ValueError) as e1:
        ref.encode_batch(texts)
    with pytest.raises(ValueError) as e2:
        ours.encode_batch(texts)
    assert str(e1.value) == str(e2.value)


def test_harmony_specials():
    ref = reference_encoding("o200k_base")
    import tiktoken

    from crayon_hf.tiktoken import get_encoding
    from crayon_hf.tiktoken._encodings import KNOWN_ENCODINGS

    k = KNOWN_ENCODINGS["o200k_harmony"]
    harmony_ref = tiktoken.Encoding(
        "o200k_harmony", pat_str=k.pat_str, mergeable_ranks=ref._mergeable_ranks, special_tokens=k.special_tokens
    )
    ours = get_encoding("o200k_harmony")
    text = "<|start|>user<|message|>Hi there<|end|><|start|>assistant<|channel|>final<|message|>Hello<|return|><|reserved_201000|>"
    assert ours.encode(text, allowed_special="all") == harmony_ref.encode(text, allowed_special="all")
    assert ours.n_vocab == harmony_ref.n_vocab == 201088
    assert ours.decode(ours.encode(text, allowed_special="all")) == text


# ---- lone surrogates ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["a\ud800b", "\ud83d\ude00", "x\udfff", "\ud800", "\ud83d\ude00\ud800 \udc00", "<|endoftext|>\ud800"]
)
def test_surrogates(pair, text):
    ref, ours = pair
    assert ours.encode_ordinary(text) == ref.encode_ordinary(text)
    for kwargs in [{"disallowed_special": ()}, {"allowed_special": "all"}]:
        assert ours.encode(text, **kwargs) == ref.encode(text, **kwargs)
    assert ours.encode_batch([text, "ok"], disallowed_special=()) == ref.encode_batch([text, "ok"], disallowed_special=())
    assert ours.encode_ordinary_batch([text]) == ref.encode_ordinary_batch([text])
    with pytest.raises(UnicodeEncodeError):
        ref.encode_to_numpy(text, disallowed_special=())
    with pytest.raises(UnicodeEncodeError):
        ours.encode_to_numpy(text, disallowed_special=())


# ---- decode ------------------------------------------------------------------------------


def test_decode_roundtrip(pair):
    ref, ours = pair
    text = corpus_text(corpus_files()[0], 32 * 1024)
    ids = ref.encode_ordinary(text)
    assert ours.decode(ids) == ref.decode(ids) == text
    assert ours.decode_bytes(ids) == ref.decode_bytes(ids)
    assert ours.decode_tokens_bytes(ids[:500]) == ref.decode_tokens_bytes(ids[:500])
    assert ours.decode_with_offsets(ids[:500]) == ref.decode_with_offsets(ids[:500])
    rng = random.Random(3)
    partial = [rng.randrange(ref.n_vocab - 300) for _ in range(2000)]
    assert ours.decode(partial) == ref.decode(partial)
    assert ours.decode(partial, errors="ignore") == ref.decode(partial, errors="ignore")


# ---- whole corpora (pytest -m full) ------------------------------------------------------


@pytest.mark.full
@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_full_corpus(pair, path):
    ref, ours = pair
    text = corpus_text(path, None)
    assert_same(ref, ours, text)


@pytest.mark.full
def test_full_short_docs(pair):
    ref, ours = pair
    docs = short_docs(None)
    assert ours.encode_ordinary_batch(docs) == ref.encode_ordinary_batch(docs)
