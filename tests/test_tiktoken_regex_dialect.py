"""The general regex engine in tiktoken's dialect (fancy-regex 0.19), differential against tiktoken.

A split pattern without a hand-written scanner runs on `native/text/regex.cc` with
RegexDialect::kFancyRegex. Every test compares with the real tiktoken built offline:

* ids: `crayon_hf.tiktoken.Encoding(P, real cl100k/r50k ranks)` vs `tiktoken.Encoding(P, same)`,
  asserting `crayon_backend == "native"`;
* pieces: with a vocabulary holding every byte and every character-aligned substring of the texts,
  each tiktoken piece is one token (the exact piece oracle of tests/test_pretokenize.py), so equal
  ids mean equal pieces, and the scanners' pieces can be compared with the VM's;
* dialect probes: Unicode sets swept over every code point (\\w \\s \\d \\b, \\p{gc}, `.`) and
  case-insensitive orbits, each a pattern whose matches are read back through byte-level ranks;
* refusals: constructs the engine refuses must fall back to tiktoken (same ids, same errors).

The scanners' patterns are forced through the VM by wrapping them in `(?:...)`, which changes
nothing in either dialect but no longer equals a scanner's string.
"""

from __future__ import annotations

import functools
import random
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import (
    VOCAB,
    corpus_files,
    corpus_text,
    random_slices,
    require_module,
    require_shared,
    short_docs,
)

import crayon_hf.tiktoken as tk
from crayon_hf._native import native
from crayon_hf.tiktoken._encodings import CL100K_PATTERN, LLAMA3_PATTERN, O200K_PATTERN, R50K_PATTERN

BYTE_RANKS = {bytes([i]): i for i in range(256)}

SCANNER_PATTERNS = {"r50k": R50K_PATTERN, "cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN, "llama3": LLAMA3_PATTERN}

# Patterns that have no scanner and must run natively (real tokenizers' and synthetic ones that
# exercise each dialect difference).
PATTERNS = {
    # The scanners' patterns, through the VM.
    **{f"vm_{k}": f"(?:{v})" for k, v in SCANNER_PATTERNS.items()},
    # tiktoken < 0.13's r50k/p50k pattern (GPT-2's original).
    "gpt2_classic": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    # Qwen2's pattern (digits one at a time).
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    # DeepSeek-V3's Split sequence as one pattern (CJK ranges, \p{P}\p{S}\p{M}, an escaped class).
    "deepseek": (
        r"""\p{N}{1,3}|[一-龥぀-ゟ゠-ヿ]+|[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
        r"""|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    ),
    # Possessive intervals and `$` (end of the segment only).
    "possessive_dollar": r"""\p{N}{1,3}+|\p{L}{2}+|\s+$|\s+(?!\S)|\s|[^\s\p{L}\p{N}]++""",
    # (?i) with simple case folding: ſ is s, the Kelvin sign is k, ß only matches ß/ẞ.
    "casei": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d|k+|ss|ß|[a-cx-zſ]+)|\w+|\s+|[^\w\s]+""",
    # Rust's \s \d \w \W.
    "classes": r"""\d+|\w+|\s+|\W""",
    "words": r"""\w+|\s+|[^\w\s]+""",
    # \b, fixed lookbehind, atomic group, lazy and possessive quantifiers.
    "lookaround": r"""(?<=\s)\w{1,4}?\b|(?>\w+)|(?<![\w\s])\s+|(?<=[a-z]{2})\.|\S""",
    # ^ and $ anchors (start/end of the segment), gaps between matches are dropped.
    "anchors": r"""^\s+|\s+$|^\S+|\S+$|\p{L}+|\p{N}""",
    # Intervals: exact, lazy, possessive, then more; `.` (not \n; "\n" is dropped).
    "intervals": r"""\d{2}+|\d{2,}?|[a-z]{1,2}+[a-z]|\s++|\p{Lu}{2,3}?|.""",
    # Escapes: \xHH (above 7F too), \uHHHH, \x{...}, \t\v\f\e\a, escaped punctuation.
    "escapes": r"""[\x41-\x5A\xE9\u00C0-\u00C5]+|\x{1F600}+|[\t\x0b\f\r\n \x07\x1b]+|\.\.\.|[^\sA-Z\xE9]+""",
    # Named groups, nested classes, negated classes, a literal '-' and ']'.
    "groups": r"""(?<word>[[a-z][A-Z]]+)|(?P<num>[0-9]+)|[]\-+]+|[^]\s\w-]+|\s+|\w""",
}

WORDS = "Hello world don't DON'T you'll I'M we've she'D ſtop 'ſ KELVIN 5K 3\u212a"
CASES = [
    "", " ", "a", "\n", "a  \nb", "a \n", "x   ", "  x", "x\n\n", "\n\n x", "\r\n\r\n  y",
    "2024 12345 1234567 ٣٤٥٦ ०१२३", "aB Cd EFG hij KLMN", "1,234.56", "a.b.c", "etc...",
    WORDS, "'s 'S 'ſ 'll 'LL 'Ll 'x '", "ss SS ß ẞ ſſ kK\u212a", "İstanbul ı i I",
    "naïve café Ἀθῆναι Москва", "中文字符测试。标点！", "日本語のテキスト、カタカナー", "한국어 텍스트",
    "\u00a0a\u3000b\u2028c\u2029d\u0085e\x0bf\x0cg", "tab\there\t\t", "😀😀 👍🏽 a😀b \U0001f9d1\u200d\U0001f4bb",
    "a\u0301b\u0308 \u20dd\u0903", "zero\u200bwidth\u200cjoin\u200dx", "²³¹¼½¾ Ⅻ ⑳",
    "x = f(a, b) -> {c: [d]}  # comment\n    return x", "A]B-C+D]]", "ÀÁÂÃÄÅ éé AÉZ", "\t\x0b\x0c\x07\x1b",
]


# ------------------------------------------------------------------------------------------------
# References and helpers.


@functools.lru_cache(maxsize=None)
def _tiktoken():
    tiktoken = require_module("tiktoken")
    import tiktoken.load  # noqa: F401

    return tiktoken


@functools.lru_cache(maxsize=None)
def real_ranks(name: str) -> dict[bytes, int]:
    tiktoken = _tiktoken()
    return tiktoken.load.load_tiktoken_bpe(str(require_shared(VOCAB / "tiktoken" / f"{name}.tiktoken")))


@functools.lru_cache(maxsize=None)
def pair(pattern: str, vocab: str = "cl100k_base"):
    """(tiktoken, ours) for pattern over a real vocabulary; ours must run natively."""
    tiktoken = _tiktoken()
    ranks = real_ranks(vocab)
    specials = {"<|endoftext|>": max(ranks.values()) + 1, "<|fim|>": max(ranks.values()) + 2}
    ref = tiktoken.Encoding("probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    ours = tk.Encoding("probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)
    assert ours.crayon_backend == "native", ours.crayon_backend
    assert ours._engine.pattern == "regex"
    return ref, ours


def assert_ids(pattern: str, texts: list[str], vocab: str = "cl100k_base") -> None:
    ref, ours = pair(pattern, vocab)
    got = ours.encode_ordinary_batch(texts)
    for text, g in zip(texts, got):
        want = ref.encode_ordinary(text)
        if g != want:
            i = next((k for k, (a, b) in enumerate(zip(want, g)) if a != b), min(len(want), len(g)))
            pytest.fail(
                f"pattern {pattern!r}: ids differ at token {i} near {ref.decode(want[max(0, i - 4):i + 4])!r}\n"
                f"  tiktoken: {want[max(0, i - 4):i + 4]}\n  crayon:   {g[max(0, i - 4):i + 4]}"
            )


def _boundaries(b: bytes) -> list[int]:
    return [i for i in range(len(b) + 1) if i == len(b) or (b[i] & 0xC0) != 0x80]


def piece_oracle(pattern: str, texts: list[str]):
    """(tiktoken, ours) over a vocabulary where every piece of these texts is one token."""
    tiktoken = _tiktoken()
    ranks = dict(BYTE_RANKS)
    for s in texts:
        b = s.encode()
        bounds = _boundaries(b)
        for x, start in enumerate(bounds):
            for end in bounds[x + 1 : x + 400]:
                if end - start > 1:
                    ranks.setdefault(b[start:end], len(ranks))
    ref = tiktoken.Encoding("oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = tk.Encoding("oracle", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return ref, ours


def pieces_of(enc, text: str) -> list[str]:
    b = text.encode()
    out, pos = [], 0
    for tok in enc.encode_ordinary(text):
        n = len(enc.decode_single_token_bytes(tok))
        piece = enc.decode_single_token_bytes(tok)
        pos = b.index(piece, pos) + n
        out.append(piece.decode("utf-8", "backslashreplace"))
    return out


def assert_pieces(pattern: str, texts: list[str]) -> None:
    ref, ours = piece_oracle(pattern, texts)
    assert ours.crayon_backend == "native", ours.crayon_backend
    for text in texts:
        want = ref.encode_ordinary(text)
        got = ours.encode_ordinary(text)
        assert got == want, f"{pattern!r} on {text!r}:\n  tiktoken {pieces_of(ref, text)}\n  crayon   {pieces_of(ours, text)}"


def matched_set(enc, text: str) -> set[int]:
    """Code points matched by a one-character pattern, read back through byte-level ranks."""
    return set(map(ord, bytes(enc.encode_ordinary(text)).decode("utf-8")))


@functools.lru_cache(maxsize=None)
def all_text() -> str:
    return "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000)


def sweep(pattern: str) -> None:
    """Compares which code points a single-character pattern matches, over every code point."""
    tiktoken = _tiktoken()
    ref = tiktoken.Encoding("sweep", pat_str=pattern, mergeable_ranks=BYTE_RANKS, special_tokens={})
    ours = tk.Encoding("sweep", pat_str=pattern, mergeable_ranks=BYTE_RANKS, special_tokens={})
    assert ours.crayon_backend == "native", ours.crayon_backend
    text = all_text()
    want, got = matched_set(ref, text), matched_set(ours, text)
    assert got == want, f"{pattern!r}: crayon-only {sorted(map(hex, got - want))[:10]}, tiktoken-only {sorted(map(hex, want - got))[:10]}"


# ------------------------------------------------------------------------------------------------
# The scanners' patterns through the VM: same pieces as the scanners and as tiktoken.


def scanner_texts() -> list[str]:
    texts = list(CASES)
    for i, path in enumerate(corpus_files()):
        texts += random_slices(corpus_text(path, 32 * 1024), 25, seed=100 + i, max_len=120)
    return texts


@pytest.mark.parametrize("name", SCANNER_PATTERNS)
def test_vm_pieces_equal_scanner_and_tiktoken(name):
    texts = scanner_texts()
    vm = f"(?:{SCANNER_PATTERNS[name]})"
    ref, ours = piece_oracle(vm, texts)
    assert ours.crayon_backend == "native"
    for text in texts:
        b = text.encode()
        scanner = [b[x:y].decode("utf-8", "backslashreplace") for x, y in native.split_pieces(name, text)]
        vm_pieces = pieces_of(ours, text)
        assert vm_pieces == scanner, f"{name} {text!r}: VM {vm_pieces} scanner {scanner}"
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text), f"{name} {text!r}: {pieces_of(ref, text)}"


# ------------------------------------------------------------------------------------------------
# Hand-picked dialect cases, piece by piece.

DIALECT_CASES = [
    # Possessive interval: "2024" is "202" + "4" in fancy-regex (Oniguruma keeps it whole).
    (r"\p{N}{1,3}+|\S|\s", ["2024", "1234567", "12 3456"]),
    (r"\d{2}+\d|\S|\s", ["123", "1234", "12345"]),
    (r"a?+a|\S|\s", ["a", "aa", "aaa"]),
    (r"a*+a|b++b|\S|\s", ["aaa", "bbb", "ab"]),
    # $ is the end of the text only; ^ the start only.
    (r"\s+$|\s+|\S+", ["a  \nb", "a  \n", "a  ", "x\n\n", " \n \n"]),
    (r"^\s+|\s+|\S+", [" a\n b", "\n\na", "a\n b"]),
    (r"\S+$|\S+|\s+", ["ab\ncd\n", "ab cd", "ab\n"]),
    # (?i): simple folding only.
    (r"(?i)k+|\S|\s", ["kK\u212a", "\u212ak", "x"]),
    (r"(?i:'s)|\S|\s", ["'s 'S 'ſ '\u017f"]),
    (r"(?i:ss)|(?i:ß)|\S|\s", ["ss SS ß ẞ ſs"]),
    (r"(?i)[^k]+|\S|\s", ["ab\u212akcK"]),
    (r"(?i)[a-z]+|\S|\s", ["İıiIſ\u212aKz"]),
    (r"(?i:σ)+|\S|\s", ["Σσς ΣΣ"]),
    (r"(?i)é|\S|\s", ["éÉe"]),
    # Lazy quantifiers and intervals.
    (r"a{2}?|a{1,3}?b|\S|\s", ["aaab", "aab", "aaaa"]),
    (r"\w+?\b|\S|\s", ["ab cd", "x"]),
    # Word boundaries on Rust's \w (Join_Control is a word character, ² is not).
    (r"\b\w|\B.|\s", ["a\u200cb x²y ³", "é\u0301x"]),
    # Lookbehind (fixed length), lookahead, atomic groups.
    (r"(?<=ab)c|(?<!a)b|(?=c).|\S|\s", ["abc", "bc", "cab"]),
    (r"(?>a+)b|a|\S|\s", ["aab", "aa"]),
    (r"\s+(?!\S)|\s+|\S+", ["a   b", "a \n b", "   "]),
    # Unmatched text is dropped.
    (r"\p{L}+", ["abc 123 def", "123", "   "]),
    (r"[0-9]", ["a1b2c3"]),
    # Literal braces.
    (r"a{|\{,\}|x{2,1a}|\S|\s", ["a{ {,} x{2,1a}"]),
    # \xHH above 7F is a code point.
    (r"\xE9+|\xFF|\S|\s", ["ééÿ"]),
]


@pytest.mark.parametrize("index", range(len(DIALECT_CASES)))
def test_dialect_cases(index):
    pattern, texts = DIALECT_CASES[index]
    assert_pieces(pattern, texts)


@pytest.mark.parametrize("name", PATTERNS)
def test_patterns_on_cases_pieces(name):
    assert_pieces(PATTERNS[name], CASES)


# ------------------------------------------------------------------------------------------------
# Unicode sets over every code point.

SWEEPS = [r"\w", r"\W", r"\s", r"\S", r"\d", r"\D", r".", r"[\w]", r"[^\s\d]", r"\p{L}", r"\p{N}",
          r"(?i)\w", r"(?i)\W", r"(?i)[\W]", r"(?i)[^\wk]", r"(?i)[\Ss]", r"(?i)."]
GENERAL_CATEGORIES = [
    "L", "Lu", "Ll", "Lt", "Lm", "Lo", "LC", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No", "P", "Pc", "Pd",
    "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs", "Zl", "Zp", "C", "Cc", "Cf", "Co", "Cn",
    "Letter", "Uppercase_Letter", "decimal number", "Other-Punctuation", "Symbol", "Separator", "Other",
]


@pytest.mark.parametrize("pattern", SWEEPS)
def test_sweep_sets(pattern):
    sweep(pattern)


@pytest.mark.full
@pytest.mark.parametrize("name", GENERAL_CATEGORIES)
def test_sweep_general_categories(name):
    sweep(r"\p{%s}" % name)
    sweep(r"\P{%s}" % name)


def test_word_boundary_sweep():
    # \b before each character: matched when the character is a word character (text starts after
    # a space). Pairs of characters check the other side.
    tiktoken = _tiktoken()
    rng = random.Random(5)
    cps = [c for c in range(0x30000) if not 0xD800 <= c < 0xE000]
    rng.shuffle(cps)
    text = " " + " ".join(chr(c) + chr(cps[(i * 7) % len(cps)]) for i, c in enumerate(cps[:40000]))
    pattern = r"\b.|\B."
    ref = tiktoken.Encoding("b", pat_str=r"\b.", mergeable_ranks=BYTE_RANKS, special_tokens={})
    ours = tk.Encoding("b", pat_str=r"\b.", mergeable_ranks=BYTE_RANKS, special_tokens={})
    assert ours.crayon_backend == "native"
    assert ours.encode_ordinary(text) == ref.encode_ordinary(text), pattern


def case_candidates() -> list[int]:
    """Characters with other case forms (Python's and the regex module's proposals, restricted to
    code points assigned in Unicode 16.0)."""
    ud = require_module("unicodedata2")
    regex = require_module("regex")
    out = set()
    for c in range(0x20000):
        if 0xD800 <= c < 0xE000 or ud.category(chr(c)) == "Cn":
            continue
        ch = chr(c)
        if ch.lower() != ch or ch.upper() != ch or ch.casefold() != ch:
            out.add(c)
    for prop in (r"\p{Changes_When_Casemapped}", r"\p{Changes_When_Casefolded}"):
        rx = regex.compile(prop)
        out.update(c for c in range(0x20000) if not 0xD800 <= c < 0xE000 and rx.match(chr(c))
                   and ud.category(chr(c)) != "Cn")
    return sorted(out)


def check_orbits(cands: list[int], probe: list[int]) -> None:
    tiktoken = _tiktoken()
    text = "\0".join(map(chr, cands))
    bad = []
    for c in probe:
        pattern = r"(?i)\x{%X}" % c
        ref = tiktoken.Encoding("i", pat_str=pattern, mergeable_ranks=BYTE_RANKS, special_tokens={})
        ours = tk.Encoding("i", pat_str=pattern, mergeable_ranks=BYTE_RANKS, special_tokens={})
        assert ours.crayon_backend == "native", ours.crayon_backend
        want, got = matched_set(ref, text), matched_set(ours, text)
        if want != got:
            bad.append((hex(c), sorted(map(hex, want)), sorted(map(hex, got))))
    assert not bad, bad[:10]


def test_case_insensitive_orbits_sample():
    cands = case_candidates()
    special = [0x73, 0x17F, 0x6B, 0x212A, 0xDF, 0x1E9E, 0x130, 0x131, 0x3A3, 0x3C2, 0x345, 0x3B9, 0x1FBE,
               0x1C4, 0x1C5, 0x1C6, 0xB5, 0x3BC, 0x2126, 0x3C9, 0x1E9B, 0xA7C0, 0xA7CB, 0xA7DC, 0x10D50, 0x1C89]
    rng = random.Random(11)
    probe = sorted(set(special + rng.sample(cands, 150)))
    check_orbits(cands, probe)


@pytest.mark.full
def test_case_insensitive_orbits_all():
    cands = case_candidates()
    check_orbits(cands, cands)


# ------------------------------------------------------------------------------------------------
# Ids with real vocabularies.


@pytest.mark.parametrize("name", PATTERNS)
def test_corpus_samples(name):
    texts = [corpus_text(p, 48 * 1024) for p in corpus_files()]
    assert_ids(PATTERNS[name], texts)


@pytest.mark.parametrize("name", ["vm_r50k", "gpt2_classic", "words", "casei"])
def test_r50k_vocabulary(name):
    texts = [corpus_text(p, 16 * 1024) for p in corpus_files()] + CASES
    assert_ids(PATTERNS[name], texts, vocab="r50k_base")


def test_random_slices_and_short_docs():
    slices = []
    for i, path in enumerate(corpus_files()):
        slices += random_slices(corpus_text(path, 64 * 1024), 60, seed=i)
    docs = short_docs(300)
    for name in ["vm_cl100k", "vm_o200k", "qwen2", "deepseek", "lookaround", "anchors"]:
        assert_ids(PATTERNS[name], slices + docs)


@pytest.mark.full
@pytest.mark.parametrize("name", PATTERNS)
def test_whole_corpora(name):
    texts = [corpus_text(p, None) for p in corpus_files()]
    assert_ids(PATTERNS[name], texts)


ALPHABET = list(
    "aAbsStTdDmMlLvVeErRkKxX'’ſ\u212a\u1e9eßİı" "0123456789٣७০๓᠑߃௫²½Ⅻ"
    " \t\r\n\u00a0\u3000\u2028\u2029\u0085\x0b\x0c\u200b\u200c\u200d"
    ".,!?;:/\\-_()[]{}<>|\"#$%&*+=@^`~"
    "\u0301\u0308\u20dd\u0903\u0345"
    "ǅᾈʰˆ々中文日本語한국어ไทย"
    "éÉñøΑαΣσςΩω"
    "😀👍🏽\U0001f9d1\u00e9\u0000\u007f\u0080\u07ff\u0800\uffff\U00010000\U0010ffff"
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(ALPHABET), min_size=0, max_size=40).map("".join))
def test_hypothesis_alphabet(text):
    for pattern in PATTERNS.values():
        ref, ours = pair(pattern)
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text), (pattern, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=50))
def test_hypothesis_any_unicode(text):
    for name in ["vm_o200k", "casei", "classes", "lookaround", "escapes"]:
        ref, ours = pair(PATTERNS[name])
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text), (name, text)


# ------------------------------------------------------------------------------------------------
# Special tokens, unstable tokens, long inputs, cartridges.


def test_special_tokens_split_segments():
    ref, ours = pair(PATTERNS["anchors"])
    for text in ["  a<|endoftext|>  b  ", "<|endoftext|><|fim|>x  ", "x\n<|fim|>\n y<|endoftext|>"]:
        for allowed in ["all", {"<|fim|>"}, set()]:
            kw = {"allowed_special": allowed, "disallowed_special": ()}
            assert ours.encode(text, **kw) == ref.encode(text, **kw), (text, allowed)
    with pytest.raises(ValueError, match="disallowed special token"):
        ours.encode("a<|fim|>")


def test_encode_with_unstable():
    for name in ["words", "vm_cl100k", "possessive_dollar"]:
        ref, ours = pair(PATTERNS[name])
        for text in ["hello fanta", "hello  ", "abc 12", "a\n\n", "don't", "x  \n"]:
            s1, c1 = ref.encode_with_unstable(text)
            s2, c2 = ours.encode_with_unstable(text)
            assert s2 == s1 and sorted(map(tuple, c2)) == sorted(map(tuple, c1)), (name, text)


@pytest.mark.parametrize("text", ["a" * 50_000, " " * 50_000, "\n" * 20_000, " \n" * 20_000, "1" * 50_000,
                                  "a\u0301" * 20_000, "!" * 50_000, "AbC" * 20_000 + "  x"])
def test_long_inputs(text):
    for name in ["vm_cl100k", "vm_llama3", "lookaround", "anchors"]:
        ref, ours = pair(PATTERNS[name])
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text), name


def test_cartridge_round_trip(tmp_path):
    ref, ours = pair(PATTERNS["casei"])
    path = tmp_path / "casei.dat"
    ours.save_cartridge(path)
    header = native.section_bytes(str(path), "TKHD")
    assert int.from_bytes(header[4:8], "little") == 5
    assert native.section_bytes(str(path), "TKRX").decode() == PATTERNS["casei"]
    loaded = tk.Encoding.from_cartridge(path)
    assert loaded.crayon_backend == "native"
    text = corpus_text(corpus_files()[0], 8 * 1024) + WORDS
    assert loaded.encode_ordinary(text) == ref.encode_ordinary(text)


def test_pickle_round_trip():
    import pickle

    ref, ours = pair(PATTERNS["words"])
    again = pickle.loads(pickle.dumps(ours))
    assert again.crayon_backend == "native"
    assert again.encode_ordinary(WORDS) == ref.encode_ordinary(WORDS)


# ------------------------------------------------------------------------------------------------
# Refusals: the face falls back to tiktoken, loudly, and behaves exactly like it.

REFUSED = [
    r"(\w)\1|\w+|\s+",              # backreference
    r"(?m)^\w+|\s+|\S",             # multi-line flag
    r"(?s).|\s",                    # dot-all flag
    r"\p{Han}+|\S+|\s+",            # script (not probed)
    r"(?i)\p{Lu}+|\S+|\s+",         # \p{..} under (?i)
    r"(?i)[\P{Ll}]+|\S+|\s+",
    r"\w+(?i)x|\s+|\S",             # flag group in the middle
    r"(?<=\w+)\s|\S+|\s",           # variable-length lookbehind
    r"\s+\Z|\S+|\s+",               # \Z
    r"(?:a|)+b|\S+|\s+",            # loop whose body can match empty
    r"[\w--\d]+|\S+|\s+",           # class difference
    r"[+--]|\S+|\s+",                # "--" right after a character
    r"\h+|\S+|\s+",                 # \h
    r"(?#c)\S+|\s+",                # comment group
    r"\S+|\s+|\<",                  # \< is a word boundary in fancy-regex
    r"a*",                          # can match empty: tiktoken panics on empty pieces
    r"\s*",
    r"a{,}|\S",
    r"x|$",
]


@pytest.mark.parametrize("pattern", REFUSED)
def test_refused_patterns_fall_back(pattern):
    tiktoken = _tiktoken()
    ranks = real_ranks("r50k_base")
    assert native.tiktoken_regex_refusal(pattern) != ""
    try:
        ref = tiktoken.Encoding("r", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    except ValueError:  # fancy-regex rejects it: so does the fallback
        with pytest.warns(UserWarning, match="fallback"), pytest.raises(ValueError):
            tk.Encoding("r", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
        return
    with pytest.warns(UserWarning, match="fallback"):
        ours = tk.Encoding("r", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    assert ours.crayon_backend.startswith("fallback: pat_str (")
    for text in ["ab  cd\n", "aab", WORDS]:
        try:
            want = ref.encode_ordinary(text)
        except BaseException as e:  # tiktoken panics on empty pieces (pyo3 PanicException)
            with pytest.raises(type(e)):
                ours.encode_ordinary(text)
            continue
        assert ours.encode_ordinary(text) == want


ACCEPTED = [
    r"\p{L}+|\p{N}+|\s+|\S",
    r"'(?i:[sdmt]|ll|ve|re)|\w+|\s+|\S",
    r"(?i)abc|\S|\s",
    r"(?-i)abc|\S|\s",
    r"(?i:[^a-c])+|\s",
    r"\x{10FFFF}|\u00e9|\xFF|\S|\s",
    r"(?<n>a)|(?P<m>b)|(?'o'c)|\S|\s",
    r"[\p{L}\p{M}]+|[^\p{L}\p{M}]",
    r"\b\w+\b|\B\W+|\s|\S",
]


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_accepted_patterns(pattern):
    assert native.tiktoken_regex_refusal(pattern) == "", native.tiktoken_regex_refusal(pattern)
    assert_pieces(pattern, CASES)



# ------------------------------------------------------------------------------------------------
# Random patterns from a grammar of the supported constructs: whatever the engine accepts must be
# accepted by tiktoken and split every text the same way.

FUZZ_ATOMS = ["a", "b", "k", "s", "'", " ", "\\s", "\\S", "\\d", "\\w", "\\W", "\\p{L}", "\\p{N}", "\\p{Lu}",
              "[a-c]", "[^\\s\\p{L}]", ".", "[\\r\\n]", "\\n", "\\xE9", "ſ", "[k-m]", "ß", "[^a]", "\\.", "\\b",
              "\\B", "^", "$"]
FUZZ_QUANTS = ["", "", "", "?", "*", "+", "??", "*?", "+?", "?+", "*+", "++", "{2}", "{1,3}", "{1,3}+", "{1,3}?",
               "{2,}", "{,2}", "{0,1}"]
FUZZ_TEXT = list("aabbksS'  \n\r1ſKßẞé.\u212a中\u0301x2")


def random_pattern(rng: random.Random) -> str:
    def atom(d):
        r = rng.random()
        if d < 3 and r < 0.25:
            return "(?:" + alt(d + 1) + ")"
        if d < 3 and r < 0.32:
            return rng.choice(["(?=", "(?!", "(?>", "(?<=", "(?<!", "(?i:"]) + alt(d + 1) + ")"
        return rng.choice(FUZZ_ATOMS)

    def piece(d):
        a = atom(d)
        zero_width = a in ("^", "$", "\\b", "\\B") or a.startswith(("(?=", "(?!", "(?<"))
        return a + ("" if zero_width else rng.choice(FUZZ_QUANTS))

    def alt(d):
        return "|".join("".join(piece(d) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(1, 3)))

    return ("(?i)" if rng.random() < 0.1 else "") + alt(0) + "|\\S|\\s"


def run_fuzz(seed: int, tries: int) -> int:
    tiktoken = _tiktoken()
    rng = random.Random(seed)
    accepted = 0
    for _ in range(tries):
        pattern = random_pattern(rng)
        if native.tiktoken_regex_refusal(pattern):
            continue
        accepted += 1
        tiktoken.Encoding("p", pat_str=pattern, mergeable_ranks=BYTE_RANKS, special_tokens={})  # must compile
        texts = ["".join(rng.choice(FUZZ_TEXT) for _ in range(rng.randint(0, 12))) for _ in range(30)]
        assert_pieces(pattern, texts)
    return accepted


def test_random_patterns():
    assert run_fuzz(seed=1, tries=800) > 120


@pytest.mark.full
def test_random_patterns_many():
    assert run_fuzz(seed=2, tries=3000) > 500
