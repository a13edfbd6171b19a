"""The block pre-tokenizer (native/text/piece_blocks.cc) against the scalar scanners.

`split_pieces(pattern, text, mode)`: "auto" is what the engines run (64-byte blocks classified with
AVX-512BW where the CPU has it, else AVX2, else SSE2 on x86-64), "avx512", "avx2" and "sse2" name one of those
classifiers (every one the machine has is checked), "portable" the same rules over the table
classifier every platform has, "scalar"
the per-piece scanners alone, which tests/test_pretokenize.py holds to tiktoken's own regex (its
tests call the default, "auto", so they hold the blocks to tiktoken as well). A block commits only
the boundaries its 64 bytes prove, so the cases here put each structure it must stop short of
across block edges: contractions, whitespace runs (with line breaks, tabs, spaces before
punctuation), digit runs, punctuation runs and their line breaks, non-ASCII bytes, the text's end.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crayon_hf._crayon import block_modes, split_pieces
from support import check_native, corpus_files, corpus_text

PATTERNS = ("r50k", "cl100k", "llama3", "qwen2", "o200k", "deepseek_v3")
MODES = tuple(m for m in block_modes() if m != "scalar")  # every classifier this machine runs


def check(pattern: str, texts: list[str]) -> None:
    for text in texts:
        want = split_pieces(pattern, text, "scalar")
        for mode in MODES:
            got = split_pieces(pattern, text, mode)
            if got != want:
                i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                b = text.encode()
                at = want[i][0] if i < len(want) else len(b)
                pytest.fail(f"{pattern}/{mode}: piece {i} differs at byte {at}: got "
                            f"{[b[x:y] for x, y in got[i:i + 3]]} want {[b[x:y] for x, y in want[i:i + 3]]} "
                            f"in {b[max(0, at - 40):at + 40]!r}")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_corpora(pattern):
    """Every corpus, a prefix of each (whole files under `pytest -m full`: test_corpora_whole)."""
    check(pattern, [corpus_text(path, 1 << 17) for path in corpus_files()])


@pytest.mark.full
@pytest.mark.parametrize("pattern", PATTERNS)
def test_corpora_whole(pattern):
    check(pattern, [corpus_text(path, None) for path in corpus_files()])


STRUCTURES = [
    "HelloWorld", "HTTPServer", "aBcD", "ABC", "ABC's", "it's", "it'd's", "x'd'd'd", "'s's", "It'lL", "a//b", "./\n/x", ".\n/.", "a\n/b", "//\n\n/",
    "'s", "'S", "'t", "'ll", "'LL", "'lL", "'ve", "'VE", "'re", "'d", "'m", "'x", "'l", "'v", "'", "''s", "x's",
    "don't", "DON'T", " 's", ".'s", "'s'", "'sa", "'llo",
    " ", "  ", "   x", "  ,", " ,", " ,x", ",x", ".,x", " .x", "\t,", "\tx", "\t\tx", "  \t x", "\v\fx",
    "\n", "\n\n", "\r\n", "\n x", "\n  x", " \n x", "\n \n", "\n \n x", "\n\t\n  x", " \n \n \n ", "\r \r\n \n",
    ".\n", ".\n\n", ".\n \n", "!!\r\n\r\nx", "...\n  x", ",\nx", "?\n\n\n",
    "1", "12", "123", "1234", "1234567", "12 34", "a1b2c3", " 1", "  1", ",1", "1,", "1'", "1's",
    "word", "Word", "WORD", " word", "\nword", "(word)", "\"quoted\"",
    "'ſ", "'ſa", "x'ſ", "'S", " жук", "ж'll", "٣٣٣٣", "क\u093fक", "\u00a0x", "\u3000\u3000y", "x\u2028\u2028 z",
]
TAILS = ["", "x", " ", "\n", ".", "é", "中", "\u00a0", "\u2028", "😀", "'s", " y"]
FILLERS = ["a" * 80, "ab cd ef gh " * 8, " " * 80, "x." * 40, "1" * 80, "\n" * 80, "a,b " * 20]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_structures_across_block_edges(pattern):
    """Each structure starting at every offset around the first block edge (and at the end of the
    text, before a non-ASCII character, before other ASCII)."""
    texts = []
    for s in STRUCTURES:
        for filler in FILLERS:
            for offset in range(52, 68):
                head = filler[:offset]
                texts.extend(head + s + tail for tail in TAILS)
    check(pattern, texts)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_structures_one_after_another(pattern):
    """Long texts made of the structures in random order: blocks start wherever the last one
    stopped, so every alignment of every structure comes up."""
    rng = random.Random(f"structures-{pattern}")
    texts = ["".join(rng.choice(STRUCTURES + TAILS) for _ in range(rng.randint(1, 400))) for _ in range(300)]
    check(pattern, texts)


ALPHABET = list("etaoinshrdlu ETAOINSHRDLU sdmtlvre SDMTLVRE 0123456789") + [
    " ", " ", " ", " ", "  ", "\n", "\n", "\r", "\t", "\v", "\f", "'", "'", ".", ",", "!", "?", "-", "(", ")",
    "\"", "/", "#", "\x00", "\x1c", "\x7f", "é", "É", "中", "\u00a0", "\u3000", "\u2028", "\u0085", "😀",
    "\u0301", "ſ", "\u212a", "\xff".encode("latin-1").decode("latin-1"),
    # Other scripts, for the transcoded blocks (one ASCII stand-in per character): letters, marks,
    # numbers that are not ASCII digits (Nd, No, Nl), whitespace and format characters.
    "ж", "Ж", "क", "\u093f", "\u094d", "ก", "\u0e31", "א", "ع", "٣", "½", "Ⅻ", "\u1680", "\u2003", "\u00ad",
    "\u200b", "\ufeff", "\U00010348",
]
NON_ASCII = [c for c in ALPHABET if not c.isascii()] + [" ", " ", "'", "\n", "1", "s", ".", "a"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_random_text(pattern):
    rng = random.Random(f"random-{pattern}")
    texts = []
    for _ in range(2000):
        n = rng.choice([rng.randint(0, 20), rng.randint(40, 90), rng.randint(100, 400)])
        weights = rng.choice([None, "ascii", "other scripts"])
        pool = {None: ALPHABET, "ascii": [c for c in ALPHABET if c.isascii()], "other scripts": NON_ASCII}[weights]
        texts.append("".join(rng.choice(pool) for _ in range(n)))
    check(pattern, texts)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_two_byte_character(pattern):
    """Every character of U+0080..U+07FF (a transcoded block takes their stand-ins from a table by
    code point: letters, marks, numbers, spaces, punctuation, U+017F folded where contractions
    fold) inside runs of other scripts, after an apostrophe (then a letter: "'ſж" is a
    contraction and a piece where the pattern folds case), a space and a digit."""
    chars = [chr(cp) for cp in range(0x80, 0x800)]
    texts = ["".join(f"{c}ж'{c}ж {c}1{c}\u05d0'{c} " for c in chars[i:i + 24]) for i in range(0, len(chars), 24)]
    check(pattern, texts)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(STRUCTURES + TAILS + ALPHABET), max_size=80))
def test_hypothesis(pattern, parts):
    check(pattern, ["".join(parts)])


def test_long_runs_cover():
    """Runs longer than a block (letters, spaces, digits, punctuation, line breaks) go to the
    scalar scanner piece by piece; the result still tiles the text exactly as it does there."""
    for unit in ("a", " ", "7", "!", "\n", " \n", "'s", "a ", "\t"):
        for n in (63, 64, 65, 127, 128, 129, 5000):
            for pattern in PATTERNS:
                check(pattern, [unit * n, "x" + unit * n + "x", unit * n + "é"])


def test_mode_is_checked():
    with pytest.raises(ValueError, match="mode must be"):
        split_pieces("cl100k", "abc", "simd")


def test_block_modes():
    """block_modes() lists what split_pieces runs as itself: the portable table and the scalar
    scanners everywhere, SSE2 on x86-64, AVX2 and AVX-512 where the CPU has them; a mode the machine lacks
    is refused by name rather than quietly run as another."""
    import platform

    modes = block_modes()
    assert {"auto", "portable", "scalar"} <= set(modes)
    assert set(modes) <= {"auto", "avx512", "avx2", "sse2", "portable", "scalar"}
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert "sse2" in modes
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if platform.machine().lower() in ("x86_64", "amd64") and " avx512bw" in flags:
        assert "avx512" in modes
    if platform.machine().lower() in ("x86_64", "amd64") and " avx2" in flags:
        assert "avx2" in modes
    for missing in {"avx512", "avx2", "sse2"} - set(modes):
        with pytest.raises(ValueError, match="not available"):
            split_pieces("cl100k", "abc", missing)


def test_utf8_decoders_native(tmp_path):
    # native/core/utf8.h: decode() and the scanners' inline decode_common() against the Unicode
    # table of well-formed sequences, for every first three bytes and every count of readable
    # bytes, under ASan/UBSan (tests/native/test_utf8.cc).
    check_native(tmp_path, "test_utf8.cc", "the UTF-8 decoder test")


def test_cjk_lead_bytes_native(tmp_path):
    # core/swar.h's cjk_lead (CJK pieces are found by it before they are cut) against the byte
    # test, every byte value at every position of a word beside every neighbour value and random
    # ones (tests/native/test_swar.cc), under the sanitizers.
    check_native(tmp_path, "test_swar.cc", "the SWAR byte-class test")
