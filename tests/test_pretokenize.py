"""Differential tests: the native pre-tokenizer scanners against tiktoken's own regex.

The oracle is exact. For strings s, build a tiktoken Encoding whose vocabulary holds every
single byte plus every substring of s.encode() that starts and ends on a character boundary.
tiktoken maps a pre-token that is in the vocabulary straight to one token, and every pre-token is
such a substring, so decoding each token of `encode_ordinary(s)` gives tiktoken's pieces exactly.
One vocabulary can serve a whole batch of strings (the union of their substrings), which is how
the corpus slices are checked cheaply.

The scanners are reached as `crayon_hf._crayon.split_pieces(pattern, text)`; set
CRAYON_PRETOKENIZE_MODULE to a module name to test a scratch build instead.
"""
from __future__ import annotations

import importlib
import os
import random
from functools import lru_cache
from pathlib import Path

import pytest

tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is the reference for pre-tokenization")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

PATTERN_NAMES = ("r50k", "cl100k", "o200k", "llama3")
LLAMA3_PAT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def _split_pieces():
    name = os.environ.get("CRAYON_PRETOKENIZE_MODULE")
    if name:
        return importlib.import_module(name).split_pieces
    from crayon_hf._crayon import split_pieces

    return split_pieces


split_pieces = _split_pieces()


def _patterns() -> dict[str, str]:
    """The patterns of the installed tiktoken, read without downloading any rank file."""
    import tiktoken_ext.openai_public as op

    original = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *args, **kwargs: {}
    try:
        pats = {
            "r50k": op.r50k_base()["pat_str"],
            "cl100k": op.cl100k_base()["pat_str"],
            "o200k": op.o200k_base()["pat_str"],
        }
    finally:
        op.load_tiktoken_bpe = original
    pats["llama3"] = LLAMA3_PAT
    return pats


PATTERNS = _patterns()
BYTE_RANKS = {bytes([b]): b for b in range(256)}


def _boundaries(b: bytes) -> list[int]:
    return [i for i in range(len(b) + 1) if i == len(b) or (b[i] & 0xC0) != 0x80]


def oracle_batch(pattern: str, texts: list[str]) -> list[list[tuple[int, int]]]:
    """tiktoken's exact pieces of each text, as byte offsets."""
    ranks = dict(BYTE_RANKS)
    for s in texts:
        b = s.encode()
        bounds = _boundaries(b)
        for x, start in enumerate(bounds):
            for end in bounds[x + 1:]:
                if end - start > 1:
                    ranks.setdefault(b[start:end], len(ranks))
    enc = tiktoken.Encoding("oracle", pat_str=PATTERNS[pattern], mergeable_ranks=ranks,
                            special_tokens={})
    out = []
    for s in texts:
        pieces, pos = [], 0
        for tok in enc.encode_ordinary(s):
            n = len(enc.decode_single_token_bytes(tok))
            pieces.append((pos, pos + n))
            pos += n
        assert pos == len(s.encode())
        out.append(pieces)
    return out


def show(s: str, pieces) -> list[str]:
    b = s.encode()
    return [b[x:y].decode("utf-8", "backslashreplace") for x, y in pieces]


def assert_same(pattern: str, texts: list[str]) -> None:
    for s, want in zip(texts, oracle_batch(pattern, texts)):
        got = [tuple(p) for p in split_pieces(pattern, s)]
        assert got == want, f"{pattern} {s!r}: got {show(s, got)} want {show(s, want)}"


# --- hand-picked cases, including the ones the scanner comments reason about -------------------

CASES = [
    "", "a", " ", "  ", "\n", "a \n  ", "a  b", "a\t\tb", "a \n b", "\n\n a", " \n\n", "\r\n\r\n  x",
    "hello world", "Hello, World!", "don't DON'T you'll YOU'LL I'm i'M we've WE'VE she'd SHE'D",
    "'s 's 'S 'ſ 'll 'lL 'Re 're 've 'x ''s", "x'ſ X'ſ", "'", "''", "'l", "'r", "'v e",
    "1234567", "12 345 6789 ١٢٣٤٥", " 1", "  1", "a1b2", "Ⅻ½٣",
    "中A.", "中AB.", "AªB.", "ªAB", "\u0301AB", "\u0301ab", " \u0301AB", "A\u0301", "a\u0301b",
    "\u0301\u0301\u0301", "ǅungla", "ʰA", "Aʰ", "AʰB", "ABCʰDEF.", "ÀÉÎ'S", "Àé's", "ßSS",
    "/\n/\n", "a/\n/b", " //\n\n", "?!\r\n\r\nx", "!!\n\n  ", "...\n",
    "\u00a0a", "\u3000中文", "a\u2028b", "a \u2028\u2028 b", "\u0085x", "\x0b\x0c",
    "😀😀 👍🏽 a😀b", "\u200d\u200b\ufeff", "tab\there", "\ttab", " \t\n \t\n x",
    "x   ", "x\n   ", "x \n \n ", "中文字符测试。标点！", "日本語のテキスト、カタカナー",
]


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_cases(pattern):
    assert_same(pattern, CASES)


# --- hypothesis: strings from an alphabet built to hit every branch -----------------------------

ATOMS = [
    *"aAsStTdDmMlLvVeErRzZ", *"0123456789", *"!.,?-/\"()#", "'", "'", "'s", "'S", "'t", "'T",
    "'re", "'RE", "'rE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'lL", "'d", "'D", "'ſ", "ſ",
    "\u212a", " ", " ", " ", "  ", "\t", "\r", "\n", "\r\n", " \n",
    "\u0301", "\u0300", "\u20dd", "\u0903", "\u093f",  # Mn Mn Me Mc Mc
    "À", "Σ", "Ж", "ǅ", "ᾈ", "ʰ", "ー", "ª", "中", "文", "한", "א", "ß", "é", "ж", "ω",
    "٣", "೬", "Ⅻ", "½", "²",  # Nd Nd Nl No No
    "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\x0b", "\x0c", "\u1680", "\u202f",
    "😀", "👍🏽", "\u200d", "\u200b", "\ufeff", "\x00", "\x7f", "\U0001e900",
]

EXAMPLES = int(os.environ.get("CRAYON_PRETOKENIZE_EXAMPLES", "400"))
texts = st.lists(st.sampled_from(ATOMS), max_size=24).map("".join).filter(lambda s: len(s) <= 48)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=texts)
def test_hypothesis_atoms(pattern, s):
    assert_same(pattern, [s])


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_ascii_runs_eight_at_a_time(pattern):
    # The scanners take ASCII letter runs eight bytes per step: runs of every length from 1 to 20,
    # ending at every offset of an 8-byte window, at the end of the text, before a non-ASCII
    # letter, mark or space, in either case and mixed case.
    rng = random.Random(8)
    after = ["", " ", ".", "'s", "'LL", "é", "É", "\u0301", "中", "ʰ", "\u00a0", "1", "\n", "ß", "\x7f"]
    texts = []
    for length in range(1, 21):
        for case in (str.lower, str.upper, str.title, lambda w: "".join(rng.choice([c.lower(), c.upper()]) for c in w)):
            for tail in after:
                word = case("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(length)))
                for lead in ("", " ", "  ", ",", "é", "x" * rng.randrange(0, 9)):
                    texts.append(lead + word + tail)
    assert_same(pattern, texts)


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(s=st.text(st.characters(exclude_categories=["Cs"]), max_size=24))
def test_hypothesis_any_text(pattern, s):
    assert_same(pattern, [s])


# --- random samples of every character class --------------------------------------------------

@lru_cache(maxsize=None)
def class_members() -> dict[str, list[str]]:
    """Members of each class, probed from tiktoken itself (all code points but surrogates)."""
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    out = {}
    for cls in (r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}", r"\p{N}", r"\s",
                r"[^\s\p{L}\p{N}\p{M}]"):
        enc = tiktoken.Encoding("probe", pat_str=cls, mergeable_ranks=BYTE_RANKS, special_tokens={})
        out[cls] = sorted(set(enc.decode_bytes(enc.encode_ordinary(every)).decode()))
    return out


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_class_samples(pattern):
    rng = random.Random(f"classes-{pattern}")
    members = class_members()
    classes = list(members)
    glue = [" ", "'", "'s", "'LL", "\n", "/", "a", "A", "1"]
    batch = []
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.25:
                parts.append(rng.choice(glue))
            else:
                parts.append(rng.choice(members[rng.choice(classes)]))
        batch.append("".join(parts))
    for i in range(0, len(batch), 50):
        assert_same(pattern, batch[i:i + 50])


# --- real text -------------------------------------------------------------------------------

def _corpus_files() -> list[Path]:
    if not CORPORA.is_dir():
        if os.environ.get("CRAYON_REQUIRE_SHARED") == "1":
            pytest.fail(f"{CORPORA} is missing and CRAYON_REQUIRE_SHARED=1")
        pytest.skip(f"shared corpora not found at {CORPORA} (a user's checkout has none)")
    return sorted(p for p in CORPORA.glob("*.txt"))


def _slices(path: Path, count: int, rng: random.Random) -> list[str]:
    with open(path, "rb") as f:
        data = f.read(1 << 20).decode("utf-8", "ignore")
    out = []
    for _ in range(count):
        start = rng.randrange(max(1, len(data) - 48))
        out.append(data[start:start + rng.randint(8, 44)])
    return out


# Environment knobs for a longer run: CRAYON_PRETOKENIZE_SLICES (per corpus file and pattern) and
# CRAYON_PRETOKENIZE_EXAMPLES (hypothesis examples per pattern).
SLICES_PER_FILE = int(os.environ.get("CRAYON_PRETOKENIZE_SLICES", "400"))


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_corpus_slices(pattern):
    for path in _corpus_files():
        batch = _slices(path, SLICES_PER_FILE, random.Random(f"{path.name}-{pattern}"))
        for i in range(0, len(batch), 100):
            assert_same(pattern, batch[i:i + 100])


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
def test_corpus_prefix_covers(pattern):
    """Whole-corpus prefixes split into contiguous pieces on character boundaries."""
    for path in _corpus_files():
        text = path.read_bytes()[: 1 << 18].decode("utf-8", "ignore")
        _assert_cover(text, split_pieces(pattern, text))


# --- linear time on long runs ----------------------------------------------------------------

def _assert_cover(text: str, pieces) -> None:
    b = text.encode()
    pos = 0
    for x, y in pieces:
        assert x == pos and y > x
        assert y == len(b) or (b[y] & 0xC0) != 0x80, "piece ends inside a character"
        pos = y
    assert pos == len(b)


LONG_RUNS = {
    "letters": "a", "upper": "A", "marks": "\u0301", "digits": "7", "spaces": " ", "tabs": "\t",
    "newlines": "\n", "space_newline": " \n", "punct": "!", "slash_nl": "/\n", "cjk": "中",
    "lo_lu": "中A", "mark_lu": "\u0301A", "lu_lm": "Aʰ", "contraction": "'s", "apostrophes": "'",
    "nbsp": "\u00a0", "emoji": "😀", "space_letter": " a", "space_punct": " !",
}


@pytest.mark.parametrize("pattern", PATTERN_NAMES)
@pytest.mark.parametrize("unit", sorted(LONG_RUNS))
def test_long_runs(pattern, unit):
    """100k-character runs finish (a quadratic scanner would take minutes) and cover the input;
    the same shapes, short, match the oracle exactly."""
    u = LONG_RUNS[unit]
    n = 100_000 // len(u)
    for text in (u * n, "x" + u * n + "x", " " + u * n, u * n + "\n", u * n + " y"):
        _assert_cover(text, split_pieces(pattern, text))
    k = max(1, 12 // len(u))
    assert_same(pattern, [u * k, "x" + u * k + "x", " " + u * k, u * k + "\n", u * k + " y"])
