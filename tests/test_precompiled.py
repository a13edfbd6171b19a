"""Differential tests: native/text/precompiled.cc against tokenizers' Precompiled normalizer, text AND
alignments.

The native code is reached through tests/native/precompiled_driver.cc, compiled here with g++ (once
optimised, once under AddressSanitizer + UndefinedBehaviorSanitizer). The driver runs every
Precompiled step through normalize() and through its slow twin normalize_reference() and fails on
any difference (or on an is_identity() that claims an unchanged text wrongly), so these tests
compare only the fast result with tokenizers.

Charsmaps: the real one of t5_small and xlm_roberta_paraphrase_mpnet (SentencePiece's nmt_nfkc; the
two files carry the same bytes), crafted ones built here (`build_charsmap`: darts-clone layout) to
reach the quirks, the probe charsmaps of tools/gen_grapheme_tables.py, and garbled ones.

Oracles:
  text        `normalizer.normalize_str(text)`; a PanicException is "panic"; an exception from the
              constructor is "rejected"
  alignments  a Tokenizer whose pre-tokenizer is ByteLevel(use_regex=False) over a BPE holding the
              256 byte-level characters and no merges: one token per byte of the normalized text,
              whose offsets are that byte's alignment, converted to char offsets by tokenizers'
              BytesToCharOffsetConverter (reproduced in `char_offsets`). Where an alignment is
              (0, 0) (after Prepend(""), the poisoned text of native/text/normalize.h) ByteLevel panics,
              so those cases use Split('(?m).') + WordLevel: one token per normalized char.
"""
from __future__ import annotations

import base64
import functools
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the reference for Precompiled")
np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tokenizers import normalizers  # noqa: E402

from alignment_oracle import byte_level_tokenizer, char_offsets, cxx_compiler, per_char_tokenizer  # noqa: E402
from alignment_oracle import u32 as _u32  # noqa: E402
from support import ROOT, VOCAB, corpus_files, corpus_text, random_slices, require_shared, short_docs  # noqa: E402

os.environ.setdefault("RUST_BACKTRACE", "0")  # tokenizers' panics are expected here; keep them short

SOURCES = [ROOT / "native" / "text" / "precompiled.cc", ROOT / "native" / "text" / "normalize.cc",
           ROOT / "tests" / "native" / "precompiled_driver.cc"]
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
ALL_CPS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
REAL_MODELS = ["t5_small", "xlm_roberta_paraphrase_mpnet"]

PANIC = "<panic>"        # tokenizers panics while normalizing (a hostile charsmap, poisoned text)
REJECTED = "<rejected>"  # tokenizers refuses the charsmap


# ------------------------------------------------------------------------------------------------
# Charsmaps
# ------------------------------------------------------------------------------------------------
def build_charsmap(mapping: dict[bytes, bytes]) -> bytes:
    """A precompiled_charsmap: u32 trie size, darts-clone units, NUL-terminated strings.

    Keys are non-empty byte strings without NUL (they may end inside a UTF-8 sequence); values are
    UTF-8 without NUL. A node's children sit at base ^ label with base a multiple of 256 used by no
    other node (so a label check can never lead into a stranger's children), its leaf at base ^ 0;
    the array is whole blocks of 256, so a walk never leaves it."""
    strings, where = bytearray(), {}
    for value in sorted(set(mapping.values())):
        where[value] = len(strings)
        strings += value + b"\0"
    trie: dict = {}
    for key, value in mapping.items():
        assert key and b"\0" not in key and b"\0" not in value
        node = trie
        for b in key:
            node = node.setdefault(b, {})
        node[-1] = where[value]
    units, used, bases = [0] * 256, bytearray(256), set()
    used[0] = 1
    stack = [(0, trie)]
    base_hint = 256
    while stack:
        pos, node = stack.pop()
        labels = sorted(k for k in node if k >= 0)
        slots = labels + ([0] if -1 in node else [])
        base = base_hint
        while True:
            if base + 256 > len(units):
                units += [0] * 256
                used += bytearray(256)
            if base not in bases and not any(used[base | s] for s in slots):
                break
            base += 256
        bases.add(base)
        while base_hint in bases:
            base_hint += 256
        offset = pos ^ base
        assert offset < 1 << 21, "charsmap too large for this builder"
        units[pos] |= offset << 10
        for s in slots:
            used[base | s] = 1
        if -1 in node:
            units[base] = (1 << 31) | node[-1]
        for label in labels:
            child = node[label]
            units[base | label] = label | ((1 << 8) if -1 in child else 0)
            stack.append((base | label, child))
    trie_bytes = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + bytes(strings)


def charsmap_of(mapping: dict[str, str]) -> bytes:
    return build_charsmap({k.encode(): v.encode() for k, v in mapping.items()})


def real_charsmaps() -> dict[str, bytes]:
    out = {}
    for name in REAL_MODELS:
        path = require_shared(VOCAB / "hf" / name / "tokenizer.json")
        norm = json.loads(path.read_text(encoding="utf-8"))["normalizer"]
        assert norm["type"] == "Precompiled", f"{name}: expected a Precompiled normalizer"
        out[name] = base64.b64decode(norm["precompiled_charsmap"])
    return out


@functools.lru_cache(maxsize=None)
def nmt() -> bytes:
    """The real charsmap (both models carry the same bytes; test_real_charsmaps checks it)."""
    return real_charsmaps()[REAL_MODELS[0]]


# ------------------------------------------------------------------------------------------------
# Cases: (steps, text); a step is ("pc", blob) or a normalize.h step:
#   ("nfd",) ("nfkd",) ("nfc",) ("nfkc",) ("lower",) ("prepend", s) ("replace", pattern, content)
# ------------------------------------------------------------------------------------------------
KIND = {"nfd": 1, "nfkd": 2, "nfc": 3, "nfkc": 4, "lower": 5, "prepend": 6, "replace": 8, "pc": 100}


def reference_step(step):
    name = step[0]
    if name == "pc":
        return normalizers.Precompiled(step[1])
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
    if name == "replace":
        return normalizers.Replace(step[1], step[2])
    raise ValueError(step)


def reference_normalizer(steps):
    """tokenizers' normalizer for the steps, or REJECTED when it refuses a charsmap."""
    try:
        return normalizers.Sequence([reference_step(s) for s in steps])
    except Exception:
        return REJECTED


def _args(args: list[bytes]) -> bytes:
    return _u32(len(args)) + b"".join(_u32(len(a)) + a for a in args)


def encode_cases(cases) -> bytes:
    blobs: dict[bytes, int] = {}
    body = []
    for steps, text in cases:
        body.append(_u32(len(steps)))
        for step in steps:
            body.append(_u32(KIND[step[0]]))
            if step[0] == "pc":
                body.append(_args([_u32(blobs.setdefault(step[1], len(blobs)))]))
            else:
                body.append(_args([s.encode() for s in step[1:]]))
        data = text.encode("utf-8")
        body.append(_u32(len(data)) + data)
    head = [_u32(len(blobs))] + [_u32(len(b)) + b for b in blobs]
    return b"".join(head + body)


# ------------------------------------------------------------------------------------------------
# Building and running the driver
# ------------------------------------------------------------------------------------------------
def _compiler() -> list[str]:
    return cxx_compiler("the Precompiled tests")


FLAVOURS = {"O2": ["-O2"], "asan": ["-O1", "-g1", "-fno-omit-frame-pointer", *SANITIZE]}


class _Builds:
    """Both drivers, compiled at once: every translation unit of both flavours in parallel (the
    sanitized objects build while the optimised driver's tests run)."""

    def __init__(self, tmp: Path):
        self.tmp, self.cxx, self.jobs = tmp, _compiler(), {}
        for flavour, flags in FLAVOURS.items():
            for src in SOURCES:
                obj = tmp / f"{flavour}-{src.stem}.o"
                cmd = [*self.cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native"), *flags,
                       "-c", str(src), "-o", str(obj)]
                self.jobs[(flavour, src)] = (obj, subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                                                   stderr=subprocess.PIPE, text=True))

    def link(self, flavour: str) -> Path:
        objs, errors = [], []
        for src in SOURCES:
            obj, proc = self.jobs[(flavour, src)]
            _, err = proc.communicate(timeout=300)
            if proc.returncode != 0:
                errors.append(err)
            objs.append(str(obj))
        exe = self.tmp / f"precompiled_driver_{flavour}"
        if not errors:
            linked = subprocess.run([*self.cxx, *FLAVOURS[flavour], *objs, "-o", str(exe)],
                                    capture_output=True, text=True, timeout=300)
            errors += [linked.stderr] if linked.returncode else []
        if errors and flavour == "asan":
            probe = self.tmp / "probe.cc"
            probe.write_text("int main() { return 0; }\n")
            if subprocess.run([*self.cxx, *SANITIZE, str(probe), "-o", str(self.tmp / "probe")],
                              capture_output=True, timeout=60).returncode != 0:
                pytest.skip(f"{' '.join(self.cxx)} cannot build with {SANITIZE[0]} here (no sanitizer runtime?)")
        assert not errors, "\n".join(errors)
        return exe

    def close(self) -> None:
        for _, proc in self.jobs.values():
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture(scope="module")
def _builds(tmp_path_factory):
    builds = _Builds(tmp_path_factory.mktemp("precompiled"))
    yield builds
    builds.close()


@pytest.fixture(scope="module")
def driver(_builds) -> Path:
    return _builds.link("O2")


@pytest.fixture(scope="module")
def driver_asan(_builds) -> Path:
    return _builds.link("asan")


def run_driver(exe: Path, cases):
    """[(normalized bytes, uint32 array (n, 2)) | (PANIC, None) | (REJECTED, None)] per case."""
    with tempfile.TemporaryDirectory() as tmp:
        cin, cout = Path(tmp) / "cases.bin", Path(tmp) / "out.bin"
        cin.write_bytes(encode_cases(cases))
        proc = subprocess.run([str(exe), str(cin), str(cout)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
        data = cout.read_bytes()
    results, pos = [], 0
    for _ in cases:
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if n in (0xFFFFFFFF, 0xFFFFFFFE):
            results.append((PANIC if n == 0xFFFFFFFF else REJECTED, None))
            continue
        text = data[pos:pos + n]
        pos += n
        results.append((text, np.frombuffer(data, dtype="<u4", count=2 * n, offset=pos).reshape(n, 2)))
        pos += 8 * n
    assert pos == len(data)
    return results


# ------------------------------------------------------------------------------------------------
# Comparing
# ------------------------------------------------------------------------------------------------
def reference_text(normalizer, text: str) -> str:
    if normalizer is REJECTED:
        return REJECTED
    try:
        return normalizer.normalize_str(text)
    except BaseException as e:  # pyo3_runtime.PanicException derives from BaseException
        if type(e).__name__ != "PanicException":
            raise
        return PANIC


@functools.lru_cache(maxsize=None)
def _byte_level_tokenizer(steps):
    return byte_level_tokenizer(reference_normalizer(steps))


@functools.lru_cache(maxsize=None)
def _per_char_tokenizer(steps):
    return per_char_tokenizer(reference_normalizer(steps))


def check_cases(exe: Path, cases, what: str, alignments: bool = True) -> int:
    """Runs the driver, compares text (and alignments) with tokenizers; returns the number of cases."""
    results = run_driver(exe, cases)
    by_steps: dict[tuple, list[int]] = {}
    for i, (steps, _) in enumerate(cases):
        by_steps.setdefault(steps, []).append(i)
    for steps, idx in by_steps.items():
        ref = reference_normalizer(steps)
        label = tuple(s if s[0] != "pc" else ("pc", f"<{len(s[1])} bytes>") for s in steps)
        for i in idx:
            text = cases[i][1]
            want = reference_text(ref, text)
            got = results[i][0]
            got = got if isinstance(got, str) else got.decode("utf-8", errors="surrogateescape")
            if got != want:
                raise AssertionError(f"{what}: {label} text differs for {text[:300]!r}:\n"
                                     f"  ours       {got[:300]!r}\n  tokenizers {want[:300]!r}")
        if not alignments or ref is REJECTED:
            continue
        idx = [i for i in idx if not isinstance(results[i][0], str)]
        zero = [bool(len(results[i][1]) and (results[i][1][:, 0] == results[i][1][:, 1]).any()) for i in idx]
        byte_level = [i for i, z in zip(idx, zero) if not z]
        per_char = [i for i, z in zip(idx, zero) if z]
        refs = {}
        for group, tok in ((byte_level, _byte_level_tokenizer), (per_char, _per_char_tokenizer)):
            if group:
                for i, enc in zip(group, tok(steps).encode_batch([cases[i][1] for i in group])):
                    refs[i] = enc.offsets
        for i in idx:
            text, (norm, align) = cases[i][1], results[i]
            if i in per_char:  # one offset per normalized char: take each char's first byte
                starts = [j for j in range(len(norm)) if norm[j] & 0xC0 != 0x80]
                align = align[starts] if starts else align
            got, want = char_offsets(text, align), refs[i]
            if got != want:
                bad = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
                raise AssertionError(
                    f"{what}: {label} alignments differ for {text[:200]!r} -> {norm[:200]!r}"
                    f" (first difference at {bad}):\n  ours       {got[bad:bad + 12]}\n"
                    f"  tokenizers {want[bad:bad + 12]}")
    return len(cases)


# ------------------------------------------------------------------------------------------------
# Inputs
# ------------------------------------------------------------------------------------------------
# Chars that stress the segmentation and the charsmap: marks, emoji ZWJ sequences, skin tones,
# variation selectors, CR LF, Hangul jamo and syllables, regional indicators, controls (removed by
# nmt_nfkc), full-width forms, NFKC expansions, Indic conjuncts (GB9c), Prepend, SpacingMark.
ALPHABET = list(dict.fromkeys(
    "aeiouAEIOUcnsyzCNSYZ<=> \t\n\r\x00\x01\x1e\x7f\x0b\x0c"
    "\u0300\u0301\u0302\u0308\u030a\u0316\u0323\u0327\u0338\u0340\u0341\u0345\u05b0\u064b\u20d0"
    "\ufe0e\ufe0f\u200d\u200c\u200b\u200e\u2028\ufeff\u00ad\u0085\u00a0\u3000"
    "\U0001f468\U0001f469\U0001f466\u2764\U0001f44d\U0001f3fd\u00a9\u203c\U0001f600\U0001faf1"
    "\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8"
    "\u1100\u1161\u11a8\uac00\uac01\ud7b0\ua960\u3131\uffa1"
    "\u0915\u094d\u0937\u0930\u093f\u0903\u0958\u093c\u09cd\u0995\u0d4e\u0600\u0605\u06dd\U000110bd"
    "\u0e01\u0e33\u0e48\u0627\u0644"
    "\uff21\uff41\uff10\uff5e\uff76\uff9e\u309a\u3099\u304b\u30ab\u4e00\u2f00\uf900"
    "\u2122\ufb01\u2460\u00bd\u3392\u1e9e\u0130\u212b\u2126\u00c5\u01c4\u2163\u2026\u33ff\u1f80"
))

REAL_PRE_STEPS = [(), (("nfd",),), (("lower",),), (("prepend", "\u2581"),), (("replace", " ", "\u2581"),),
                  (("nfkc",),)]


def every_code_point_texts(chunk: int, sep: str, before: str = "") -> list[str]:
    cps = [c for c in ALL_CPS if chr(c) != sep]
    return [sep.join(before + chr(c) for c in cps[i:i + chunk]) for i in range(0, len(cps), chunk)]


def quirk_charsmap() -> bytes:
    """Keys over ALPHABET chars exercising every branch: multi-char keys (first key wins), keys
    longer than any cluster looked up whole, keys ending inside a UTF-8 sequence, empty and
    expanding replacements, keys on chars of long clusters."""
    m = {
        b"a": b"A", b"a\xcc\x81": "\u00e1".encode(), b"a\xcc\x81\xcc\x82": b"X",  # first prefix wins
        b"e\xcc\x81": b"", b"i": b"", b"o": b"OO", b"u": "\u00fc\u00fc\u00fc".encode(),
        b"\x01": b"", b"\x1e": b"", b"\t": b" ", b"\r": b"\n", b"\n": b"", b"\x7f": b"DEL",
        "\u0301".encode(): b"", "\u0308".encode(): "\u0301".encode(), "\u0316".encode(): b"ab",
        b"\xe2\x84": b"<2100>",  # a key ending inside U+2100..U+213F
        b"\xf0\x9f\x91": b"E",  # inside U+1F440..U+1F47F
        "\u2122".encode(): b"TM", "\ufb01".encode(): b"fi", "\u3000".encode(): b" ",
        "\u0958".encode(): "\u0915\u093c".encode(), "\u0915\u094d".encode(): b"K",
        "\u1100\u1161".encode(): "\uac00".encode(), "\u1100\u1161\u11a8".encode(): b"never",
        "\U0001f468\u200d".encode(): b"MAN+", "\u00a9".encode(): b"(c)", "\u200d".encode(): b"",
        "\U0001f1ef\U0001f1f5".encode(): b"JP", "\U0001f1ef".encode(): b"J",
        "\u200b".encode(): b"", "\ufeff".encode(): b"", "\u0600".encode(): b"#", "\u0903".encode(): b":",
        b"\r\n": b"CRLF", "\uff21".encode(): b"A", "\uff9e".encode(): "\u3099".encode(),
        "\u0e33".encode(): "\u0e4d\u0e32".encode(), "\u093f".encode(): b"", "\u1f80".encode(): b"\xe1\xbc\x80\xce\xb9",
    }
    return build_charsmap(m)


def garbled_charsmaps(seed: int, count: int) -> list[bytes]:
    """Hostile charsmaps derived from the real one and from small crafted ones: truncated, bytes
    flipped in the units, huge offsets and values, odd trie sizes."""
    rng = random.Random(seed)
    real = nmt()
    small = [quirk_charsmap(), charsmap_of({"a": "b", "\u00e9": "e\u0301"})]
    out = [b"", b"\x00", b"\x00\x00\x00", b"\x00\x00\x00\x00", b"\x00\x00\x00\x00abc",
           b"\x04\x00\x00\x00", b"\x05\x00\x00\x00\x00\x00\x00\x00", b"\x05\x00\x00\x00\x00\x00\x00\x00\xff",
           b"\x08\x00\x00\x00" + b"\xff" * 8, real[:4] + real[4:100], real[:len(real) // 2],
           real + b"\xc3", real + "\u00e9".encode(), b"\xff\xff\xff\xff" + real[4:]]
    for _ in range(count):
        base = bytearray(rng.choice([real] * 3 + small))
        (size,) = struct.unpack_from("<I", base)
        kind = rng.randrange(5)
        if kind == 0:  # flip bytes inside the units
            for _ in range(rng.randint(1, 40)):
                base[4 + rng.randrange(max(1, min(size, 4096)))] ^= 1 << rng.randrange(8)
        elif kind == 1:  # random units near the root
            for _ in range(rng.randint(1, 20)):
                i = 4 + 4 * rng.randrange(max(1, min(size // 4, 1024)))
                base[i:i + 4] = struct.pack("<I", rng.getrandbits(32))
        elif kind == 2:  # leaves with values past the strings / inside a UTF-8 sequence
            units = struct.unpack_from(f"<{size // 4}I", base, 4)
            leaves = [i for i, u in enumerate(units) if u >> 31]
            for i in rng.sample(leaves, min(len(leaves), 30)):
                value = rng.choice([len(base) - 4 - size, len(base) - 4 - size + 1, rng.randrange(1 << 20),
                                    rng.randrange(max(1, len(base) - 4 - size))])
                struct.pack_into("<I", base, 4 + 4 * i, (1 << 31) | value)
        elif kind == 3:  # a different trie size
            struct.pack_into("<I", base, 0, rng.choice([size - 4, size + 1, size - 1, size // 2, 4, 0]))
        else:  # truncated
            del base[rng.randrange(len(base)):]
        out.append(bytes(base))
    return out


# ------------------------------------------------------------------------------------------------
# Tests
# ------------------------------------------------------------------------------------------------
def test_real_charsmaps(driver):
    """Both models' charsmaps load; they are the same bytes (nmt_nfkc), so later tests run it once."""
    blobs = real_charsmaps()
    assert len(set(blobs.values())) == 1, "the real charsmaps differ now: test each of them"
    texts = ["", "Hello world", "\x01\x02Caf\u00e9 \u2122\r\n\uff21\uff22", "e\u0301\u0302 \u0958\u0301"]
    check_cases(driver, [((("pc", b),), t) for b in blobs.values() for t in texts], "real charsmaps")


def _corpus_cases(count_per_file: int, seed: int, limit: int | None):
    rng = random.Random(seed)
    cases = []
    for path in corpus_files():
        text = corpus_text(path, limit)
        for s in random_slices(text, count_per_file, seed):
            cases.append((rng.choice(REAL_PRE_STEPS) + (("pc", nmt()),), s))
    return cases


def test_real_text(driver):
    """Random slices of every corpus (some after another normalizer, so that the alignments that
    come in are not the identity), short documents, and 48 KiB pieces of each corpus whole."""
    check_cases(driver, _corpus_cases(60, 11, 256 * 1024), "corpus slices")
    check_cases(driver, [((("pc", nmt()),), d) for d in short_docs(300)], "short docs")
    pieces = [corpus_text(p, 48 * 1024) for p in corpus_files()]
    check_cases(driver, [((("pc", nmt()),), t) for t in pieces], "corpus pieces")


def test_every_code_point(driver):
    """The real charsmap over every code point: alone between spaces (text and alignments), after
    "a" and all adjacent (text; their alignments under -m full)."""
    pc = (("pc", nmt()),)
    check_cases(driver, [(pc, t) for t in every_code_point_texts(8192, " ")], "every code point")
    check_cases(driver, [(pc, t) for t in every_code_point_texts(8192, " ", "a")], "after a", alignments=False)
    check_cases(driver, [(pc, t) for t in every_code_point_texts(16384, "")], "adjacent", alignments=False)


@pytest.mark.full
def test_every_code_point_full(driver):
    pc = (("pc", nmt()),)
    check_cases(driver, [(pc, t) for t in every_code_point_texts(8192, " ", "a")], "after a (full)")
    check_cases(driver, [(pc, t) for t in every_code_point_texts(8192, "")], "adjacent (full)")
    check_cases(driver, [(pc, t) for t in every_code_point_texts(8192, " ", "\r")], "after CR (full)")


def test_grapheme_probes(driver):
    """tools/gen_grapheme_tables.py's probes through the driver, for every code point below
    U+30000 that the committed tables give a property other than Any, and every 61st other one: the
    grapheme tables and the rule order against tokenizers itself. All code points under -m full."""
    _probe_test(driver, full=False)


@pytest.mark.full
def test_grapheme_probes_full(driver):
    _probe_test(driver, full=True)


def committed_runs() -> list[tuple[int, int, int]]:
    """(first, end, props) of native/tables/grapheme_tables.h's runs."""
    import re

    header = (ROOT / "native" / "tables" / "grapheme_tables.h").read_text(encoding="utf-8")
    body = header[header.index("kRuns[kRunCount] = {"):]
    words = [int(w, 16) for w in re.findall(r"0x([0-9A-F]{8})", body)]
    starts = [w >> 8 for w in words] + [0x110000]
    return [(starts[i], starts[i + 1], w & 0xFF) for i, w in enumerate(words)]


def _probe_test(driver, full: bool):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_grapheme_tables as gen
    finally:
        sys.path.pop(0)
    cps = [c for c in ALL_CPS if c >= 0x7F]
    if not full:
        special = set()
        for lo, hi, props in committed_runs():
            if props and hi > 0x7F:
                special.update(c for c in range(max(lo, 0x7F), min(hi, 0x30000)) if not 0xD800 <= c <= 0xDFFF)
        cps = sorted(special | set(cps[::61]))
    cases = []
    for name, scheme in gen.SCHEMES.items():
        blob = gen.probe_charsmap(scheme["unkeyed"])
        m = scheme["M"][0]
        # scheme B serves the code points whose lead byte scheme A leaves unkeyed (and a sample)
        mine = cps if name == "A" else [c for c in cps if chr(c).encode()[0] == 0xCC or c % 7 == 0]
        for _, parts, _ in gen.TEMPLATES:
            text = [m if p == "M" else gen.HELPERS[p][0] if p != "X" else "X" for p in parts]
            prefix, suffix = "".join(text[:parts.index("X")]), "".join(text[parts.index("X") + 1:])
            probes = [prefix + chr(c) + suffix for c in mine]
            step = 20000
            cases += [((("pc", blob),), "\n".join(probes[i:i + step])) for i in range(0, len(probes), step)]
    check_cases(driver, cases, "grapheme probes", alignments=not full)


def test_quirks(driver):
    """Crafted charsmap over the quirks, texts built to hit each of them, alone and after other
    normalizers (incoming alignments that are not the identity, and poisoned text)."""
    blob = quirk_charsmap()
    texts = [
        "", "a", "ab", "a\u0301", "a\u0301\u0302", "a\u0301\u0302\u0303", "e\u0301x", "xe\u0301", "e\u0301",
        "i", "iii", "ixi", "\x01", "\x01\x01abc", "\x01\u2122\x1eg", "\u2122\x1eg", "x\x1e", "x\x1e\x1e\x1ey",
        "oio", "uiu", "\u0316i", "\u0316\u0316", "e\u0316", "\r\n", "\t\r\n\n", "a\r\nb", "\n\na",
        "\u2100\u2101\u2122", "\U0001f440\U0001f468\u200d\U0001f469", "\U0001f468\u200d\U0001f469\u200d\U0001f466",
        "\u00a9\u200d\u00a9\u0301", "\U0001f1ef\U0001f1f5\U0001f1ef\U0001f1f5\U0001f1ef", "\U0001f1ef\u0301",
        "\u0915\u094d\u0958\u0301", "\u0958\u0301", "\u0915\u094d\u0937\u093f", "\u1100\u1161\u11a8",
        "\u1100\u1161", "\u1100\u1161\u0301", "\u0600a", "\u0600\u0301", "x\u0903", "\u0903", "\ufb01\u0301",
        "a" + "\u0301" * 10, "\u0301" * 5 + "a", "\x00a\x00", "a\x00\u0301", "\u3000\u3000x", "\uff21\uff9e",
        "\u0e01\u0e33", "\u0e33\u0e33", "\u1f80\u0345", "\x7f\x7f", "\u200b\ufeffa\u200b", "\ufeff",
        "\u00e1\u0301", "\U0001f44d\U0001f3fd", "\u093f\u093f", "a\u093f",
    ]
    seqs = [(), (("nfd",),), (("nfkc",),), (("lower",),), (("prepend", "\u2581"),), (("prepend", ""),),
            (("replace", "a", ""),), (("replace", "x", "xyz"),)]
    cases = [(pre + (("pc", blob),), t) for pre in seqs for t in texts]
    cases += [((("pc", blob), ("pc", blob)), t) for t in texts]  # twice: alignments already moved
    cases += [((("pc", nmt()),), t) for t in texts]
    check_cases(driver, cases, "quirks")


def test_ideograph_runs(driver):
    """scan() passes over a U+4E00..U+9FFF ideograph without its tables when the next character is
    another ideograph, an ASCII byte or the end (it is then a cluster alone) and no key is the
    ideograph alone. Keys here join an ideograph to a mark, a joiner or a spacing mark (each keeps
    the ideograph in its cluster), a few ideographs are keys alone, and U+4DFF / U+A000 (the
    range's neighbours, other lead bytes) are keys too."""
    blob = charsmap_of({"\u4e2d\u0301": "A", "\u6587\u200d": "B", "\u4e00\u0903": "C", "\u9fff": "D",
                        "\u5b57": "E", "\u4dff": "F", "\ua000": "G", "\u4e2d\u4e2d": "H", "x": "y"})
    alphabet = ["\u4e2d", "\u6587", "\u4e00", "\u9fff", "\u5b57", "\u4dff", "\ua000", "\u8a9e", "\u0301",
                "\u200d", "\u0903", "x", " ", "\uff0c", "\U0001f600", "\u3002"]
    rng = random.Random(11)
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(400)]
    texts += ["\u4e2d" * 9, "\u4e2d" * 9 + "\u0301", "\u6587" * 5 + "\u200d", "\u4e00" * 3 + "\u0903x", "\u8a9e\u9fff",
              "\u8a9e" * 4 + "\u4dff", "\u4e2d\u4e2d\u0301"]
    check_cases(driver, [((("pc", blob),), t) for t in texts], "ideograph runs")


def test_malformed_charsmaps(driver):
    """Rejected where tokenizers rejects, panics where it panics, otherwise the same text."""
    blobs = garbled_charsmaps(3, 120)
    texts = ["a", "Hello, w\u00f6rld!\r\n", "\u00e9\u0301\uff21 \u2122\x01",
             "\u0915\u094d\u0937 \U0001f468\u200d\U0001f469", "x" * 50 + "\u00c5\u212b"]
    cases = [((("pc", b),), t) for b in blobs for t in texts]
    check_cases(driver, cases, "malformed charsmaps", alignments=False)
    with tempfile.TemporaryDirectory() as tmp:
        cin = Path(tmp) / "cases.bin"
        cin.write_bytes(encode_cases([((("pc", b),), "a") for b in blobs[:9]]))
        out = subprocess.run([str(driver), str(cin), str(Path(tmp) / "out.bin")], capture_output=True, text=True)
    messages = [line for line in out.stdout.splitlines() if "rejected" in line]
    assert any("fewer than the 4" in m for m in messages), messages
    assert any("truncated" in m for m in messages), messages
    assert any("not valid UTF-8" in m for m in messages), messages


_chars = st.sampled_from(ALPHABET)
_texts = st.lists(st.text(_chars, max_size=30), min_size=1, max_size=20)
_key = st.one_of(st.text(_chars.filter(lambda c: c != "\x00"), min_size=1, max_size=3).map(str.encode),
                 _chars.filter(lambda c: len(c.encode()) > 1).map(lambda c: c.encode()[:-1]))
_value = st.text(_chars.filter(lambda c: c != "\x00"), max_size=3).map(str.encode)
_charsmaps = st.dictionaries(_key, _value, min_size=1, max_size=25)
_pre = st.sampled_from([(), (("nfd",),), (("nfkc",),), (("lower",),), (("prepend", "\u2581"),), (("prepend", ""),),
                        (("replace", " ", ""),)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(texts=_texts, mapping=_charsmaps, pre=_pre)
def test_hypothesis_crafted(driver, texts, mapping, pre):
    """Random charsmaps over the adversarial alphabet (keys may end inside a UTF-8 sequence)."""
    blob = build_charsmap(mapping)
    check_cases(driver, [(pre + (("pc", blob),), t) for t in texts], "hypothesis crafted")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(texts=_texts, pre=_pre)
def test_hypothesis_real(driver, texts, pre):
    check_cases(driver, [(pre + (("pc", nmt()),), t) for t in texts], "hypothesis real")


def test_long_runs_are_linear(driver):
    """100k marks in one cluster, 100k regional indicators, 100k removed controls at the start
    (every later char out of step), 100k conjunct links: equal to tokenizers and fast."""
    rng = random.Random(3)
    texts = [
        "a" + "".join(rng.choice("\u0301\u0316\u0308\u094d\u200d") for _ in range(100_000)),
        "\U0001f1ef" * 100_000 + "x",
        "\x01" * 100_000 + "Hello \u2122 world " * 1000,
        "\u0915\u094d" * 50_000 + "\u0915\u0301",
        "\u00a9\u200d" * 50_000 + "\u00a9\u0301",
        "\r\n" * 50_000,
    ]
    cases = [((("pc", b),), t) for b in (nmt(), quirk_charsmap()) for t in texts]
    start = time.perf_counter()
    run_driver(driver, cases)
    elapsed = time.perf_counter() - start
    assert elapsed < 10, f"{len(cases)} long cases took {elapsed:.1f}s"
    check_cases(driver, cases, "long runs", alignments=False)
    check_cases(driver, [(s, t[:20_000]) for s, t in cases], "long runs (20k)")


def test_sanitized(driver_asan):
    """The driver under ASan + UBSan: quirks, garbled charsmaps, every code point, real text."""
    blob = quirk_charsmap()
    cases = [((("pc", b),), t) for b in garbled_charsmaps(9, 60)
             for t in ["a\u0301 \u2122\r\n\x01", "\u0915\u094d\u0937\U0001f468\u200d\U0001f469" * 3]]
    cases += [((("pc", b),), t) for b in (nmt(), blob) for t in every_code_point_texts(1 << 20, "")]
    cases += [(pre + (("pc", blob),), "".join(ALPHABET) * 3) for pre in [(), (("prepend", ""),), (("nfd",),)]]
    for path in corpus_files()[:4]:
        cases.append(((("pc", nmt()),), corpus_text(path, 32 * 1024)))
    results = run_driver(driver_asan, cases)
    assert len(results) == len(cases)


def test_speed_report(driver, tmp_path):
    """Prints is_identity / normalize throughput with the real charsmap (pytest -s); never asserted."""
    blob = tmp_path / "nmt.bin"
    blob.write_bytes(nmt())
    files = {p.name: p for p in corpus_files()}
    for name in ("en_botchan.txt", "ja_wagahaiwa_nekodearu.txt", "multi_udhr_all.txt"):
        if name not in files:
            continue
        f = tmp_path / name
        f.write_text(corpus_text(files[name], 1 << 20), encoding="utf-8")
        out = subprocess.run([str(driver), "--bench", str(f), str(blob)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        print(f"\n{name}:\n{out.stdout}")


@pytest.mark.full
def test_real_text_full(driver):
    for path in corpus_files():
        text = corpus_text(path, None)
        pieces = [text[i:i + 200_000] for i in range(0, len(text), 200_000)]
        check_cases(driver, [((("pc", nmt()),), p) for p in pieces], f"{path.name} (full)")
    check_cases(driver, [((("pc", nmt()),), d) for d in short_docs(None)], "short docs (full)")
