"""Differential tests: native/text/bert.cc against tokenizers' BertNormalizer and BertPreTokenizer.

The native code is reached through tests/native/bert_driver.cc, compiled here with g++ (once
optimised, once under AddressSanitizer + UndefinedBehaviorSanitizer, both at once). The driver runs
every case through the fast functions and through their reference twins and fails on any
difference (and on a bert_is_identity / normalize_bert_same_length answer the full path
contradicts), so these tests compare only the fast result with tokenizers.

Oracles:
  normalized text   `BertNormalizer(...).normalize_str(text)`, for all 16 option combinations
  alignments        a Tokenizer with that normalizer, ByteLevel(use_regex=False) and a BPE holding
                    the 256 byte-level characters and no merges: one token per normalized byte,
                    whose offsets are that byte's alignment in chars (BytesToCharOffsetConverter's
                    rules, reproduced in `char_offsets`). Where an alignment is empty (Prepend("")
                    first), ByteLevel panics in tokenizers, so Split('(?m).') + WordLevel gives one
                    token per normalized char instead.
  pre-tokens        `BertPreTokenizer().pre_tokenize_str(text)`, offsets in chars
  both              a Tokenizer with BertNormalizer + BertPreTokenizer + WordLevel (one [UNK] per
                    pre-token): the pre-tokens of our normalized text, mapped through our
                    alignments, must have its offsets
"""
from __future__ import annotations

import functools
import random
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the reference for the BERT components")
np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers  # noqa: E402

from alignment_oracle import byte_level_tokenizer, char_offsets, cxx_compiler, per_char_tokenizer  # noqa: E402
from alignment_oracle import u32 as _u32  # noqa: E402
from support import corpus_files, corpus_text, hf_pair, random_slices, short_docs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / "text" / "bert.cc", ROOT / "native" / "text" / "normalize.cc", ROOT / "tests" / "native" / "bert_driver.cc"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
ALL_CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]

# A case is (kind, text). kind: bits 0-3 = clean_text, handle_chinese_chars, strip_accents,
# lowercase; bit 4 = Prepend("") before the BertNormalizer; PRETOKENIZE = BertPreTokenizer.
PRETOKENIZE = 256
PREPEND_EMPTY = 16
EMPTY_SECOND = 32  # the driver empties the second char's alignment: fast against reference only
ALL_OPTIONS = list(range(16))
UNCASED = 0b1111  # bert_base_uncased: clean, chinese, strip (null = lowercase), lowercase
CASED = 0b0011    # bert_base_cased
PANIC_MARKER = 0xFFFFFFFF
PANIC = "<panic>"


def option_name(kind: int) -> str:
    names = ["clean", "chinese", "strip", "lower"]
    out = "+".join(n for i, n in enumerate(names) if kind >> i & 1) or "none"
    return ("prepend('')," if kind & PREPEND_EMPTY else "") + out


def bert_normalizer(kind: int):
    bert = normalizers.BertNormalizer(clean_text=bool(kind & 1), handle_chinese_chars=bool(kind & 2),
                                      strip_accents=bool(kind & 4), lowercase=bool(kind & 8))
    if kind & PREPEND_EMPTY:
        return normalizers.Sequence([normalizers.Prepend(""), bert])
    return bert


# ------------------------------------------------------------------------------------------------
# Building and running the driver
# ------------------------------------------------------------------------------------------------
def _compiler() -> list[str]:
    return cxx_compiler("the BERT component tests")


def _start_build(out: Path, extra: list[str]) -> subprocess.Popen:
    cmd = [*_compiler(), "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native"), *extra,
           *map(str, SOURCES), "-o", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict[str, tuple[Path, subprocess.Popen]]:
    """Both drivers compile in parallel; each fixture below waits for its own."""
    d = tmp_path_factory.mktemp("bert")
    return {
        "opt": (d / "bert_driver", _start_build(d / "bert_driver", ["-O2"])),
        "asan": (d / "bert_driver_asan",
                 _start_build(d / "bert_driver_asan", ["-O1", "-g1", "-fno-omit-frame-pointer", *SANITIZE])),
    }


def _finish(build: tuple[Path, subprocess.Popen], sanitized: bool) -> Path:
    exe, proc = build
    _, err = proc.communicate(timeout=600)
    if proc.returncode != 0 and sanitized:
        probe = exe.parent / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        if subprocess.run([*_compiler(), *SANITIZE, str(probe), "-o", str(exe.parent / "probe")],
                          capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"the compiler cannot build with {SANITIZE[0]} here (no sanitizer runtime?)")
    assert proc.returncode == 0, err
    return exe


@pytest.fixture(scope="module")
def driver(builds) -> Path:
    return _finish(builds["opt"], False)


@pytest.fixture(scope="module")
def driver_asan(builds) -> Path:
    return _finish(builds["asan"], True)


def run_driver_raw(exe: Path, cases: list[tuple[int, bytes]]) -> list:
    """Driver results: for a normalizer case (flags, normalized bytes, uint32 (n, 2) alignments) or
    PANIC; for a pre-tokenizer case a uint32 (k, 2) array of byte ranges."""
    with tempfile.TemporaryDirectory() as tmp:
        cin, cout = Path(tmp) / "cases.bin", Path(tmp) / "out.bin"
        cin.write_bytes(b"".join(_u32(kind) + _u32(len(data)) + data for kind, data in cases))
        proc = subprocess.run([str(exe), str(cin), str(cout)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
        data = cout.read_bytes()
    results, pos = [], 0
    for kind, _ in cases:
        if kind & PRETOKENIZE:
            (k,) = struct.unpack_from("<I", data, pos)
            results.append(np.frombuffer(data, dtype="<u4", count=2 * k, offset=pos + 4).reshape(k, 2))
            pos += 4 + 8 * k
            continue
        (flags,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if flags == PANIC_MARKER:
            results.append(PANIC)
            continue
        (n,) = struct.unpack_from("<I", data, pos)
        text = data[pos + 4:pos + 4 + n]
        align = np.frombuffer(data, dtype="<u4", count=2 * n, offset=pos + 4 + n).reshape(n, 2)
        pos += 4 + n + 8 * n
        results.append((flags, text, align))
    assert pos == len(data)
    return results


def run_driver(exe: Path, cases: list[tuple[int, str]]) -> list:
    return run_driver_raw(exe, [(kind, text.encode("utf-8")) for kind, text in cases])


# ------------------------------------------------------------------------------------------------
# Oracles and comparisons
# ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _byte_level_tokenizer(kind: int):
    return byte_level_tokenizer(bert_normalizer(kind))


@functools.lru_cache(maxsize=None)
def _per_char_tokenizer(kind: int):
    return per_char_tokenizer(bert_normalizer(kind))


@functools.lru_cache(maxsize=None)
def _pipeline_tokenizer(kind: int):
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.normalizer = bert_normalizer(kind)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tok


def reference_text(kind: int, text: str) -> str:
    try:
        return bert_normalizer(kind).normalize_str(text)
    except BaseException as e:  # pyo3_runtime.PanicException derives from BaseException
        if type(e).__name__ != "PanicException":
            raise
        return PANIC


def check_normalizer(exe: Path, cases: list[tuple[int, str]], what: str, alignments: bool = True) -> list:
    """Normalized text (and alignments) of every case against tokenizers; returns the results."""
    results = run_driver(exe, cases)
    by_kind: dict[int, list[int]] = {}
    for i, (kind, _) in enumerate(cases):
        by_kind.setdefault(kind, []).append(i)
    for kind, idx in by_kind.items():
        for i in idx:
            text = cases[i][1]
            want = reference_text(kind, text)
            got = results[i] if results[i] is PANIC else results[i][1].decode("utf-8", errors="surrogateescape")
            assert got == want, (f"{what}: {option_name(kind)} text differs for {text[:200]!r}:"
                                 f" {got[:200]!r} != {want[:200]!r}")
        if not alignments:
            continue
        idx = [i for i in idx if results[i] is not PANIC]
        zero = [bool(len(results[i][2]) and (results[i][2][:, 0] == results[i][2][:, 1]).any()) for i in idx]
        byte_level = [i for i, z in zip(idx, zero) if not z]
        per_char = [i for i, z in zip(idx, zero) if z]
        refs = {}
        if byte_level:
            for i, e in zip(byte_level, _byte_level_tokenizer(kind).encode_batch([cases[i][1] for i in byte_level])):
                refs[i] = e.offsets
        if per_char:
            for i, e in zip(per_char, _per_char_tokenizer(kind).encode_batch([cases[i][1] for i in per_char])):
                refs[i] = e.offsets
        for i in idx:
            text, (_, norm, align) = cases[i][1], results[i]
            if i in per_char:  # one offset per normalized char: take each char's first byte
                starts = [j for j in range(len(norm)) if norm[j] & 0xC0 != 0x80]
                align = align[starts] if starts else align
            got, want = char_offsets(text, align), refs[i]
            if got != want:
                bad = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                raise AssertionError(
                    f"{what}: {option_name(kind)} alignments differ for {text[:200]!r} -> {norm[:200]!r}"
                    f" (first difference at {bad}):\n  ours {got[max(0, bad - 5):bad + 20]}\n"
                    f"  tokenizers {want[max(0, bad - 5):bad + 20]}")
    return results


def byte_to_char(text: str):
    """Char index of every byte offset 0..len(bytes) (a byte inside a char maps to its char)."""
    raw = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    starts = np.r_[(raw & 0xC0) != 0x80, True]
    return np.cumsum(starts) - 1


def check_pretokenizer(exe: Path, texts: list[str], what: str) -> None:
    results = run_driver(exe, [(PRETOKENIZE, t) for t in texts])
    pretok = pre_tokenizers.BertPreTokenizer()
    for text, pieces in zip(texts, results):
        want = pretok.pre_tokenize_str(text)
        b2c = byte_to_char(text)
        raw = text.encode("utf-8")
        got = [(raw[a:b].decode("utf-8"), (int(b2c[a]), int(b2c[b]))) for a, b in pieces]
        if got != want:
            bad = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            raise AssertionError(f"{what}: pre-tokens differ for {text[:200]!r} at piece {bad}:\n"
                                 f"  ours {got[bad:bad + 5]}\n  tokenizers {want[bad:bad + 5]}")


def check_pipeline(exe: Path, kind: int, texts: list[str], what: str) -> None:
    """Our pre-tokens of our normalized text, mapped to the original through our alignments,
    against the offsets of a BertNormalizer + BertPreTokenizer tokenizer (one token per pre-token)."""
    normalized = run_driver(exe, [(kind, t) for t in texts])
    pieces = run_driver_raw(exe, [(PRETOKENIZE, bytes(r[1])) for r in normalized])
    encs = _pipeline_tokenizer(kind).encode_batch(texts)
    for text, (_, _, align), ps, enc in zip(texts, normalized, pieces, encs):
        spans = np.array([(align[a][0], align[b - 1][1]) for a, b in ps], dtype=np.int64).reshape(-1, 2)
        got = char_offsets(text, spans)
        if got != enc.offsets:
            bad = next((j for j, (a, b) in enumerate(zip(got, enc.offsets)) if a != b), -1)
            raise AssertionError(f"{what}: {option_name(kind)} pipeline offsets differ for {text[:200]!r} at {bad}:"
                                 f"\n  ours {got[bad:bad + 5]}\n  tokenizers {enc.offsets[bad:bad + 5]}")


# ------------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------------
def every_code_point_texts(chunk: int = 8192, sep: str = "|") -> list[str]:
    """All code points in chunks, each alone between separators ('|', which no option changes and
    BertPreTokenizer isolates; it is left out of the sweep and tested in EDGE_TEXTS)."""
    cps = [c for c in ALL_CPS if chr(c) != sep]
    return [sep.join(map(chr, cps[i:i + chunk])) for i in range(0, len(cps), chunk)]


@functools.lru_cache(maxsize=None)
def interesting_code_points() -> tuple[int, ...]:
    """Code points that strip_accents or lowercase changes, every 64th one that clean_text or
    handle_chinese_chars changes (mostly private use and CJK blocks, uniform by construction) and
    every 331st other one; probed from tokenizers."""
    cps = [c for c in ALL_CPS if c != ord("|")]
    text = "|".join(map(chr, cps))
    changed = {}
    for kind in (1, 2, 4, 8):
        out = bert_normalizer(kind).normalize_str(text).split("|")
        assert len(out) == len(cps)
        changed[kind] = {c for c, o in zip(cps, out) if o != chr(c)}
    bulk = sorted((changed[1] | changed[2]) - changed[4] - changed[8])
    return tuple(sorted(changed[4] | changed[8] | set(bulk[::64]) | set(ALL_CPS[::331])))


# Characters that exercise every class and its Unicode-version edges.
ADVERSARIAL = (
    "aeiouAEIOUxyzXYZ09 \t\n\r\x0b\x0c\x00\x01\x1f\x7f\x85\xa0\u1680\u2000\u2001\u200a\u2028\u2029\u202f"
    "\u205f\u3000\u200b\u200d\ufeff\ufffd\ue000\U000f0000\u0378\u0890\u08e2\U000110cd\U00013430\u180e\u00ad"
    "\u4e00\u9fff\u3400\u4dbf\uf900\ufa30\ufaff\U00020000\U0002a6df\U0002a700\U0002b740\U0002b81f\U0002b820"
    "\U0002b920\U0002ceaf\U0002ceb0\U0002f800\U0002fa1f\U00030000\u3007\u3005\u3041\u30a2\uac00\ud55c\u1100\u1161"
    "\u0300\u0301\u0302\u0308\u0316\u0323\u0327\u0345\u034f\u0344\u0340\u0f71\u0f72\u0f73\u0f75\u0f81\u0903"
    "\u093c\u094d\u0941\u05bc\u05c1\u064b\u0670\u1734\U0001171e\U0001e944\u08d4\u20dd\u0488\u1dc0\U0001d165"
    "\U0001d16e\U0001d15e\u00e9\u00c5\u212b\u2126\u212a\u0130\u0131\u1e9e\u00df\u03a3\u0390\u1f82\u1fb3\u01c5"
    "\u0419\u0439\u0401\u0451\ufb01\ufb2c\u2163\u24b6\uff21\uff41\U00010400\U0001e900"
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~\u00a1\u00bf\u00b7\u2010\u2014\u2018\u2019\u201c\u3001\u3002\uff01"
    "\u2e42\u2e43\u166d\U000111c9\u00a7\u00b6\u02bc\u0589\u05be\u060c\u0964\u104a\U0001144b\u2e52"
)

EDGE_TEXTS = [
    "", " ", "   ", "\x00", "\ufffd", "\x00\x00a", "a\x00", "|", "a|b", "\t\n\r", "\x0b\x0c\x85", "\u3000x\u3000",
    "a", "A", "\u0130", "\u0130\u0301", "\u00c9", "e\u0301", "E\u0301\u0316", "a\u0316\u0301x", "\u0301abc",
    "\u0344\u0316", "\u0f73\u0f71\u0f72", "a\x00\u0301", "a\u200b\u0301", "\u4e2d\u0301", "\u4e2d\u6587",
    "\uf900\uf901", "\U0002f800x", "\ud55c\uad6d\uc5b4", "\u1100\u1161\u11a8", "\u01c4\u01c5\u01c6",
    "\ufb01 \ufb03", "\u03a3\u03a3 \u03a3", "\u2126\u212a\u212b", "\u0419\u0439", "Hey friend!     How are you?!?",
    "\u91ce\u53e3\u91cc\u4f73 Noguchi Rika", "don't stop-believing...", "\u2000\u2001", "\u1734\U0001171e",
    "x\u0301\u0301\u0301\u0301y", "\u00e9\u0316", "\u00e9\u0301", "\u00c5\u0328", "\u1e09\u0323",
    # Issue 25: a control clean_text removes between a starter and its marks leaves them one NFD run
    # (the ASCII fast path used to end the run at the control, so a mark NFD moved lost its
    # alignment). The reproducer, the hunt's shrunk counterexamples, and neighbours.
    "0\U0001d15e\x01\u093c", "#\u20e3\U0001d16e\x0f\u0338", "\U00011233\u10cd\U0001d16e\x08\u0327",
    "\u2c05\U0002f8ef\u0302\x1e\U0001d171", "x \U0001d15e\x01\x00\u093c\x7f\u0316", "x \u1e09\x01\u0323",
    "\U0001d15e\x01\u093c", "e\x01\u0301\u0316", "a\u0301\x00\x01\x7f\u0316b",
    "a!" * 100, "!" * 130, "a!!" * 70, " a" * 90, "ab. " * 40 + "\u00e9", "x" * 200, "\u3002" * 70 + "a" * 70,
]


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------
# The options one by one and the two real configurations; the other combinations under -m full
# (every combination also meets every code point class in the corpus, edge and hypothesis tests).
CODE_POINT_KINDS = [1, 2, 4, 8, CASED, UNCASED]


@pytest.mark.parametrize("kind", [pytest.param(k, marks=[] if k in CODE_POINT_KINDS else [pytest.mark.full])
                                  for k in ALL_OPTIONS], ids=option_name)
def test_every_code_point_text(driver, kind):
    """Text for every code point (each alone between separators), every option combination."""
    texts = every_code_point_texts()
    results = run_driver(driver, [(kind, t) for t in texts])
    norm = bert_normalizer(kind)
    for t, r in zip(texts, results):
        got, want = r[1].decode("utf-8"), norm.normalize_str(t)
        if got != want:
            a, b = got.split("|"), want.split("|")
            diff = next((x, y) for x, y in zip(a, b) if x != y) if len(a) == len(b) else (len(a), len(b))
            raise AssertionError(f"{option_name(kind)}: differs, first at {diff!r}")


def test_interesting_code_points_alignments(driver):
    """Alignments for every code point some option changes (and a sample of the rest), each after a
    base letter and before a space, for every option combination."""
    cps = interesting_code_points()
    texts = ["".join("a" + chr(c) + " " for c in cps[i:i + 4096]) for i in range(0, len(cps), 4096)]
    check_normalizer(driver, [(k, t) for k in CODE_POINT_KINDS for t in texts], "interesting code points")


def test_every_code_point_pretokenizer(driver):
    """BertPreTokenizer over every code point, each between two letters (no separator)."""
    cps = ALL_CPS
    check_pretokenizer(driver, ["".join("a" + chr(c) for c in cps[i:i + 65536]) + "a"
                                for i in range(0, len(cps), 65536)], "every code point")


@pytest.mark.full
@pytest.mark.parametrize("kind", ALL_OPTIONS, ids=option_name)
def test_every_code_point_alignments_full(driver, kind):
    check_normalizer(driver, [(kind, t) for t in every_code_point_texts(4096)], "every code point")


@pytest.mark.full
@pytest.mark.parametrize("kind", [4, 5, 12, 15], ids=option_name)
def test_every_code_point_adjacent_full(driver, kind):
    """All code points with no separator: marks reorder across neighbours, controls vanish between
    a letter and its marks."""
    check_normalizer(driver, [(kind, t) for t in every_code_point_texts(4096, "")], "adjacent code points")


def test_edge_cases(driver):
    kinds = ALL_OPTIONS + [k | PREPEND_EMPTY for k in ALL_OPTIONS]
    check_normalizer(driver, [(k, t) for k in kinds for t in EDGE_TEXTS], "edge cases")
    check_pretokenizer(driver, EDGE_TEXTS, "edge cases")


def test_empty_alignment_inside_text(driver):
    """An empty alignment that clean_text or strip_accents brings to the front (the fused pass must
    hand over to the reference); tokenizers has no normalizer that makes one, so only the driver's
    fast = reference check applies."""
    texts = EDGE_TEXTS + ["\x00ab", "\u0301ab", "\x00\u0301\u0302b", "\x00\u00e9b", "\u200bAB c"]
    run_driver(driver, [(k | EMPTY_SECOND, t) for k in ALL_OPTIONS for t in texts])


def _corpus_slices(per_file: int, seed: int, limit: int | None) -> list[str]:
    out = []
    for path in corpus_files():
        out += random_slices(corpus_text(path, limit), per_file, seed)
    return out


def test_corpus_slices(driver):
    """Random slices of every corpus and short documents through every option combination and the
    pre-tokenizer."""
    rng = random.Random(11)
    slices = _corpus_slices(80, 11, 64 * 1024) + short_docs(300)
    check_normalizer(driver, [(rng.choice(ALL_OPTIONS), s) for s in slices], "corpus slices")
    check_pretokenizer(driver, slices, "corpus slices")
    check_pipeline(driver, UNCASED, slices[::3], "corpus slices")
    check_pipeline(driver, CASED, slices[1::3], "corpus slices")


def test_corpus_pieces(driver):
    """A 16 KiB piece of each corpus under every option combination (long text: the ASCII runs,
    NFD runs and the same-length path over real documents)."""
    pieces = [corpus_text(p, 16 * 1024) for p in corpus_files()]
    check_normalizer(driver, [(k, t) for k in ALL_OPTIONS for t in pieces], "corpus pieces")
    check_pretokenizer(driver, pieces, "corpus pieces")
    for kind in (UNCASED, CASED):
        check_pipeline(driver, kind, pieces, "corpus pieces")


def test_same_length_path_is_taken(driver):
    """The fast path must apply where it should: ASCII prose, Cyrillic (same-length lowercase and й ->
    и), curly quotes; and must decline length changes."""
    files = {p.name: p for p in corpus_files()}
    english = [corpus_text(files[n], 32 * 1024) for n in ("en_gutenberg_big.txt", "en_tinyshakespeare.txt")
               if n in files]
    yes = [*english, "\u041f\u0440\u0438\u0432\u0435\u0442, \u0439\u043e\u0433!", "\u201cQuoted\u201d \u2014 yes"]
    no = ["caf\u00e9", "\u4e2d", "a\x00b", "\u0130", "a\u00a0b", "a\u0301"]
    results = check_normalizer(driver, [(UNCASED, t) for t in yes + no], "same-length")
    flags = [r[0] for r in results]
    assert all(f & 2 for f in flags[:len(yes)]), flags
    assert not any(f & 2 for f in flags[len(yes):]), flags
    results = check_normalizer(driver, [(k, "plain lowercase text, nothing to do.") for k in ALL_OPTIONS], "identity")
    assert all(r[0] & 1 for r in results)


def test_text_only_pass_resumes(driver):
    """Where the same-length pass stops (an accent, a mark, a removed control), the text-only pass
    takes up the text from the last kept ASCII char before it and keeps the bytes before (the driver
    checks the joined text against the fused pass's, and its pieces with CJK chars left unspaced):
    taken after a prefix, not where no kept ASCII char comes first."""
    files = {p.name: p for p in corpus_files()}
    multi = [corpus_text(files["multi_udhr_scripts.txt"], 16 * 1024)]
    yes = [*multi, "plain words, then caf\u00e9", "ab\x01\u0301", "a b\u0301", "x \u4e2d\u0301 \u00e9",
           "Hello, \u0130stanbul", "then \u4e2d\u6587 \u00c9\u0316 and \u1e09\x01\u0323"]
    no = ["\u00e9 first", "\u0301abc", "\x01\u0301", "\u4e2d\u00e9"]
    results = check_normalizer(driver, [(UNCASED, t) for t in yes + no], "resumed text-only pass")
    flags = [r[0] for r in results]
    assert all(f & 8 for f in flags[:len(yes)]), list(zip(flags, yes + no))
    assert not any(f & 8 for f in flags[len(yes):]), flags


def test_unspaced_cjk_path_is_taken(driver):
    """CJK chars without the spaces handle_chinese_chars puts around them and whitespace not mapped to
    ' ' (HfEngine's hot path for Chinese and Japanese; the driver checks its pieces against the
    normalized text's): taken on CJK text, compatibility ideographs included (NFD keeps them
    ideographs), declined where a length changes otherwise."""
    files = {p.name: p for p in corpus_files()}
    # (zh_xiyouji holds private-use chars, which clean_text removes: that text takes the full path)
    cjk = [corpus_text(files["zh_hongloumeng.txt"], 32 * 1024)]
    yes = [*cjk, "\u4e2d\u6587abc\u4e2d", "\uf900\uf901 \u8c48", "a\u4e2d,b", "\u4e2d", "\u3000\u4e2d",
           "a\u00a0b\u3000 c"]
    no = ["caf\u00e9 \u4e2d", "\u4e2d\u0301", "a\x00b\u4e2d"]
    results = check_normalizer(driver, [(UNCASED, t) for t in yes + no], "unspaced CJK")
    flags = [r[0] for r in results]
    assert all(f & 4 and not f & 2 for f in flags[:len(yes)]), flags
    assert not any(f & 4 for f in flags[len(yes):]), flags


@pytest.mark.full
def test_corpora_full(driver):
    for path in corpus_files():
        text = corpus_text(path, None)
        pieces = [text[i:i + 200_000] for i in range(0, len(text), 200_000)]
        check_normalizer(driver, [(k, p) for k in (UNCASED, CASED, 4, 1) for p in pieces], f"{path.name} (full)")
        check_pretokenizer(driver, pieces, f"{path.name} (full)")
        for kind in (UNCASED, CASED):
            check_pipeline(driver, kind, pieces, f"{path.name} (full)")


_alphabet = st.sampled_from(list(dict.fromkeys(ADVERSARIAL)))
_texts = st.lists(st.text(_alphabet, max_size=40), min_size=1, max_size=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(texts=_texts, kinds=st.lists(st.integers(0, 31), min_size=1, max_size=4))
@example(texts=["0\U0001d15e\x01\u093c"], kinds=[UNCASED, 0b0101])  # issue 25 (found by this test)
def test_hypothesis_adversarial(driver, texts, kinds):
    check_normalizer(driver, [(k, t) for k in kinds for t in texts], "hypothesis")
    check_pretokenizer(driver, texts, "hypothesis")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(max_size=60), min_size=1, max_size=20), kind=st.integers(0, 15))
def test_hypothesis_any_text(driver, texts, kind):
    """Hypothesis' own text strategy (any code point, surrogates excluded)."""
    texts = [t for t in texts if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    check_normalizer(driver, [(kind, t) for t in texts], "hypothesis text")
    check_pretokenizer(driver, texts, "hypothesis text")
    check_pipeline(driver, kind, texts, "hypothesis text")


def test_long_runs_are_linear(driver):
    """100k combining marks in one run, 100k CJK, 100k controls: equal to tokenizers and fast."""
    rng = random.Random(3)
    texts = [
        "a" + "".join(rng.choice("\u0301\u0316\u0345\u0334\u05b0\u0f71\u0f72\u093c\u0903") for _ in range(100_000)),
        "".join(rng.choice("\u4e00\u4e8c\uf900\U00020000 \u3002") for _ in range(100_000)),
        "".join(rng.choice("\x00\x01\x7f\u200b\ufffd\t") for _ in range(100_000)) + "x",
        "\u0130\u00c9" * 50_000,
        "a!" * 50_000 + "b" + "  x" * 30_000,
    ]
    cases = [(k, t) for k in (UNCASED, CASED, 4) for t in texts]
    start = time.perf_counter()
    run_driver(driver, cases)
    run_driver(driver, [(PRETOKENIZE, t) for t in texts])
    elapsed = time.perf_counter() - start
    assert elapsed < 10, f"{len(cases)} long cases took {elapsed:.1f}s"
    check_normalizer(driver, cases, "long runs", alignments=False)
    check_normalizer(driver, [(k, t[:20_000]) for k, t in cases], "long runs (20k)")
    check_pretokenizer(driver, texts, "long runs")


def test_sanitized(driver_asan):
    """The same driver under ASan + UBSan over edge cases, every code point, some real text and
    arbitrary bytes (invalid UTF-8 only checks fast against reference: tokenizers never sees it)."""
    kinds = ALL_OPTIONS + [k | PREPEND_EMPTY for k in ALL_OPTIONS] + [k | EMPTY_SECOND for k in ALL_OPTIONS]
    cases = [(k, t) for k in kinds for t in EDGE_TEXTS]
    cases += [(k, t) for k in (UNCASED, 4, 1) for t in every_code_point_texts(65536)[::4]]
    cases += [(k, corpus_text(p, 16 * 1024)) for p in corpus_files()[:4] for k in (UNCASED, CASED)]
    run_driver(driver_asan, cases)
    rng = random.Random(5)
    alphabet = b"a \xc3\xa9\xe4\xb8\xad\x80\xff\xcc\x81\x00!\xf0\x9f"
    blobs = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 300))) for _ in range(200)]
    run_driver_raw(driver_asan, [(k, b) for b in blobs for k in (UNCASED, CASED, 4, PRETOKENIZE)])
    run_driver(driver_asan, [(PRETOKENIZE, t) for t in EDGE_TEXTS + every_code_point_texts(65536)[::4]])


def test_speed_report(driver, tmp_path):
    """Prints normalize / pre-tokenize throughput (pytest -s); never asserted."""
    files = {p.name: p for p in corpus_files()}
    for name in ("en_gutenberg_big.txt", "zh_hongloumeng.txt", "multi_udhr_all.txt"):
        if name not in files:
            continue
        f = tmp_path / name
        f.write_text(corpus_text(files[name], 1 << 20), encoding="utf-8")
        out = subprocess.run([str(driver), "--bench", str(f)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        print(f"\n{name}:\n{out.stdout}")


def test_unspaced_cjk_through_the_tokenizer():
    """bert_base_uncased end to end on text that takes the unspaced-CJK path (CJK next to letters,
    digits and punctuation, compatibility ideographs, U+3000 and U+00A0 between words): ids,
    offsets, tokens and word ids against tokenizers, and against the same texts with a control char
    (which sends them down the full path)."""
    ours, ref = hf_pair("bert_base_uncased")
    texts = ["\u4e2d\u6587abc\u4e2d\u6587", "a\u4e2d,b\u3000c\u00a0d \u4e2d", "\uf900\uf901 \u8c48 \U0002f800 \u2f80",
             "\u7b2c1\u56de\u3000\u7504\u58eb\u96b1\u5922\u5e7b\u8b58\u901a\u9748", "x\u3000\u3000\u4e2d\u3000",
             "Caf\u00e9 \u4e2d"]
    files = {p.name: p for p in corpus_files()}
    texts += random_slices(corpus_text(files["zh_hongloumeng.txt"], 64 * 1024), 8, seed=5, max_len=800)
    for text in texts + [t + "\x01" for t in texts]:
        want, got = ref.encode(text), ours.encode(text)
        assert got.ids == want.ids, text[:40]
        assert got.offsets == want.offsets, text[:40]
        assert got.tokens == want.tokens and got.word_ids == want.word_ids, text[:40]
