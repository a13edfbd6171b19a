"""Differential tests of the native Oniguruma-compatible regex engine and Split machinery.

tests/native/regex_driver.cc is compiled with native/text/regex.cc, split.cc, pretokenize.cc and
deepseek_split.cc (once optimised, once under AddressSanitizer + UndefinedBehaviorSanitizer) and fed
batches of cases; every result is compared with what `tokenizers` itself returns from
`pre_tokenizers.Split(Regex(p), behavior, invert=...).pre_tokenize_str(s)` (and the Whitespace,
WhitespaceSplit, Digits and Punctuation pre-tokenizers), converted from char to byte offsets. The
hand-written scanners are also compared with the VM running the same pattern (wrapped in `(?:...)`,
which no scanner recognises), on inputs tokenizers cannot take (invalid UTF-8).

Inputs: every Split pattern found in ../shared/vocab/hf plus the tiktoken patterns (as a
tokenizer.json converted from tiktoken would carry them), with every behaviour and both `invert`s;
real text from ../shared/corpora; hypothesis strings over adversarial alphabets; a hand-picked list
of dialect cases. Unsupported constructs must be refused (the caller then falls back to
`tokenizers`), and ReDoS-shaped patterns must finish quickly.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import ROOT, corpus_files, corpus_text, random_slices, require_module, require_shared, VOCAB

tokenizers = require_module("tokenizers")
from tokenizers import Regex  # noqa: E402
from tokenizers import pre_tokenizers as pt  # noqa: E402

SOURCES = [ROOT / "native" / n for n in ("text/regex.cc", "text/split.cc", "text/pretokenize.cc",
                                         "text/deepseek_split.cc")] + [
    ROOT / "tests" / "native" / "regex_driver.cc"
]
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
          r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_3 = ("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
              "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")
CLIP = r"<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+"
R50K = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
CL100K = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
          r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
O200K = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

PATTERNS = {
    "gpt2": GPT2,
    "llama3": LLAMA3,
    "qwen2": QWEN2,
    "deepseek_digits": r"\p{N}{1,3}",
    "deepseek_cjk": "[一-龥぀-ゟ゠-ヿ]+",
    "deepseek_main": DEEPSEEK_3,
    "clip": CLIP,
    "clip_ws": r"\s+",
    "falcon": r"[0-9][0-9][0-9]",
    "r50k": R50K,
    "cl100k": CL100K,
    "o200k": O200K,
}
# Patterns a hand-written scanner must serve (checked below and by the differential tests).
SCANNERS = {"gpt2": "gpt2", "llama3": "llama3", "qwen2": "qwen2", "deepseek_digits": "deepseek_digits",
            "deepseek_cjk": "deepseek_cjk", "deepseek_main": "deepseek_main"}

ALPHABET = (
    list("aZsStTkK'’ \t\n\r\x0b\x0c.,!?-_/\\\"#$%&()[]{}<>|@^`~0123456789")
    + ["\u00a0", "\u0085", "\u1680", "\u2000", "\u2028", "\u2029", "\u202f", "\u3000", "\x1c", "\ufeff",
       "\u0301", "\u0308", "\u20dd", "\u0663", "\u0967", "\u0e53", "\u2165", "\u00bd", "\U0001d7d8",
       "\u017f", "\u212a", "\u00df", "\u1e9e", "\u0130", "\u0131", "\ufb05", "\u01c5", "\u02b0",
       "中", "文", "ひ", "カ", "한", "й", "Ж", "α", "Ω", "ß", "é", "\U0001f600", "\U0001f44d\U0001f3fd",
       "\u2e42", "\u2e45", "\u2e5d", "\U00011f00", "\U0001e5d0", "\U00010d50", "\U00010d70",  # 15.1-16.0
       "\U0001ccf0", "\u0897", "\u1c89", "\ua7dc", "\U00016ea0", "\U00011b60", "\U0001e6c0",  # 16.0 / 17.0
       "\U000e0080", "\U0010fffd", "\ue000"]
)


def _compiler() -> list[str]:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run the native regex tests")
    return shlex.split(cxx)


def _compile(out: Path, extra: list[str]) -> subprocess.CompletedProcess[str]:
    cmd = [*_compiler(), "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native"), *extra,
           *map(str, SOURCES), "-o", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("regex") / "regex_driver"
    built = _compile(exe, ["-O2"])
    assert built.returncode == 0, built.stderr
    return exe


@pytest.fixture(scope="module")
def asan_driver(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("regex_asan") / "regex_driver_asan"
    flags = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    built = _compile(exe, ["-O1", "-g1", "-fno-omit-frame-pointer", *flags])
    if built.returncode != 0:
        probe = exe.parent / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        if subprocess.run([*_compiler(), *flags, str(probe), "-o", str(exe.parent / "probe")],
                          capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"the compiler cannot build with {flags[0]} here (no sanitizer runtime?)")
    assert built.returncode == 0, built.stderr
    return exe


# A case: (kind, behavior, invert, pattern, text); text is str or bytes.
Case = tuple


def run_driver(exe: Path, cases: list[Case], repeat: int = 1, timeout: int = 600) -> list:
    """Results in order: ("ok", ns, scanner, [(start, end), ...]) or ("err", message)."""
    buf = bytearray()
    for kind, behavior, invert, pattern, text in cases:
        p = pattern.encode("utf-8")
        t = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        b = BEHAVIORS.index(behavior) if behavior else 0
        buf += f"{kind} {b} {int(invert)} {len(p)} {len(t)} {repeat}\n".encode() + p + t
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=1")
    proc = subprocess.run([str(exe)], input=bytes(buf), capture_output=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    out = []
    for line in proc.stdout.decode().splitlines():
        parts = line.split(" ")
        if parts[0] == "err":
            out.append(("err", " ".join(parts[1:])))
        else:
            nums = list(map(int, parts[3:]))
            out.append(("ok", int(parts[1]), parts[2], list(zip(nums[::2], nums[1::2]))))
    assert len(out) == len(cases)
    return out


def _byte_offsets(text: str) -> list[int]:
    offs = [0]
    for ch in text:
        offs.append(offs[-1] + len(ch.encode("utf-8")))
    return offs


def reference(kind: str, behavior: str, invert: bool, pattern: str, text: str) -> list[tuple[int, int]]:
    if kind == "regex":
        tok = pt.Split(Regex(pattern), behavior, invert=invert)
    elif kind == "literal":
        tok = pt.Split(pattern, behavior, invert=invert)
    elif kind == "whitespace":
        tok = pt.Whitespace()
    elif kind == "whitespace_split":
        tok = pt.WhitespaceSplit()
    elif kind == "digits":
        tok = pt.Digits(individual_digits=False)
    elif kind == "digits_individual":
        tok = pt.Digits(individual_digits=True)
    elif kind == "punctuation":
        tok = pt.Punctuation(behavior)
    else:
        raise ValueError(kind)
    offs = _byte_offsets(text)
    return [(offs[a], offs[b]) for _, (a, b) in tok.pre_tokenize_str(text)]


def check(exe: Path, cases: list[Case], max_report: int = 5) -> None:
    got = run_driver(exe, cases)
    bad = []
    for case, res in zip(cases, got):
        kind, behavior, invert, pattern, text = case
        want = reference(kind, behavior, invert, pattern, text)
        if res[0] != "ok":
            bad.append(f"{kind} {pattern!r}: refused: {res[1]}")
        elif res[3] != want:
            first = next((i for i, (a, b) in enumerate(zip(res[3], want)) if a != b), min(len(res[3]), len(want)))
            tb = text.encode("utf-8")
            show = lambda ps: [tb[a:b].decode("utf-8", "replace") for a, b in ps[max(0, first - 2):first + 3]]  # noqa: E731
            bad.append(f"{kind} {behavior} invert={invert} {pattern!r} on {text[:80]!r}...: piece {first}:"
                       f" ours {show(res[3])} tokenizers {show(want)}")
        if len(bad) >= max_report:
            break
    assert not bad, "\n".join(bad)


def regex_cases(texts: list[str], patterns=None, behaviors=None, inverts=(False, True)) -> list[Case]:
    patterns = list(PATTERNS.values()) if patterns is None else patterns
    behaviors = BEHAVIORS if behaviors is None else behaviors
    return [("regex", b, inv, p, t) for p in patterns for b in behaviors for inv in inverts for t in texts]


def char_class_cases(texts: list[str]) -> list[Case]:
    cases = []
    for t in texts:
        for kind in ("whitespace", "whitespace_split", "digits", "digits_individual"):
            cases.append((kind, None, False, "", t))
        for b in BEHAVIORS:
            cases.append(("punctuation", b, False, "", t))
    return cases


# ------------------------------------------------------------------------------------------------
# Hand-picked dialect cases (each probed against tokenizers when written).

DIALECT = [
    (r"\s+$", "a  \nb  "), (r"$", "ab\ncd\n"), (r"\Z", "ab\n\n"), (r"\z", "ab\n"), (r"^.", "ab\ncd\n"),
    (r"\n^", "a\n"), (r"^", "a\rb\nc\n"), (r"\A.", "ab"),
    (r"\p{N}{1,3}+", "2024 12345"), (r"a{2}+", "aaaaa"), (r"a{2}?b", "ab aab"), (r"a{,2}", "aaaaa"),
    (r"a{1,2}?", "aaaaa"), (r"a{2,3}+?", "aaaaaaa"), (r"a{1,2}{2}", "aaaaa"), (r"a{0,}+a", "aaa"),
    (r"a{0,1}+a", "a"), (r"a{", "a{ a{1 a{,} x{2,3"), (r"a{,}", "a{,}"), (r"a{0}b", "ab"),
    (r"a?+a", "aa"), (r"a++a", "aaa"), (r"a*+", "aaa b"), (r"(?:ab)++b", "ababb"), (r"(?>a+)a", "aaa"),
    (r"(?i:'s)", "'ſ 'S 's"), (r"(?i:k)", "\u212a K k"), (r"(?i)[a-z]+", "ABC\u212a\u017f"),
    (r"(?i)[^a-z]+", "ABC\u212a1"), (r"(?i:\p{Lu})+", "abcDEF"), (r"(?i:[\p{Nl}])+", "ⅰⅠaA"),
    (r"(?i:[^\p{Cyrillic}])+", "жЖa"), (r"(?i:[\p{Cyrillic}])+", "жЖa"), (r"(?i)i", "iIİı"),
    (r"a(?i)b|c", "aC c C aB"), (r"(a(?i)b)c", "aBc aBC"), (r"(?i)a(?-i)a", "AA Aa"), (r"(?-i:a)", "aA"),
    (r"(?m).+", "ab\ncd"), (r".", "a\nb\r"), (r"\h+", "af9 gG"), (r"\H+", "af9 gG"), (r"\v", "\x0b\n"),
    (r"\d+", "1٣৩a"), (r"\w+", "ab_٣é\u0301 \u2165x"), (r"\W+", "ab_٣ ,."), (r"\s+", "\x0b\x1c\x85\xa0a"),
    (r"\S+", "a b\x1c"), (r"\D+", "a1b"),
    (r"(?:|a)*", "a"), (r"(|a)*b", "ab"), (r"(?:a|)*?b", "ab"), (r"(?:a*)*", "aaa"), (r"(?:|a)+", "aa"),
    (r"(?:a*)+b", "aab"), (r"(a|b|)*c", "abac"), (r"(?:a?)*?x", "aax"),
    (r"x|$", "xab"), (r"\b", "ab cd é٣_"), (r"\B", "ab cd"), (r"a|", "bab"), (r"", "ab"), (r"|", "ab"),
    (r"a||b", "ab"), (r"()", "ab"), (r"(?=a)", "ba"), (r"(?!a)", "ba"),
    (r"\p{Han}+", "中文abc〇"), (r"\p{Latin}+", "abc中"), (r"\p{^L}+", "ab12"), (r"\P{L}+", "ab12"),
    (r"\p{Hiragana}+|\p{Katakana}+", "ひらカター"), (r"\p{Greek}+\p{Cyrillic}+", "αβжж"),
    (r"(?<=a)b", "abcb"), (r"(?<=ab|c)x", "abxcxdx"), (r"(?<!a)b", "abb"), (r"(?<=a?)b", "ab b"),
    (r"(?<=\b)a", "a ba"), (r"(?<=(?<=a)b)c", "abc bc"), (r"(?<=é)x", "éx ex"),
    (r"\x41\u0042\x{43}", "ABC"), (r"\x{1F600}", "😀"), (r"\0", "\0"), (r"\e\a", "\x1b\x07"),
    (r"\x4", "\x04"), (r"\x414", "A4"), (r"\08", "\x008"), (r"[\b]", "\x08"),
    (r"[\w-]+", "a-b c"), (r"[a\-z]+", "a-z b"), (r"[]a]+", "]a"), (r"[^]a]+", "]ab"), (r"[a[bc]]+", "abcd"),
    (r"[a-]+", "a-b"), (r"[-a]+", "a-b"), (r"[\s\S]", "ab"), (r"[^\s]+", "ab c"), (r"[\P{L}]+", "a1 b"),
    (r"[^\P{L}]+", "a1 b"), (r"[\p{L}\d]+", "a1 b"), (r"x(?#comment)y", "xy"), (r"(?<name>a)b", "ab"),
    (r"\p{Lu}\p{Ll}+", "Hello WORLD Ǆa ǅa"), (r"\p{Lt}", "ǅ"), (r"\p{Lm}+\p{Lo}+", "ʰʰ中"),
    (r"\p{LC}+", "aBǅ中"), (r"\p{Any}", "a"), (r"\p{Word}+", "a_1 b"), (r"\p{Cn}+", "\U000e0080a"),
    (r"\p{ Lu }", "A"), (r"\p{Uppercase_Letter}+", "AB"), (r"\p{uppercaseletter}", "A"), (r"\p{Hani}", "中"),
    (r"\p{Zs}+", " \u3000\u00a0"), (r"\p{Cc}+", "\x00\x1f"), (r"\p{Co}", "\ue000"), (r"\p{Sk}", "^`"),
    (r"\p{N}{1,3}", "12345 ٣٣٣٣"), (r"[0-9][0-9][0-9]", "1234567"), (r"\n\r\t\f", "\n\r\t\x0c"),
    (r"\/", "/"), (r"\_", "_"), (r"\%\'\ ", "%' "), (r"\é", "é"), (r"[\x{41}-\x{43}]+", "ABCD"),
    (r"[\u0041]", "A"), (r"(?i)ǅ", "Ǆǅǆ"), (r"(?i)σ", "Σσς"), (r"(?i)\x{10D50}", "\U00010d50\U00010d70"),
    (r"(?i)ꟛ", "\ua7da\ua7db\ua7dc"),
    # \w outside brackets also matches ² ³ ¹ ¼ ½ ¾; inside brackets it does not.
    (r"\w+", "½a ²b-¾"), (r"[\w]+", "½a ²b-¾"), (r"[\w-]+", "½a-²"), (r"\W+", "½a ²b-"), (r"[\W]+", "½a ²b-"),
    (r"[^\w]+", "½a ²b-"), (r"\b", "½a ²b- ¹"), (r"\B", "½a ²b-"), (r"\p{Word}+", "½a ²b"),
    (r"[\p{Word}]+", "½a ²b"), (r"\P{Word}+", "½a ²b"), (r"[\P{Word}]+", "½a ²b"),
]

UNSUPPORTED = [
    r"(a)\1", r"\k<a>", r"(?<a>x)\k<a>", r"\G", r"\K", r"\R", r"\X", r"\N", r"\O", r"\y", r"\Y",
    r"(?~a)", r"(*FAIL)", r"(?(1)a|b)", r"\Q.\E", r"\cA", r"[[:alpha:]]", r"[a-c&&b]", r"\p{Alpha}",
    r"\p{Alnum}", r"\p{Ogham}", r"\p{L&}", r"(?x)a b", r"(?s).", r"(?i)ss", r"(?i)ß", r"(?i)st",
    r"(?i)[\p{Ll}]", r"(?i)\x{1E9E}", r"(?i:[\p{Lu}])", r"(?i:[^\p{Ll}])", r"(?i)\u0130", r"a**", r"a*{2}", r"a+*", r"(?<=a+)b", r"(?<=a*)b", r"\x",
    r"\xFF", r"\uD800", r"\101", r"\x{110000}", r"\q", r"(a?){2}", r"a{3,2}",
]
INVALID = [r"a)", r"(a", r"[]", r"[^]", r"*a", r"a|*", r"{2}", r"[z-a]", r"[a-\d]", r"\p{Lu", r"\u004"]


def test_dialect_cases(driver):
    cases = []
    for p, s in DIALECT:
        for b in ("isolated", "removed"):
            cases.append(("regex", b, False, p, s))
    check(driver, cases)


def test_scanner_dispatch(driver):
    res = run_driver(driver, [("compile", None, False, PATTERNS[k], "") for k in PATTERNS])
    for (name, _), r in zip(PATTERNS.items(), res):
        assert r[0] == "ok", f"{name}: {r}"
        assert r[2] == SCANNERS.get(name, "vm"), f"{name} runs on {r[2]}"


def test_unsupported_constructs_are_refused(driver):
    res = run_driver(driver, [("compile", None, False, p, "") for p in UNSUPPORTED + INVALID])
    for p, r in zip(UNSUPPORTED + INVALID, res):
        assert r[0] == "err", f"{p!r} was accepted; it must raise RegexError"
        assert "at byte" in r[1] or "lookbehind" in r[1] or "empty" in r[1], r[1]
    # Whatever Oniguruma rejects must be rejected too (never a silent different reading).
    for p in INVALID:
        with pytest.raises(Exception):
            pt.Split(Regex(p), "isolated")


def test_every_pattern_and_behaviour_small(driver):
    texts = ["", "a", " ", "\n", "Hello world", "I'm   fine!\n\n  ok  ", "don'T 'S 'ſ 're \u212a",
             "2024-01-01 12345 ٣٤٥٦", "  leading and trailing  ", "a \n  b\r\n\tc  \n", "中文ひらがなカタカナabc",
             "<|startoftext|>hi<|endoftext|>", "x  \u00a0\u3000 y", "e\u0301\u0301 \u0301a", "😀👍🏽!!",
             "...a.b,,c", "'", "''s", " 's", "\r\n", "$", "a$b", "A-Za-z +-/", "[]\\^_`{|}~"]
    check(driver, regex_cases(texts))


def test_char_class_pretokenizers(driver):
    texts = ["", "Hello, world! 123", "a\u00a0b\u3000c\x1cd\x85e", "x٣٤y½z\u2165 ", "a\u2e42b\u2e45c\u2e5d,,d",
             "e\u0301_x-y", "  \t\n ", "中文。、「」", "$€£+<=>^`|~", "😀a"]
    check(driver, char_class_cases(texts))


# Rust's char::is_whitespace (the White_Space property), and characters that share the lead byte of
# one (C2, E1, E2, E3) without being whitespace: WhitespaceSplit skips words eight bytes at a time up
# to a byte that may start whitespace (swar::may_start_whitespace), then decides per character.
RUST_WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
WHITESPACE_LOOKALIKES = ("\x84\x86\x9f\xa1\xbf\u167f\u1681\u1fff\u200b\u200d\u2027\u202a\u202e\u2030\u205e\u2060"
                         "\u2fff\u3001\u3002\u30a2\u3400\x1c\x1f\x7f")


def test_whitespace_split_between_long_words(driver):
    assert all(c.isspace() for c in RUST_WHITESPACE)
    rng = random.Random(7)
    words = ["abcdefghijkl", "中文中文中文中文", "Ünïcödé-wörds", "Привет-мир", "😀👍🏽😀👍🏽", "ทดสอบภาษาไทย",
             *(c * 9 for c in WHITESPACE_LOOKALIKES)]
    texts = []
    for _ in range(300):
        parts = []
        for _ in range(rng.randint(1, 12)):
            word = rng.choice(words)
            parts.append(word[rng.randint(0, 3):] + rng.choice(WHITESPACE_LOOKALIKES) * rng.randint(0, 1))
            parts.append(rng.choice(RUST_WHITESPACE) * rng.randint(1, 2))
        texts.append("".join(parts))
    texts += [c * 20 for c in RUST_WHITESPACE + WHITESPACE_LOOKALIKES]
    check(driver, [("whitespace_split", "removed", False, "", t) for t in texts])


def test_literal_split(driver):
    texts = ["", "a b  c", "héllo wörld", "aaaa", "abcabcab", "  ", "x"]
    needles = [" ", "a", "aa", "ab", "é", "", "<|x|>", "."]
    cases = [("literal", b, inv, n, t) for n in needles for b in BEHAVIORS for inv in (False, True) for t in texts]
    check(driver, cases)


def _corpus_samples(limit: int, slices: int, seed: int) -> list[str]:
    texts = []
    for path in corpus_files():
        text = corpus_text(path, limit)
        texts.append(text)
        texts.extend(random_slices(text, slices, seed=seed))
    return texts


def test_corpora_isolated(driver):
    texts = _corpus_samples(32 * 1024, 0, seed=1)
    check(driver, regex_cases(texts, behaviors=["isolated"], inverts=(False,)) + char_class_cases(texts))


def test_corpora_slices_all_behaviours(driver):
    texts = [t for t in _corpus_samples(64 * 1024, 20, seed=2) if len(t) <= 300]
    check(driver, regex_cases(texts))


@pytest.mark.full
def test_corpora_full(driver):
    # Up to 1 MiB of each corpus (tokenizers' Python results dominate the time) plus 200 slices each.
    texts = _corpus_samples(1 << 20, 200, seed=3)
    check(driver, regex_cases(texts, behaviors=["isolated"], inverts=(False,)) + char_class_cases(texts))


def test_vocab_patterns_are_listed():
    """Every Split pattern in ../shared/vocab/hf is one of PATTERNS (so the tests above cover it)."""
    hf = require_shared(VOCAB / "hf")
    found = set()

    def walk(o):
        if isinstance(o, dict):
            if o.get("type") in ("Split", "Replace") and isinstance(o.get("pattern"), dict) and "Regex" in o["pattern"]:
                found.add(o["pattern"]["Regex"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    for f in sorted(hf.glob("*/tokenizer.json")):
        j = json.loads(f.read_text(encoding="utf-8"))
        walk(j.get("normalizer"))
        walk(j.get("pre_tokenizer"))
    missing = found - set(PATTERNS.values())
    assert not missing, f"Split/Replace patterns not covered by PATTERNS: {missing}"


text_strategy = st.lists(st.sampled_from(ALPHABET), min_size=0, max_size=40).map("".join)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(text_strategy, min_size=40, max_size=40))
def test_hypothesis_adversarial(driver, texts):
    check(driver, regex_cases(texts, behaviors=["isolated", "removed", "merged_with_next"]) + char_class_cases(texts))


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.text(min_size=0, max_size=30), min_size=40, max_size=40))
def test_hypothesis_any_text(driver, texts):
    texts = [t for t in texts if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    check(driver, regex_cases(texts, behaviors=["isolated", "removed"], inverts=(False,)) + char_class_cases(texts))


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(text_strategy, min_size=20, max_size=20))
def test_hypothesis_dialect_patterns(driver, texts):
    pats = sorted({p for p, _ in DIALECT})
    check(driver, [("regex", "isolated", False, p, t) for p in pats for t in texts]
          + [("regex", "removed", False, p, t) for p in pats for t in texts])


# Characters around the edges of DeepSeek-V3's classes: digits that are \p{N} but not ASCII, the ends
# of its CJK ranges and their neighbours (U+9FA6 just past 龥, U+30FB inside katakana, U+3100 after),
# marks, punctuation and symbols in and out of ASCII, \r \n and the other White_Space characters,
# controls and format characters (in [^\r\n\p{L}\p{P}\p{S}] but in no other class).
DEEPSEEK_ALPHABET = (
    list("aZz09 \t\n\r\x0b\x0c\x00\x01\x1c\x7f.,!?-_/\\\"'#$%&()[]{}<>|@^`~+=*:;")
    + ["٣", "²", "½", "Ⅵ", "\U0001d7d8", "一", "龥", "\u9fa6", "\u4dff", "ひ", "\u3040", "ゟ", "゠", "カ", "ヿ",
       "\u30fb", "\u3100", "中", "한", "\u0301", "\u0308", "\u20dd", "é", "ß", "Ж", "\u02b0", "\u00a0",
       "\u0085", "\u1680", "\u2000", "\u2028", "\u2029", "\u202f", "\u3000", "\u200b", "\ufeff", "€", "©",
       "«", "、", "。", "\U0001f600", "\U000e0080", "\ue000", "\u00ad"]
)
DEEPSEEK = [PATTERNS[k] for k in ("deepseek_digits", "deepseek_cjk", "deepseek_main")]


def _deepseek_texts(seed: int) -> tuple[list[str], list[bytes]]:
    rng = random.Random(seed)
    texts = ["".join(rng.choice(DEEPSEEK_ALPHABET) for _ in range(rng.randrange(0, 25))) for _ in range(1500)]
    # Whitespace runs with and without \r \n, before letters, marks, punctuation, digits or the end.
    dense = [" ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "a", "\u0301", ".", "1", "\x00", "中"]
    texts += ["".join(rng.choice(dense) for _ in range(rng.randrange(1, 16))) for _ in range(500)]
    texts += ["  \n  x", "a  ", "a \n", "\n\n", " \u0301", "\u0301a", "\u0301\u0301", "'abc", "'ébc", "'é",
              "x\u3000\u3000y", "\t\n \t", "٣٣٣٣", "1234567", "一龥\u9fa6ひ\u30fbヿ\u3100", " !!\r\n\r\nx", " ,",
              "\x00a", "\x001", "\u200ba", "²½x"]
    texts += _corpus_samples(4 * 1024, 20, seed=seed)
    # Invalid UTF-8: random bytes, and stray bytes (lone leads, truncated CJK) between valid text.
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 30))) for _ in range(200)]
    for _ in range(300):
        a, b = (rng.choice(texts[:1500]).encode()[:12] for _ in range(2))
        blobs.append(a + rng.choice([b"\x80", b"\xc3", b"\xe4\xb8", b"\xe9\xbe", b"\xf0\x9f\x98", b"\xff"]) + b)
    return texts, blobs


def test_deepseek_scanners_match_vm(driver):
    """Each DeepSeek-V3 scanner gives the VM's matches for its pattern, invalid UTF-8 included.

    "isolated" pieces are the matches and the gaps between them, "removed" only the gaps: together
    they pin every match down."""
    texts, blobs = _deepseek_texts(seed=7)
    for p in DEEPSEEK:
        for behavior in ("isolated", "removed"):
            ours = run_driver(driver, [("regex", behavior, False, p, t) for t in texts + blobs])
            vm = run_driver(driver, [("regex", behavior, False, f"(?:{p})", t) for t in texts + blobs])
            assert ours[0][2] != "vm" and vm[0][2] == "vm"
            bad = [(t, a[3], b[3]) for t, a, b in zip(texts + blobs, ours, vm) if a[3] != b[3]]
            assert not bad, f"{p!r} {behavior}: {len(bad)} differ from the VM, e.g. {bad[:3]}"


def test_deepseek_scanners_match_tokenizers(driver):
    texts, _ = _deepseek_texts(seed=8)
    check(driver, regex_cases(texts, patterns=DEEPSEEK, behaviors=["isolated", "removed"], inverts=(False,)))


def test_invalid_utf8_is_safe(asan_driver):
    """Invalid UTF-8 never reads out of range (no reference: tokenizers only sees valid str)."""
    rng = random.Random(5)
    blobs = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(60)]
    blobs += [b"\xe4\xb8", b"a\xf0\x9f\x98", b"\xc3", b"\x80\x80 a", b"\xed\xa0\x80x", b"\xff\xfe'\xc5\xbf"]
    pats = list(PATTERNS.values()) + [r"(?<=é|ab)x", r"\b", r".+", r"\S+", r"(?<=.)\P{L}"]
    cases = [("regex", "isolated", False, p, b) for p in pats for b in blobs]
    cases += [(k, "isolated", False, "", b) for k in ("whitespace", "whitespace_split", "digits", "punctuation")
              for b in blobs]
    res = run_driver(asan_driver, cases)
    for case, r in zip(cases, res):
        assert r[0] == "ok", (case, r)
        text = case[4]
        prev = 0
        for a, b in r[3]:
            assert prev <= a < b <= len(text), (case, r[3])
            prev = b


def test_sanitized_differential(asan_driver):
    texts = ["I'm   fine!\n\n  ok  ", "don'T 'S 'ſ 're \u212a 2024 ٣٤٥٦", "中文ひらがなカタカナabc  \u3000x",
             "e\u0301\u0301 😀👍🏽!!\r\n\r\n", ""]
    check(asan_driver, regex_cases(texts, behaviors=["isolated", "merged_with_previous"])
          + [("regex", "isolated", False, p, s) for p, s in DIALECT] + char_class_cases(texts))


def test_redos_patterns_finish(driver):
    a10k = "a" * 10_000
    cases = [
        ("regex", "isolated", False, r"(a*)*b", a10k),
        ("regex", "isolated", False, r"(a|a)*b", a10k),
        ("regex", "isolated", False, r"(a+)+b", a10k),
        ("regex", "isolated", False, r"(?:a|aa)*c", a10k[:3000]),
        ("regex", "isolated", False, r"(\s*)*x|\s+", " " * 10_000),
        ("regex", "isolated", False, r"(?:(?:a*)*)*b", a10k),
    ]
    t0 = time.perf_counter()
    res = run_driver(driver, cases, timeout=120)
    elapsed = time.perf_counter() - t0
    for case, r in zip(cases, res):
        assert r[0] == "ok", (case[3], r)
    assert elapsed < 30, f"ReDoS-shaped patterns took {elapsed:.1f}s"
    # The answers are still right (tokenizers handles these sizes too).
    check(driver, [c for c in cases if len(c[4]) <= 3000] + [
        ("regex", "isolated", False, r"(a*)*b", "a" * 2000 + "b"),
        ("regex", "isolated", False, r"(a|a)*b", "a" * 25 + "b"),
    ])


def _adversarial_mb() -> str:
    rng = random.Random(7)
    parts = []
    size = 0
    while size < 1_000_000:
        kind = rng.randrange(6)
        n = rng.choice([1, 2, 5, 100, 10_000, 100_000])
        chunk = [" ", "a", "7", "\n", " \n", "中"][kind] * n
        parts.append(chunk)
        size += len(chunk.encode())
    return "".join(parts)


def _speed_table(exe: Path, texts: dict[str, str], repeat: int = 1) -> list[str]:
    cases = [("regex", "isolated", False, p, t) for p in PATTERNS.values() for t in texts.values()]
    res = run_driver(exe, cases, repeat=repeat, timeout=600)
    lines = []
    k = 0
    for name in PATTERNS:
        row = []
        for tname, t in texts.items():
            r = res[k]
            k += 1
            mb = len(t.encode()) / 1e6
            row.append(f"{tname} {mb * repeat / (r[1] / 1e9):8.1f} MB/s")
        lines.append(f"{name:16s} {r[2]:6s} " + "  ".join(row))
    return lines


def test_adversarial_megabyte_is_fast(driver):
    """1 MB of long runs (spaces, letters, digits, newlines, CJK): every pattern stays fast."""
    text = _adversarial_mb()
    t0 = time.perf_counter()
    lines = _speed_table(driver, {"adversarial": text})
    elapsed = time.perf_counter() - t0
    print("\n" + "\n".join(lines))
    assert elapsed < 30, f"1 MB adversarial input took {elapsed:.1f}s over {len(PATTERNS)} patterns"
    # And the answers match for a prefix tokenizers handles quickly.
    check(driver, regex_cases([text[:200_000]], behaviors=["isolated"], inverts=(False,)))


@pytest.mark.full
def test_speed_report(driver):
    """Prints MB/s per pattern on real text and on the adversarial input (pytest -s -m full)."""
    texts = {p.stem[:12]: corpus_text(p, 1 << 20) for p in corpus_files() if p.suffix == ".txt"}
    texts["adversarial"] = _adversarial_mb()
    print("\n" + "\n".join(_speed_table(driver, texts, repeat=3)))
