"""Differential tests: native/text/normalize.cc against tokenizers' own normalizers, text AND alignments.

The native code is reached through tests/native/normalize_driver.cc, compiled here with g++ (once
optimised, once under AddressSanitizer + UndefinedBehaviorSanitizer). The driver runs every case
through the fast functions and through their reference twins and fails on any difference, so
these tests compare only the fast result with tokenizers.

Oracles:
  text        `normalizer.normalize_str(text)`
  alignments  a tokenizers Tokenizer whose pre-tokenizer is ByteLevel(use_regex=False) over a BPE
              holding the 256 byte-level characters and no merges: one token per byte of the
              normalized text, whose offsets are that byte's alignment, converted to char offsets
              by tokenizers' BytesToCharOffsetConverter (reproduced in `char_offsets`).
              Quirk: when an alignment is (0, 0) (Prepend(""), or a Replace inserting at 0),
              ByteLevel's own transform panics in tokenizers ("index out of bounds"); those cases
              use a second oracle, Split('(?m).') + WordLevel, one token per normalized char.
"""
from __future__ import annotations

import functools
import random
import re
import struct
import subprocess
import time
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the reference for normalizers")
np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tokenizers import Regex, normalizers  # noqa: E402

from alignment_oracle import byte_level_tokenizer, char_offsets, cxx_compiler, per_char_tokenizer  # noqa: E402
from alignment_oracle import u32 as _u32  # noqa: E402
from support import corpus_files, corpus_text, random_slices, short_docs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / "text" / "normalize.cc", ROOT / "tests" / "native" / "normalize_driver.cc"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
ALL_CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]

# ------------------------------------------------------------------------------------------------
# Specs: one normalizer step is a tuple; a case is (steps, text).
#   ("nfd",) ("nfkd",) ("nfc",) ("nfkc",) ("lower",) ("prepend", s) ("strip", left, right)
#   ("replace", pattern, content)          Replace {"String": pattern}
#   ("regex", pattern, content)            Replace {"Regex": pattern}; ranges found with Python re
#                                          (patterns chosen so that re and Oniguruma agree)
# ------------------------------------------------------------------------------------------------
KIND = {"nfd": 1, "nfkd": 2, "nfc": 3, "nfkc": 4, "lower": 5, "prepend": 6, "strip": 7,
        "replace": 8, "regex": 9}


def reference_step(step):
    name = step[0]
    if name == "nfd":
        return normalizers.NFD()
    if name == "nfkd":
        return normalizers.NFKD()
    if name == "nfc":
        return normalizers.NFC()
    if name == "nfkc":
        return normalizers.NFKC()
    if name == "lower":
        return normalizers.Lowercase()
    if name == "prepend":
        return normalizers.Prepend(step[1])
    if name == "strip":
        return normalizers.Strip(left=step[1], right=step[2])
    if name == "replace":
        return normalizers.Replace(step[1], step[2])
    if name == "regex":
        return normalizers.Replace(Regex(step[1]), step[2])
    raise ValueError(step)


def reference_normalizer(steps):
    return normalizers.Sequence([reference_step(s) for s in steps])


@functools.lru_cache(maxsize=None)
def _byte_level_tokenizer(steps):
    return byte_level_tokenizer(reference_normalizer(steps))


@functools.lru_cache(maxsize=None)
def _per_char_tokenizer(steps):
    return per_char_tokenizer(reference_normalizer(steps))


def _pack_args(args: list[bytes]) -> bytes:
    return _u32(len(args)) + b"".join(_u32(len(a)) + a for a in args)


def encode_case(steps, text: str) -> bytes:
    """Driver input for one case; Regex steps get their ranges from the reference's intermediate text."""
    out = [_u32(len(steps))]
    for i, step in enumerate(steps):
        name = step[0]
        out.append(_u32(KIND[name]))
        if name in ("nfd", "nfkd", "nfc", "nfkc", "lower"):
            out.append(_pack_args([]))
        elif name == "prepend":
            out.append(_pack_args([step[1].encode()]))
        elif name == "strip":
            out.append(_pack_args([bytes([int(step[1]), int(step[2])])]))
        elif name == "replace":
            out.append(_pack_args([step[1].encode(), step[2].encode()]))
        elif name == "regex":
            current = reference_normalizer(steps[:i]).normalize_str(text) if i else text
            ranges = b"".join(struct.pack("<II", *span) for span in byte_spans(step[1], current))
            out.append(_pack_args([ranges, step[2].encode()]))
    data = text.encode("utf-8")
    out.append(_u32(len(data)) + data)
    return b"".join(out)


def byte_spans(pattern: str, text: str) -> list[tuple[int, int]]:
    spans = [m.span() for m in re.finditer(pattern, text)]
    if not spans:
        return []
    starts = np.zeros(len(text) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(c.encode()) for c in text]) if text else []
    return [(int(starts[a]), int(starts[b])) for a, b in spans]


# ------------------------------------------------------------------------------------------------
# Building and running the driver
# ------------------------------------------------------------------------------------------------
def _compiler() -> list[str]:
    return cxx_compiler("the normalizer tests")


def _build(out: Path, extra: list[str]) -> Path:
    cxx = _compiler()
    cmd = [*cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native"), *extra,
           *map(str, SOURCES), "-o", str(out)]
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and "-fsanitize=address,undefined" in extra:
        probe = out.parent / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        if subprocess.run([*cxx, *SANITIZE, str(probe), "-o", str(out.parent / "probe")],
                          capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"{' '.join(cxx)} cannot build with {SANITIZE[0]} here (no sanitizer runtime?)")
    assert built.returncode == 0, built.stderr
    return out


@pytest.fixture(scope="module")
def driver(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("normalize") / "normalize_driver", ["-O2"])


@pytest.fixture(scope="module")
def driver_asan(tmp_path_factory) -> Path:
    return _build(tmp_path_factory.mktemp("normalize_asan") / "normalize_driver_asan",
                  ["-O1", "-g1", "-fno-omit-frame-pointer", *SANITIZE])


PANIC_MARKER = 0xFFFFFFFF
PANIC = "<panic>"  # where tokenizers panics (poisoned text), the driver must say so too


def reference_text(normalizer, text: str) -> str:
    try:
        return normalizer.normalize_str(text)
    except BaseException as e:  # pyo3_runtime.PanicException derives from BaseException
        if type(e).__name__ != "PanicException":
            raise
        return PANIC


def run_driver(exe: Path, cases: list[tuple[tuple, str]], workdir: Path | None = None):
    """[(normalized bytes, uint32 array of shape (n, 2))] for each case."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        cin, cout = Path(tmp) / "cases.bin", Path(tmp) / "out.bin"
        cin.write_bytes(b"".join(encode_case(steps, text) for steps, text in cases))
        proc = subprocess.run([str(exe), str(cin), str(cout)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
        data = cout.read_bytes()
    results, pos = [], 0
    for _ in cases:
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if n == PANIC_MARKER:
            results.append((PANIC, None))
            continue
        text = data[pos:pos + n]
        pos += n
        align = np.frombuffer(data, dtype="<u4", count=2 * n, offset=pos).reshape(n, 2)
        pos += 8 * n
        results.append((text, align))
    assert pos == len(data)
    return results


# ------------------------------------------------------------------------------------------------
# Comparing
# ------------------------------------------------------------------------------------------------


def reference_offsets(steps, texts: list[str], zero_width: list[bool]) -> list[list[tuple[int, int]]]:
    """Per normalized byte (ByteLevel oracle) or per normalized char (Split oracle, where some
    alignment is zero-width and ByteLevel would panic)."""
    out: list = [None] * len(texts)
    byte_level = [i for i, z in enumerate(zero_width) if not z]
    per_char = [i for i, z in enumerate(zero_width) if z]
    if byte_level:
        encs = _byte_level_tokenizer(steps).encode_batch([texts[i] for i in byte_level])
        for i, e in zip(byte_level, encs):
            out[i] = e.offsets
    if per_char:
        encs = _per_char_tokenizer(steps).encode_batch([texts[i] for i in per_char])
        for i, e in zip(per_char, encs):
            out[i] = e.offsets
    return out


def check_cases(exe: Path, cases: list[tuple[tuple, str]], what: str, alignments: bool = True) -> None:
    """Runs the driver and compares normalized text (and alignments) with tokenizers."""
    results = run_driver(exe, cases)
    by_steps: dict[tuple, list[int]] = {}
    for i, (steps, _) in enumerate(cases):
        by_steps.setdefault(steps, []).append(i)
    for steps, idx in by_steps.items():
        ref = reference_normalizer(steps)
        for i in idx:
            text = cases[i][1]
            want = reference_text(ref, text)
            got = results[i][0]
            got = got if got is PANIC else got.decode("utf-8", errors="surrogateescape")
            assert got == want, f"{what}: {steps} text differs for {text!r}: {got!r} != {want!r}"
        if not alignments:
            continue
        idx = [i for i in idx if results[i][0] is not PANIC]
        zero = [bool(len(results[i][1]) and (results[i][1][:, 0] == results[i][1][:, 1]).any()) for i in idx]
        refs = reference_offsets(steps, [cases[i][1] for i in idx], zero)
        for i, z, want in zip(idx, zero, refs):
            text, (norm, align) = cases[i][1], results[i]
            if z:  # one offset per normalized char: take each char's first byte
                starts = [j for j in range(len(norm)) if norm[j] & 0xC0 != 0x80]
                align = align[starts] if starts else align
            got = char_offsets(text, align)
            if got != want:
                bad = next(j for j, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) == len(want) else -1
                raise AssertionError(
                    f"{what}: {steps} alignments differ for {text!r} -> {norm!r}"
                    f" ({'per char' if z else 'per byte'}; first difference at {bad}):\n"
                    f"  ours {got[:60]}\n  tokenizers {want[:60]}")


# ------------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------------
UNICODE_FORMS = [("nfc",), ("nfd",), ("nfkc",), ("nfkd",)]
SINGLE = [*UNICODE_FORMS, ("lower",), ("strip", True, True), ("strip", True, False), ("strip", False, True),
          ("prepend", "\u2581"), ("prepend", "ab"), ("replace", " ", "\u2581"), ("replace", "\u2581", " "),
          ("regex", " +", "\u2581"), ("regex", "[ \t\r\n]+", " ")]
# Sequences used by real tokenizer.json files, plus combinations that stress the bookkeeping.
SEQUENCES = [
    (("nfc",),),
    (("nfkc",),),
    (("nfd",), ("lower",)),  # BERT uncased (strip accents aside)
    (("prepend", "\u2581"), ("replace", " ", "\u2581")),  # Llama 2 / SentencePiece
    (("replace", " ", "\u2581"), ("prepend", "\u2581")),
    (("nfkc",), ("lower",), ("strip", True, True)),
    (("strip", True, True), ("nfc",), ("replace", "''", '"')),
    (("regex", " {2,}", " "), ("nfkd",), ("lower",)),
    (("lower",), ("nfd",), ("nfc",)),
    (("nfkd",), ("prepend", "\u2581\u2581"), ("regex", "[ \t\r\n]+", "\u2581"), ("nfkc",)),
]


def every_code_point_texts(chunk: int = 4096, sep: str = "\x01") -> list[str]:
    """All code points in chunks, each alone between separators (U+0001, which no normalizer
    produces or changes; it is left out of the sweep itself)."""
    cps = [c for c in ALL_CPS if chr(c) != sep]
    return [sep.join(map(chr, cps[i:i + chunk])) for i in range(0, len(cps), chunk)]


def interesting_code_points() -> list[int]:
    """Code points any normalizer changes (probed from tokenizers), plus every 64th other one."""
    text = "\x01".join(chr(c) for c in ALL_CPS if c != 1)
    changed = set()
    for norm in (normalizers.NFC(), normalizers.NFD(), normalizers.NFKC(), normalizers.NFKD(),
                 normalizers.Lowercase()):
        out = norm.normalize_str(text).split("\x01")
        changed |= {c for c, o in zip((c for c in ALL_CPS if c != 1), out) if o != chr(c)}
    return sorted(changed | set(ALL_CPS[::64]))


ADVERSARIAL = (
    "aeiouAEIOUcnsyzCNSYZ \t\n\x00"
    "\u0300\u0301\u0302\u0303\u0308\u030a\u030c\u0316\u0323\u0327\u0328\u0334\u0338\u0342\u0344\u0345"
    "\u0340\u0341\u0343\u0374\u037e\u0387\u05b0\u05b4\u05bc\u05c1\u0591\u064b\u0651\u0654\u0655"
    "\u093c\u094d\u0958\u09bc\u09be\u09c7\u09d7\u0b3e\u0b47\u0b56\u0b57\u0cc2\u0cc6\u0cd5\u0dca"
    "\u0f71\u0f72\u0f73\u0f74\u0f75\u0f80\u0f81\u0fb5\u1dc0\u20d0\u20e3\u302a\u3099\u309a"
    "\u304b\u306f\u30a6\u30cf\uff76\uff9e\uff9f"
    "\u1100\u1101\u1112\u1161\u1175\u11a7\u11a8\u11c2\u11c3\uac00\uac01\ud7a3\u3131"
    "\u0130\u0131\u1e9e\u00df\u03a3\u03c3\u03c2\u0390\u1fbf\u1fbe\u01c4\u01c5\u01c6\u0149\u1e9b"
    "\ufb01\ufb00\ufb03\ufb1d\ufb2c\u2126\u212a\u212b\u00c5\u00e5\u01fa\u1e0b\u1e0d\u1e69\u1fd3"
    "\u2460\u00bd\u2122\u3392\u32ff\u2adc\u2add\u0344\u1fee\u1fed"
    "\uff21\uff3a\uff41\uff10\u3000\u00a0\u2003\u200b\u2028\u0085\u1680\u202f\u205f\u180e\ufeff"
    "\U0001f44d\U0001f3fd\u200d\U0001f468\U0001f1ef\U0001f1f5\U0001fbf0\U0001d400\U0001d7ce"
    "\U00010d50\U00010d70\u1c89\ua7cb\u2c2f\U0001e900\U0001e944\U00011d42\u1df6\U000110ba\U00011099"
    "\U0001d15e\U0001d165\U0001d16e\U0002f800\u2f00\u00c0\u00e9\u0065\u0041\u212b"
)


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", [*UNICODE_FORMS, ("lower",), ("strip", True, True)], ids=str)
def test_every_code_point(driver, step):
    """Text for every code point (each alone between separators); alignments by rule: every output
    char of an isolated code point maps to that code point (the oracle confirms the rule on the
    interesting ones in test_interesting_code_points_alignments, and on all of them under -m full)."""
    texts = every_code_point_texts()
    results = run_driver(driver, [((step,), t) for t in texts])
    ref = reference_normalizer((step,))
    for t, (norm, align) in zip(texts, results):
        want = ref.normalize_str(t)
        got = norm.decode("utf-8")
        if got != want:
            a, b = got.split("\x01"), want.split("\x01")
            diff = next((x, y) for x, y in zip(a, b) if x != y) if len(a) == len(b) else (len(a), len(b))
            raise AssertionError(f"{step}: differs, first at {diff!r}")
        if step[0] == "strip":
            continue
        orig = np.frombuffer(t.encode(), dtype=np.uint8)
        seps = np.flatnonzero(orig == 1)
        starts, ends = np.r_[0, seps + 1], np.r_[seps, len(orig)]
        nb = np.frombuffer(norm, dtype=np.uint8)
        word = np.cumsum(nb == 1)  # which isolated code point each normalized byte came from
        keep = nb != 1
        assert (align[keep, 0] == starts[word[keep]]).all() and (align[keep, 1] == ends[word[keep]]).all()


def test_interesting_code_points_alignments(driver):
    """Alignments against the oracle for every code point any Unicode normalizer or Lowercase
    changes (and a sample of the rest), each after a base letter and before a space."""
    cps = interesting_code_points()
    texts = ["".join("a" + chr(c) + " " for c in cps[i:i + 512]) for i in range(0, len(cps), 512)]
    cases = [((s,), t) for s in [*UNICODE_FORMS, ("lower",)] for t in texts]
    check_cases(driver, cases, "interesting code points")


@pytest.mark.full
@pytest.mark.parametrize("step", [*UNICODE_FORMS, ("lower",)], ids=str)
def test_every_code_point_alignments_full(driver, step):
    check_cases(driver, [((step,), t) for t in every_code_point_texts(2048)], "every code point")


@pytest.mark.full
def test_every_code_point_adjacent_full(driver):
    """All code points with no separator: marks reorder and compose across neighbours."""
    cases = [((s,), t) for s in [*UNICODE_FORMS, ("lower",)] for t in every_code_point_texts(2048, "")]
    check_cases(driver, cases, "adjacent code points")


def test_composition_sequences(driver):
    """NFC/NFKC over the decompositions of every decomposable code point, reversed mark orders
    and Hangul jamo sequences; NFD/NFKD over the same."""
    nfd, nfkd = normalizers.NFD(), normalizers.NFKD()
    texts: list[str] = []
    for c in ALL_CPS:
        ch = chr(c)
        d = nfkd.normalize_str(ch)
        if d != ch:
            texts.append(d)
            if len(d) > 2:
                texts.append(d[0] + d[:0:-1])  # marks in reverse order
            texts.append(nfd.normalize_str(ch) + "\u0316\u0301")
    jamo = [chr(c) for c in range(0x1100, 0x1113)] + [chr(c) for c in range(0x1161, 0x1176)] + \
           [chr(c) for c in range(0x11A7, 0x11C3)]
    rng = random.Random(7)
    texts += ["".join(rng.choice(jamo) for _ in range(rng.randint(1, 12))) for _ in range(400)]
    batches = ["\n".join(texts[i:i + 300]) for i in range(0, len(texts), 300)]
    cases = [((s,), t) for s in UNICODE_FORMS for t in batches]
    check_cases(driver, cases, "composition sequences")


def test_trailers_that_compose_with_nothing_before_them(driver):
    """Short texts of trailers (Quick_Check Maybe: the second char of some composition), their
    partners, other starters and marks of every order. The NFC and NFKC quick checks let a trailer
    through when the starter before it has no composition with it or a mark blocks it; the driver
    fails any case a check lets through that the form then changes, and the oracle checks the rest."""
    nfd = normalizers.NFD()
    partners, trailers = set(), set()
    for c in ALL_CPS:
        d = nfd.normalize_str(chr(c))
        if len(d) == 2:
            partners.add(d[0])
            trailers.add(d[1])
    partners, trailers = sorted(partners), sorted(trailers)
    marks = [chr(c) for c in (0x0301, 0x0316, 0x0327, 0x0330, 0x0342, 0x05B0, 0x0742, 0x093C, 0x09BC, 0x09CD,
                              0x0E48, 0x0EC8, 0x1039, 0x103A, 0x302A, 0x3099)]
    starters = list("aAeoz ") + [chr(c) for c in (0x0915, 0x0995, 0x0B95, 0x0D15, 0x0D9A, 0x0712, 0x4E00, 0xAC00,
                                                  0xAC01, 0x1100, 0x0627, 0x00E9, 0x1E00)]
    rng = random.Random(23)
    pools = [trailers, partners, marks, starters]
    texts = ["".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 6))) for _ in range(3000)]
    # The cases reach the claim: texts NFC leaves alone although they hold a trailer.
    nfc = normalizers.NFC()
    kept = [t for t in texts if nfc.normalize_str(t) == t and any(ch in trailers for ch in t)]
    assert len(kept) > 300
    cases = [((s,), t) for s in UNICODE_FORMS for t in texts]
    check_cases(driver, cases, "trailers")


def _corpus_cases(count_per_file: int, seed: int, limit: int | None) -> list[tuple[tuple, str]]:
    cases = []
    rng = random.Random(seed)
    for path in corpus_files():
        text = corpus_text(path, limit)
        for s in random_slices(text, count_per_file, seed):
            cases.append((rng.choice(SEQUENCES + [(x,) for x in SINGLE]), s))
    return cases


def test_real_text_sequences(driver):
    """Random slices of every corpus through the single normalizers and the real-world sequences."""
    check_cases(driver, _corpus_cases(120, 11, 256 * 1024), "corpus slices")
    docs = short_docs(400)
    check_cases(driver, [(seq, d) for seq in SEQUENCES for d in docs[:40]], "short docs")


def test_real_text_long(driver):
    """Whole 64 KiB pieces of each corpus, one case per form: the segmenting fast path on long text."""
    cases = []
    for path in corpus_files():
        text = corpus_text(path, 64 * 1024)
        for seq in [(s,) for s in [*UNICODE_FORMS, ("lower",)]] + [SEQUENCES[3], SEQUENCES[5]]:
            cases.append((seq, text))
    check_cases(driver, cases, "corpus pieces")


@pytest.mark.full
def test_real_text_full(driver):
    for path in corpus_files():
        text = corpus_text(path, None)
        pieces = [text[i:i + 200_000] for i in range(0, len(text), 200_000)]
        seqs = [SEQUENCES[i] for i in (0, 2, 3, 5)]  # NFC, NFD+Lowercase, Llama 2, NFKC+Lowercase+Strip
        check_cases(driver, [(seq, p) for seq in seqs for p in pieces], f"{path.name} (full)")


EDGE_TEXTS = [
    "", " ", "   ", "\x00", "a", "\u00e9", "e\u0301", "a\u0316\u0301x", "\u0344\u0316", "\u0301abc",
    "\u0130a", "\u1e9e\u00df", "\u03a3\u03a3 \u03a3", "\ufb01 \ufb03", "\uff21\uff22", "\u1100\u1161\u11a8",
    "\uac00\u11a7", "\u0b47\u0b3e", "\u0f73\u0f71\u0f72", "\U0001f468\u200d\U0001f469", "\U0001fbf0",
    " \t\n a b \u3000", "\u3000", "\u2581x", "x  y   z ", "''a''", "\ud55c\uad6d\uc5b4", "\u00c5\u212b",
]
EDGE_STEPS = [
    (("prepend", ""),), (("prepend", "\u2581"),), (("prepend", "\U0001f600x"),),
    (("replace", "", "x"),), (("replace", "", ""),), (("replace", "a", ""),), (("replace", "ab", "c"),),
    (("replace", " ", ""),), (("replace", "\u0301", "!"),), (("replace", ".", "?"),),
    (("replace", "a.b", "-"),), (("replace", "(", ")"),), (("replace", "\\", "/"),), (("replace", "#&-~", "x"),),
    (("replace", "x", "\U0001f600\U0001f600"),), (("replace", "''", '"'),), (("replace", "\x00", "0"),),
    (("regex", " ", ""),), (("regex", " +", "\u2581"),), (("regex", "", "_"),),
    (("strip", True, True),), (("strip", True, False),), (("strip", False, True),), (("strip", False, False),),
    (("replace", "a", ""), ("prepend", "__")), (("prepend", ""), ("prepend", "x")), (("prepend", ""), ("nfd",)),
    (("replace", "", "\u0301"), ("nfc",)), (("replace", "", "\u0301"), ("nfd",), ("lower",)),
    (("prepend", ""), ("strip", True, True)), (("prepend", ""), ("strip", False, True)),
    (("prepend", ""), ("strip", True, False)), (("regex", "\\A", "_"), ("lower",)), (("regex", "\\A", "_"),),
    (("replace", "", "-"), ("nfkc",), ("prepend", "\u2581")),
    *[(s,) for s in [*UNICODE_FORMS, ("lower",)]],
]


def test_edge_cases(driver):
    cases = [(steps, t) for steps in EDGE_STEPS for t in EDGE_TEXTS]
    check_cases(driver, cases, "edge cases")


def test_ascii_runs_of_many_lengths_then_a_change(driver):
    """The NFC/NFKC quick check skips ASCII 32, then 8, then 1 byte at a time (normalize.cc,
    ascii_run_end): runs of the lengths around those steps, ending in a mark that composes with
    the run's last letter, in one that composes with nothing, in a character the form changes, or
    in the end of the text; each also after a non-ASCII start."""
    cases = []
    for k in [*range(0, 18), 23, 24, 25, 31, 32, 33, 39, 40, 41, 47, 48, 63, 64, 65, 71]:
        run = "".join("abcdefghij"[i % 10] for i in range(k))
        for tail in ("e\u0301", "\u0301", "\u212b", "\u00e9", "\ufb01", "", "\u4e2d\u0301"):
            for head in ("", "\u00e9"):
                cases += [((form,), head + run + tail) for form in UNICODE_FORMS]
    check_cases(driver, cases, "ASCII runs then a change")


def test_two_byte_characters_then_a_mark(driver):
    """quick_scan passes the two-byte characters that leave its state as a fresh starter with one
    table load (normalize.cc, InertTwoByte): every character of U+0080..U+07FF followed by marks
    that compose with some of them (Ж + U+0308 is Ӝ), by marks that compose with none, by a
    character a form changes, under every form."""
    chars = [chr(cp) for cp in range(0x80, 0x800)]
    tails = ["\u0308", "\u0301", "\u0327", "\u0654", "\u05b4", "\u0300\u0316", "x", "\u212b"]
    texts = ["".join(c + tail + " " for c in chars) for tail in tails]
    check_cases(driver, [((form,), t) for form in UNICODE_FORMS for t in texts], "two-byte characters then a mark")


def test_long_runs_are_linear(driver):
    """100k combining marks in one run, 100k jamo, 100k spaces: equal to tokenizers and fast."""
    rng = random.Random(3)
    marks = "\u0301\u0316\u0345\u0334\u05b0\u0f71\u0f72\u093c\u3099"
    texts = [
        "a" + "".join(rng.choice(marks) for _ in range(100_000)),
        "".join(rng.choice("\u1100\u1161\u11a8\uac00") for _ in range(100_000)),
        " " * 100_000 + "x" + " " * 100_000,
        "\u0130" * 50_000,
    ]
    steps = [*UNICODE_FORMS, ("lower",), ("strip", True, True), ("replace", " ", "\u2581"), ("prepend", "\u2581")]
    cases = [((s,), t) for s in steps for t in texts]
    start = time.perf_counter()
    run_driver(driver, cases)
    elapsed = time.perf_counter() - start
    assert elapsed < 10, f"{len(cases)} long cases took {elapsed:.1f}s"
    check_cases(driver, cases, "long runs", alignments=False)
    check_cases(driver, [((s,), t[:20_000]) for s in steps for t in texts], "long runs (20k)")


_alphabet = st.sampled_from(list(dict.fromkeys(ADVERSARIAL)))
_texts = st.lists(st.text(_alphabet, max_size=40), min_size=1, max_size=25)
_steps = st.lists(st.sampled_from(SINGLE + [("prepend", ""), ("replace", "", "-"), ("replace", "a", ""),
                                            ("regex", "\u0301", "")]), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(texts=_texts, steps=_steps)
def test_hypothesis_adversarial(driver, texts, steps):
    steps = tuple(steps)
    check_cases(driver, [(steps, t) for t in texts], "hypothesis")


def test_sanitized(driver_asan):
    """The same driver under ASan + UBSan over edge cases, every code point (one form each) and
    some real text."""
    cases = [(steps, t) for steps in EDGE_STEPS for t in EDGE_TEXTS]
    cases += [((s,), t) for s in [*UNICODE_FORMS, ("lower",)] for t in every_code_point_texts(65536)[::3]]
    for path in corpus_files()[:4]:
        text = corpus_text(path, 32 * 1024)
        cases += [(seq, text) for seq in SEQUENCES]
    rng = random.Random(5)
    cases.append(((("nfc",),), "a" + "".join(rng.choice("\u0301\u0316\u0345") for _ in range(20_000))))
    results = run_driver(driver_asan, cases)
    assert len(results) == len(cases)


def test_speed_report(driver, tmp_path):
    """Prints NFC / Lowercase throughput on real NFC text (pytest -s); never asserted."""
    files = {p.name: p for p in corpus_files()}
    for name in ("en_botchan.txt", "ja_wagahaiwa_nekodearu.txt", "multi_udhr_all.txt"):
        if name not in files:
            continue
        f = tmp_path / name
        f.write_text(corpus_text(files[name], 1 << 20), encoding="utf-8")
        out = subprocess.run([str(driver), "--bench", str(f)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        print(f"\n{name}:\n{out.stdout}")
