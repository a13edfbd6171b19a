"""Differential tests: native/models/wordpiece.cc, unigram.cc and wordlevel.cc against tokenizers' models ALONE.

The native models are reached through tests/native/model_driver.cc, compiled here with g++ (once
optimised, once under AddressSanitizer + UndefinedBehaviorSanitizer). The driver encodes every piece
through the fast path (twice: the second call meets the word cache), the uncached path and the
reference twin, and fails on any difference, so these tests only compare the fast result with
`model.tokenize(piece)` of the matching tokenizers model: ids and byte offsets.

Vocabularies: the real ones of bert_base_uncased (WordPiece, and the same vocabulary as a WordLevel),
t5_small and xlm_roberta_paraphrase_mpnet (Unigram) from ../shared/vocab/hf, plus small crafted
ones for ties, duplicates, byte fallback, a missing unk and out-of-range ids.

Pieces: real corpora pre-tokenized by each tokenizer's own normalizer and pre-tokenizer (so
Unigram pieces carry their U+2581), random slices of raw text, hypothesis strings, and adversarial
pieces (long words, unknown characters, max_input_chars_per_word boundaries, "<unk>" in the text).

Scores. A tokenizer.json is read by serde_json without its float_roundtrip feature, which is not
correctly rounded: t5_small has 8334 scores that differ by one ulp from Python's float(). The model
must see tokenizers' own values, so the real Unigram vocabularies take their scores from
`Tokenizer.to_str()` (ryu: the shortest text that reads back exactly), and
`test_tokenizer_json_scores_follow_serde_json` pins the rule a tokenizer.json loader must follow.

`python tests/test_hf_models_native.py` prints the driver's --bench next to tokenizers' speed.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is the reference for the models")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from tokenizers import Tokenizer, models  # noqa: E402

from support import VOCAB, corpus_files, corpus_text, random_slices, require_shared, scratch_dir, short_docs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "native" / name for name in ("core/double_array.cc", "models/wordpiece.cc", "models/unigram.cc", "models/wordlevel.cc")]
SOURCES.append(ROOT / "tests" / "native" / "model_driver.cc")
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
WORDPIECE, UNIGRAM, WORDLEVEL = 1, 2, 3
ERROR = "<error>"  # where tokenizers raises (a Unigram unknown without unk_id)
META = "\u2581"


# ------------------------------------------------------------------------------------------------
# The driver
# ------------------------------------------------------------------------------------------------
def _compiler() -> list[str]:
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH; set CXX to run the model tests")
    return shlex.split(cxx)


def _start_build(out: Path, extra: list[str]) -> tuple[subprocess.Popen, Path, list[str]]:
    cxx = _compiler()
    cmd = [*cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native"), *extra,
           *map(str, SOURCES), "-o", str(out)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), out, extra


def _finish_build(build: tuple[subprocess.Popen, Path, list[str]]) -> Path:
    proc, out, extra = build
    _, stderr = proc.communicate(timeout=300)
    if proc.returncode != 0 and SANITIZE[0] in extra:
        cxx = _compiler()
        probe = out.parent / "probe.cc"
        probe.write_text("int main() { return 0; }\n")
        if subprocess.run([*cxx, *SANITIZE, str(probe), "-o", str(out.parent / "probe")],
                          capture_output=True, timeout=60).returncode != 0:
            pytest.skip(f"{' '.join(cxx)} cannot build with {SANITIZE[0]} here (no sanitizer runtime?)")
    assert proc.returncode == 0, stderr
    return out


def _build(out: Path, extra: list[str]) -> Path:
    return _finish_build(_start_build(out, extra))


@pytest.fixture(scope="module")
def _builds(tmp_path_factory):
    """Both drivers compile at once (the sanitizer build is the slow one); unused ones are killed."""
    builds = {
        "optimised": _start_build(tmp_path_factory.mktemp("models") / "model_driver", ["-O2"]),
        "sanitized": _start_build(tmp_path_factory.mktemp("models_asan") / "model_driver_asan",
                                  ["-O1", "-g1", "-fno-omit-frame-pointer", *SANITIZE]),
    }
    yield builds
    for proc, _, _ in builds.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def driver(_builds) -> Path:
    return _finish_build(_builds["optimised"])


@pytest.fixture(scope="module")
def driver_asan(_builds) -> Path:
    return _finish_build(_builds["sanitized"])


def _u32(n: int) -> bytes:
    return struct.pack("<I", n)


def _bytes(b: bytes) -> bytes:
    return _u32(len(b)) + b


class Spec:
    """A model twice: the driver's VOCAB file and the tokenizers model it must reproduce."""

    def __init__(self, name: str, vocab_file: bytes, reference) -> None:
        self.name = name
        self.vocab_file = vocab_file
        self.reference = reference

    def expected(self, piece: str):
        try:
            return [(t.id, *t.offsets) for t in self.reference.tokenize(piece)]
        except Exception as e:  # tokenizers raises a plain Exception for MissingUnkId
            assert "unk" in str(e).lower(), e
            return ERROR


def _trie_keys(token_to_id: dict[str, int]) -> bytes:
    # The empty string cannot be a trie key; no model ever looks it up (see the headers).
    keys = [(t.encode(), i) for t, i in token_to_id.items() if t]
    return _u32(len(keys)) + b"".join(_bytes(k) + _u32(v) for k, v in keys)


def wordpiece_spec(name: str, vocab: dict[str, int], unk: str = "[UNK]", prefix: str = "##",
                   max_chars: int = 100, reference=None) -> Spec:
    if reference is None:
        reference = models.WordPiece(vocab, unk_token=unk, max_input_chars_per_word=max_chars,
                                     continuing_subword_prefix=prefix)
    head = (_u32(WORDPIECE) + _u32(max(vocab.values()) + 1) + _u32(vocab[unk]) + _u32(max_chars)
            + _bytes(prefix.encode()))
    return Spec(name, head + _trie_keys(vocab), reference)


def wordlevel_spec(name: str, vocab: dict[str, int], unk: str) -> Spec:
    head = _u32(WORDLEVEL) + _u32(max(vocab.values()) + 1) + _u32(vocab[unk])
    return Spec(name, head + _trie_keys(vocab), models.WordLevel(vocab, unk_token=unk))


def unigram_spec(name: str, vocab: list[tuple[str, float]], unk_id: int | None, byte_fallback: bool = False,
                 reference=None) -> Spec:
    if reference is None:
        reference = models.Unigram(vocab, unk_id, byte_fallback)
    token_to_id = {t: i for i, (t, _) in enumerate(vocab)}  # tokenizers' token_to_ids: the last id wins
    head = (_u32(UNIGRAM) + _u32(len(vocab)) + struct.pack("<i", -1 if unk_id is None else unk_id)
            + _u32(int(byte_fallback)) + struct.pack(f"<{len(vocab)}d", *(s for _, s in vocab)))
    return Spec(name, head + _trie_keys(token_to_id), reference)


def run_driver(exe: Path, spec: Spec, pieces: list[str], mode: str | None = None, *args: str) -> list:
    with tempfile.TemporaryDirectory() as tmp:
        vin, pin, out = Path(tmp) / "vocab.bin", Path(tmp) / "pieces.bin", Path(tmp) / "out.bin"
        vin.write_bytes(spec.vocab_file)
        pin.write_bytes(b"".join(_bytes(p.encode()) for p in pieces))
        cmd = [str(exe), mode, str(vin), str(pin), *args] if mode else [str(exe), str(vin), str(pin), str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"driver failed ({proc.returncode}) on {spec.name}:\n{proc.stderr[-4000:]}"
        if mode:
            return []
        data = out.read_bytes()
    results, pos = [], 0
    for _ in pieces:
        (count,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if count == 0xFFFFFFFF:
            results.append(ERROR)
            continue
        flat = struct.unpack_from(f"<{3 * count}I", data, pos)
        pos += 12 * count
        results.append([tuple(flat[i:i + 3]) for i in range(0, len(flat), 3)])
    assert pos == len(data)
    return results


def check(exe: Path, spec: Spec, pieces: list[str]) -> int:
    pieces = [p for p in dict.fromkeys(pieces) if p]  # the pipeline never hands a model an empty piece
    got = run_driver(exe, spec, pieces)
    bad = [(p, e, g) for p, g in zip(pieces, got) if (e := spec.expected(p)) != g]
    if bad:
        lines = [f"{len(bad)} of {len(pieces)} pieces differ on {spec.name}; first:"]
        for p, e, g in bad[:5]:
            lines.append(f"  {p!r}\n    tokenizers {e}\n    native     {g}")
        pytest.fail("\n".join(lines))
    return len(pieces)


# ------------------------------------------------------------------------------------------------
# The real vocabularies
# ------------------------------------------------------------------------------------------------
REAL = ["bert_base_uncased", "t5_small", "xlm_roberta_paraphrase_mpnet"]


@functools.lru_cache(maxsize=None)
def real_tokenizer(folder: str) -> Tokenizer:
    return Tokenizer.from_file(str(require_shared(VOCAB / "hf" / folder / "tokenizer.json")))


@functools.lru_cache(maxsize=None)
def real_model_json(folder: str) -> dict:
    """tokenizers' own view of the model: to_str() writes its f64 scores exactly (see the docstring)."""
    return json.loads(real_tokenizer(folder).to_str())["model"]


@functools.lru_cache(maxsize=None)
def real_spec(folder: str) -> Spec:
    tok = real_tokenizer(folder)
    model = real_model_json(folder)
    if model["type"] == "WordPiece":
        return wordpiece_spec(folder, model["vocab"], model["unk_token"], model["continuing_subword_prefix"],
                              model["max_input_chars_per_word"], reference=tok.model)
    vocab = [(t, s) for t, s in model["vocab"]]
    return unigram_spec(folder, vocab, model["unk_id"], model["byte_fallback"], reference=tok.model)


def pre_tokenized(folder: str, texts: list[str]) -> list[str]:
    """The pieces the model sees: the tokenizer's own normalizer and pre-tokenizer over each text."""
    tok = real_tokenizer(folder)
    pieces = []
    for text in texts:
        normalized = tok.normalizer.normalize_str(text) if tok.normalizer is not None else text
        pieces.extend(p for p, _ in tok.pre_tokenizer.pre_tokenize_str(normalized))
    return pieces


def corpus_texts(limit: int | None) -> list[str]:
    texts = [corpus_text(p, limit) for p in corpus_files()]
    texts.extend(short_docs(None if limit is None else 300))
    return texts


def adversarial_pieces(folder: str) -> list[str]:
    rng = random.Random(7)
    vocab = real_model_json(folder)["vocab"]
    tokens = list(vocab) if isinstance(vocab, dict) else [t for t, _ in vocab]
    pieces = [
        "a", "##", "###", "##a", "a##", "[UNK]", "<unk>", "<unk><unk>", "x<unk>\U0001F600", "</s>", "<pad>",
        "\U0001F600", "\U0001F600\U0001F600a\U0001F600", "\u0378\u0379", "a\u0378b", "\x00", "\x7f",
        "\ufffd", META, META * 3, META + "\U0001F600", META + "<unk>" + "\U0001F600" * 2,
        "unaffable", "hello" * 30, "\u00e9" * 101, "\u00e9" * 100, "\u00e9" * 99 + "\U0001F600",
        "ab" * 50, "ab" * 50 + "a", "a" * 100, "a" * 101, "\u4e2d" * 100, "\u4e2d" * 101,
        "x" * 5000, "\u00e9\u0301" * 300,
    ]
    # Long concatenations of real tokens (WordPiece continuations, Unigram lattices full of ties).
    for _ in range(200):
        k = rng.randint(2, 12)
        words = [rng.choice(tokens).replace("##", "") for _ in range(k)]
        pieces.append("".join(words))
        pieces.append(META + "".join(w.lstrip(META) for w in words))
    # Real tokens with one character changed to an unknown one.
    for _ in range(200):
        t = rng.choice(tokens)
        if len(t) > 1:
            i = rng.randrange(len(t))
            pieces.append(t[:i] + rng.choice(["\U0001F600", "\u0378", "\ue000", "\U000E0100"]) + t[i + 1:])
    return pieces


@pytest.mark.parametrize("folder", REAL)
def test_real_corpora(driver, folder):
    pieces = pre_tokenized(folder, corpus_texts(64 * 1024))
    assert check(driver, real_spec(folder), pieces) > 10_000


@pytest.mark.full
@pytest.mark.parametrize("folder", REAL)
def test_real_corpora_full(driver, folder):
    check(driver, real_spec(folder), pre_tokenized(folder, corpus_texts(None)))


@pytest.mark.parametrize("folder", REAL)
def test_real_adversarial(driver, folder):
    check(driver, real_spec(folder), adversarial_pieces(folder))


@pytest.mark.parametrize("folder", REAL)
def test_real_random_slices(driver, folder):
    """Raw text, not pre-tokenized: spaces, punctuation runs, long pieces, mixed scripts."""
    pieces = []
    for i, path in enumerate(corpus_files()):
        text = corpus_text(path, 64 * 1024)
        pieces += random_slices(text, 150, seed=i, max_len=160)
        pieces += [META + s.replace(" ", META) for s in random_slices(text, 150, seed=100 + i, max_len=60)]
    check(driver, real_spec(folder), pieces)


def test_bert_vocab_as_wordlevel(driver):
    vocab = real_model_json("bert_base_uncased")["vocab"]
    spec = wordlevel_spec("bert as WordLevel", vocab, "[UNK]")
    pieces = pre_tokenized("bert_base_uncased", corpus_texts(16 * 1024)) + adversarial_pieces("bert_base_uncased")
    check(driver, spec, pieces)


def test_tokenizer_json_scores_follow_serde_json():
    """What a tokenizer.json loader must do to give the model tokenizers' scores.

    serde_json (no float_roundtrip) reads a number as its decimal digits in a u64 and divides by
    the f64 power of ten (or multiplies): two roundings, not one. Python's float() (and strtod)
    round once, so they differ by one ulp on 8334 of t5_small's 32100 scores.
    """
    def serde_json_f64(text: str) -> float:
        sign, whole, frac, exp = re.fullmatch(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?", text).groups()
        frac = frac or ""
        significand, exponent = int(whole + frac), int(exp or 0) - len(frac)
        assert significand < 2**64 and abs(exponent) <= 308  # the branch these vocabularies use
        x = float(significand) * 10.0**exponent if exponent >= 0 else float(significand) / float(f"1e{-exponent}")
        return -x if sign else x

    for folder, python_misses in [("t5_small", 8334), ("xlm_roberta_paraphrase_mpnet", 0)]:
        path = require_shared(VOCAB / "hf" / folder / "tokenizer.json")
        raw = json.loads(path.read_text(encoding="utf-8"), parse_float=str)["model"]["vocab"]
        own = real_model_json(folder)["vocab"]
        assert [serde_json_f64(s) for _, s in raw] == [s for _, s in own]
        assert sum(float(s) != o for (_, s), (_, o) in zip(raw, own)) == python_misses


# ------------------------------------------------------------------------------------------------
# Crafted vocabularies
# ------------------------------------------------------------------------------------------------
SMALL_WORDPIECE = {"[UNK]": 0, "a": 1, "b": 2, "ab": 3, "abc": 4, "##a": 5, "##b": 6, "##c": 7, "##bc": 8,
                   "\u00e9": 9, "##\u00e9": 10, "##": 11, "c": 12, "\U0001F600": 13, "##\U0001F600": 14,
                   "x\u00e9": 15, "##abcabc": 16}


def crafted_wordpiece() -> list[Spec]:
    v = SMALL_WORDPIECE
    specs = [wordpiece_spec("small", v)]
    for max_chars in (0, 1, 2, 3, 5):
        specs.append(wordpiece_spec(f"max_chars={max_chars}", v, max_chars=max_chars))
    # Other prefixes: empty, one no key starts with, a multi-byte one.
    specs.append(wordpiece_spec("prefix ''", {k.replace("##", ""): i for k, i in v.items() if k != "##"}, prefix=""))
    specs.append(wordpiece_spec("prefix @@", v, prefix="@@"))
    specs.append(wordpiece_spec("prefix \u2581", {k.replace("##", META): i for k, i in v.items()}, prefix=META))
    # Sparse ids, the unk in the middle, a gap above the largest.
    specs.append(wordpiece_spec("sparse ids", {k: 3 * i + 7 for i, k in enumerate(v)}))
    return specs


WORDPIECE_PIECES = ["a", "b", "ab", "abc", "abcabc", "aabc", "abca", "abcx", "x", "\u00e9", "\u00e9\u00e9a",
                    "x\u00e9", "x\u00e9a", "\U0001F600", "\U0001F600\U0001F600", "a\U0001F600b", "cab", "ca",
                    "abcabcabc", "aaaaaa", "##", "##a", "a##", "c\u00e9", "bc", "cbc", "\u00e9x"]


def named(specs: list[Spec], *names: str) -> list[Spec]:
    by_name = {s.name: s for s in specs}
    return [by_name[n] for n in names]


def test_crafted_wordpiece(driver):
    rng = random.Random(3)
    alphabet = ["a", "b", "c", "x", "\u00e9", "\U0001F600", "#"]
    pieces = WORDPIECE_PIECES + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(3000)]
    for spec in crafted_wordpiece():
        check(driver, spec, pieces)


def test_crafted_wordlevel(driver):
    v = {"[UNK]": 5, "a": 0, "ab": 1, "\u00e9": 2, "\U0001F600": 9}
    check(driver, wordlevel_spec("small", v, "[UNK]"), ["a", "ab", "abc", "b", "\u00e9", "\U0001F600", "x", "[UNK]"])


def byte_tokens(bytes_: range | list[int], score: float = -5.0) -> list[tuple[str, float]]:
    return [(f"<0x{b:02X}>", score) for b in bytes_]


def crafted_unigram() -> list[Spec]:
    base = [("<unk>", 0.0), ("a", -1.0), ("b", -1.0), ("c", -1.0), ("ab", -2.0), ("bc", -2.0), ("abc", -3.0),
            ("\u00e9", -1.5), (META, -0.5), (META + "a", -1.5), (META + "ab", -2.5), ("\u00e9a", -2.5),
            ("aa", -2.0), ("aaa", -3.0)]
    specs = [
        unigram_spec("small", base, 0),
        unigram_spec("small, unk last", [*base[1:], ("<unk>", 0.0)], len(base) - 1),
        unigram_spec("small, no unk", base[1:], None),
        # Ties everywhere: every token scores the same, so the first offer stays.
        unigram_spec("all ties", [(t, -1.0) for t, _ in base], 0),
        unigram_spec("all zero", [(t, 0.0) for t, _ in base], 0),
        unigram_spec("ties with sums", [(t, -float(len(t))) for t, _ in base], 0),
        # Duplicated strings: token_to_ids and the score come from the last copy; min_score counts all.
        unigram_spec("duplicates", [*base, ("ab", -0.1), ("a", -9.0), ("zz", -50.0), ("ab", -7.0)], 0),
        # Empty strings: never matched, but their score counts towards min_score.
        unigram_spec("empty token", [*base, ("", 5.0)], 0),
        unigram_spec("empty token low", [*base, ("", -100.0)], 0),
        # Positive scores: two unks can beat a token, and a fused run may then spell a token.
        unigram_spec("positive", [("<unk>", 30.0), ("x", 100.0), ("xy", 25.0), ("y", 26.0), ("z", 25.0),
                                  ("\U0001F600z", 25.0)], 0),
        # unk_score = min over ALL ids - 10: the last id holds the minimum and decides "qx".
        unigram_spec("min score last", [("<unk>", 30.0), ("x", 100.0), ("qx", 115.0), ("w", 20.5)], 0),
        unigram_spec("positive unk last", [("x", 100.0), ("xy", 21.0), ("q", 20.0), ("<unk>", 20.0)], 3),
        # Byte fallback: complete, partial, without unk, with the unk token among them.
        unigram_spec("bytes all", [*base, *byte_tokens(range(256))], 0, True),
        unigram_spec("bytes partial", [*base, *byte_tokens([0x78, 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80])], 0, True),
        unigram_spec("bytes no unk", [*base[1:], *byte_tokens(range(256))], None, True),
        unigram_spec("bytes partial no unk", [*base[1:], *byte_tokens(range(0x80))], None, True),
        unigram_spec("bytes listed, fallback off", [*base, *byte_tokens(range(256))], 0, False),
        unigram_spec("bytes lowercase", [*base, *((f"<0x{b:02x}>", -5.0) for b in range(256))], 0, True),
        # Huge magnitudes: sums overflow to -inf, and -inf + inf is NaN.
        unigram_spec("huge", [("<unk>", 0.0), ("a", -1e308), ("b", -1e308), ("ab", 1e308), ("c", -1.7e308)], 0),
        unigram_spec("negative zero", [("<unk>", -0.0), ("a", 0.0), ("b", -0.0), ("ab", 0.0)], 0),
    ]
    return specs


def unigram_pieces(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = ["a", "b", "c", "\u00e9", META, "x", "y", "z", "q", "\U0001F600", "\x00", "<unk>", "\u4e2d"]
    fixed = ["a", "ab", "abc", "aaaa", "x", "xy", "xyz", "xx", "qx", "qxx", "xqx", "<unk>", "<unk><unk>", "a<unk>x",
             "x<unk>", META, META + "ab", META + "x", "\U0001F600", "\U0001F600z", "zz", "\u00e9\u00e9", "\x00", "y" * 40]
    return fixed + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def test_crafted_unigram(driver):
    pieces = unigram_pieces(5, 3000)
    for spec in crafted_unigram():
        check(driver, spec, pieces)


def test_crafted_unigram_random_scores(driver):
    """Random vocabularies over a tiny alphabet with scores from a few values: many exact ties."""
    rng = random.Random(11)
    alphabet = ["a", "b", "\u00e9", "\U0001F600"]
    for trial in range(60):
        tokens = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4))) for _ in range(30)]
        # Positive scores let unknown characters beat tokens, so the exact unk score shows.
        values = [-1.0, -2.0, -3.0, -0.5, -1.5, 0.0] if trial % 2 else [8.0, 10.0, 12.5, 20.0, 25.0, 30.0]
        vocab = [(t, rng.choice(values)) for t in tokens]
        unk = rng.choice([0, len(vocab), None])
        if unk is not None:
            vocab.insert(unk, ("<unk>", rng.choice(values)))
        byte_fallback = rng.random() < 0.5
        if byte_fallback:
            vocab += byte_tokens(rng.sample(range(256), 200))
        pieces = ["".join(rng.choice(alphabet + ["x"]) for _ in range(rng.randint(1, 10))) for _ in range(300)]
        check(driver, unigram_spec(f"random {trial}", vocab, unk, byte_fallback), pieces)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(alphabet=st.sampled_from(["a", "b", "c", "\u00e9", META, "x", "#", "\U0001F600", "<", "u",
                                                   "n", "k", ">"]) | st.characters(codec="utf-8"),
                        min_size=1, max_size=30), min_size=1, max_size=40))
def test_hypothesis_crafted(driver, pieces):
    for spec in [*named(crafted_wordpiece(), "small", "prefix \u2581"),
                 *named(crafted_unigram(), "small", "positive", "bytes all", "bytes no unk")]:
        check(driver, spec, pieces)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(st.characters(codec="utf-8"), min_size=1, max_size=40), min_size=1, max_size=200))
def test_hypothesis_real(driver, pieces):
    for folder in REAL:
        check(driver, real_spec(folder), pieces + [META + p for p in pieces])


# ------------------------------------------------------------------------------------------------
# Sanitizers and damaged tables
# ------------------------------------------------------------------------------------------------
def test_sanitized(driver_asan):
    """The crafted cases and a sample of real pieces under ASan + UBSan (driver twins included)."""
    for spec in crafted_wordpiece():
        check(driver_asan, spec, WORDPIECE_PIECES)
    for spec in crafted_unigram():
        check(driver_asan, spec, unigram_pieces(5, 200))
    for folder in REAL:
        pieces = pre_tokenized(folder, corpus_texts(4 * 1024))[:2000] + adversarial_pieces(folder)[:60]
        check(driver_asan, real_spec(folder), pieces)


def test_damaged_tables(driver_asan):
    """Random damage to units and values: ids stay < n_ids and every read stays in range."""
    specs = [*named(crafted_wordpiece(), "small", "prefix \u2581"),
             *named(crafted_unigram(), "small", "bytes all", "bytes no unk"),
             wordlevel_spec("small", {"[UNK]": 1, "a": 0, "ab": 2}, "[UNK]")]
    pieces = WORDPIECE_PIECES + unigram_pieces(9, 100)
    for spec in specs:
        run_driver(driver_asan, spec, pieces, "--damage", "200")


def test_out_of_range_ids_are_absent(driver):
    """Trie values >= n_ids (a damaged cartridge) behave as missing keys, never as ids."""
    v = {"[UNK]": 0, "a": 1, "ab": 2, "##b": 3}
    good = wordpiece_spec("good", {"[UNK]": 0, "a": 1, "##b": 3, "zz": 4})
    head = _u32(WORDPIECE) + _u32(5) + _u32(0) + _u32(100) + _bytes(b"##")
    bad = Spec("ab out of range", head + _trie_keys({**v, "ab": 5, "zz": 4}), good.reference)
    check(driver, bad, ["ab", "abb", "a", "b", "zz"])
    base = [("<unk>", 0.0), ("a", -1.0), ("b", -1.0)]
    ref = unigram_spec("ref", base, 0)
    head = _u32(UNIGRAM) + _u32(3) + struct.pack("<i", 0) + _u32(0) + struct.pack("<3d", 0.0, -1.0, -1.0)
    bad = Spec("unigram out of range", head + _trie_keys({"<unk>": 0, "a": 1, "b": 2, "ab": 3, "c": 99}), ref.reference)
    check(driver, bad, ["ab", "abc", "c", "ba"])


# ------------------------------------------------------------------------------------------------
# Speed: python tests/test_hf_models_native.py
# ------------------------------------------------------------------------------------------------
def _bench() -> None:
    """The driver's --bench next to tokenizers' model.tokenize called per piece from Python, and the
    floor of that call (a one-token WordLevel): subtract it to estimate tokenizers' model alone."""
    import time

    out = scratch_dir("crayon-model-driver-") / "model_driver"
    _build(out, ["-O2"])
    texts = {"en": [corpus_text(p, None) for p in corpus_files() if p.name.startswith("en_")],
             "multi": [corpus_text(p, None) for p in corpus_files() if p.name.startswith("multi_udhr_all")]}

    def per_piece(model, pieces: list[str]) -> float:
        best = 1e30
        for _ in range(3):
            t0 = time.perf_counter()
            for p in pieces:
                model.tokenize(p)
            best = min(best, time.perf_counter() - t0)
        return best

    floor_model = models.WordLevel({"[UNK]": 0}, unk_token="[UNK]")
    for folder in REAL:
        spec = real_spec(folder)
        for group, group_texts in texts.items():
            pieces = pre_tokenized(folder, group_texts)
            size = sum(len(p.encode()) for p in pieces)
            print(f"{folder} {group}: {len(pieces)} pieces, {size / 1e6:.1f} MB")
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "v").write_bytes(spec.vocab_file)
                (Path(tmp) / "p").write_bytes(b"".join(_bytes(p.encode()) for p in pieces))
                bench = subprocess.run([str(out), "--bench", str(Path(tmp) / "v"), str(Path(tmp) / "p")],
                                       capture_output=True, text=True).stdout
            print("  native " + "\n  native ".join(bench.splitlines()[1:]))
            seconds, floor = per_piece(spec.reference, pieces), per_piece(floor_model, pieces)
            print(f"  tokenizers model.tokenize per piece: {size / 1e6 / seconds:.1f} MB/s "
                  f"({seconds / len(pieces) * 1e9:.0f} ns/piece, of which ~{floor / len(pieces) * 1e9:.0f} "
                  "is the Python call)")


if __name__ == "__main__":
    _bench()
