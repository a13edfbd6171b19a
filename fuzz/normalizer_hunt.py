#!/usr/bin/env python3
"""Differential hunt over every normalizer the native engine runs: crayon_hf.Tokenizer against
tokenizers.Tokenizer, ids, tokens and offsets, on generated strings built to break alignments.

Why a hunt and not only property tests: alignment bugs live in combinations (a control removed
between a starter and its marks, a decomposition whose marks reorder past another's, a mark that
strip_accents drops after NFD moved it), and each combination is rare among random strings. The
generator below draws mostly from the classes that interact - canonical and compatibility
decompositions, combining marks of several classes in non-canonical order, controls and format
chars (removed by clean_text), whitespace, CJK (isolated by handle_chinese_chars), Hangul,
surrogate-range neighbours, emoji sequences, case mappings that change length - and glues them in
clusters (a base, marks, an interleaved control or format char, more marks).

Every configuration is a tokenizer.json that both libraries load from the same string:
  model "bytes"  ByteLevel(use_regex=False) over a BPE of the 256 byte-level chars, no merges: one
                 token per normalized byte, whose offsets are that byte's alignment (the sharpest
                 view of the normalizer's alignments)
  model "chars"  Split('(?m).') + WordLevel([UNK]): one token per normalized char, for normalizers
                 that hand out the empty alignment (0, 0), where tokenizers' ByteLevel panics
  model "bert"   bert_base_uncased's WordPiece and BertPreTokenizer with the configuration's
                 normalizer and post-processor: real ids, [UNK] words, special tokens
A configuration the engine would not run natively is an error here, never a silent fallback.
A panic in tokenizers must be a PanicException in crayon_hf too.

Each mismatch is shrunk (chars dropped while it still mismatches) and written as one JSON line
(configuration, model, text, shrunk text, both results). Counterexamples belong in
tests/test_normalizer_hunt.py's REGRESSIONS afterwards, where the default suite replays them.

    python fuzz/normalizer_hunt.py --per-config 200000            # every configuration
    python fuzz/normalizer_hunt.py --only bert --per-config 1000000 --seed 7
    python fuzz/normalizer_hunt.py --list

Run it from outside the checkout (or with the package installed), nice'd on shared machines. It
prints one line per configuration: strings run, mismatches, seconds. Exit status 1 if anything
mismatched.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

os.environ["RUST_BACKTRACE"] = "0"  # panics are expected in some configurations: keep them short

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CRAYON_SHARED", ROOT.parent / "shared"))
BERT_JSON = SHARED / "vocab" / "hf" / "bert_base_uncased" / "tokenizer.json"
T5_JSON = SHARED / "vocab" / "hf" / "t5_small" / "tokenizer.json"


# ------------------------------------------------------------------------------------------------
# Configurations
# ------------------------------------------------------------------------------------------------
def bert(flags: int) -> dict[str, Any]:
    """BertNormalizer; flags bits: clean_text, handle_chinese_chars, strip_accents, lowercase."""
    return {"type": "BertNormalizer", "clean_text": bool(flags & 1), "handle_chinese_chars": bool(flags & 2),
            "strip_accents": bool(flags & 4), "lowercase": bool(flags & 8)}


def bert_name(flags: int) -> str:
    names = ["clean", "chinese", "strip", "lower"]
    return "bert[" + ("+".join(n for i, n in enumerate(names) if flags >> i & 1) or "none") + "]"


def seq(*items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "Sequence", "normalizers": list(items)}


def replace(pattern: str, content: str, regex: bool = False) -> dict[str, Any]:
    return {"type": "Replace", "pattern": {"Regex" if regex else "String": pattern}, "content": content}


def precompiled() -> dict[str, Any]:
    return json.loads(T5_JSON.read_text(encoding="utf-8"))["normalizer"]


# name -> (normalizer factory, models). Normalizers that hand out (0, 0) use "chars", not "bytes".
def configurations() -> dict[str, tuple[Callable[[], dict[str, Any]], tuple[str, ...]]]:
    c: dict[str, tuple[Callable[[], dict[str, Any]], tuple[str, ...]]] = {}
    for flags in range(16):
        c[bert_name(flags)] = (lambda f=flags: bert(f), ("bytes", "bert"))
    c["bert[strip_accents=null]"] = (lambda: {"type": "BertNormalizer", "clean_text": True,
                                              "handle_chinese_chars": False, "strip_accents": None,
                                              "lowercase": True}, ("bytes",))
    c["prepend('')+bert[all]"] = (lambda: seq({"type": "Prepend", "prepend": ""}, bert(15)), ("chars",))
    c["prepend('')+bert[clean+strip]"] = (lambda: seq({"type": "Prepend", "prepend": ""}, bert(5)), ("chars",))
    for form in ("NFC", "NFD", "NFKC", "NFKD"):
        c[form] = (lambda f=form: {"type": f}, ("bytes",))
    c["Lowercase"] = (lambda: {"type": "Lowercase"}, ("bytes",))
    c["Strip"] = (lambda: {"type": "Strip", "strip_left": True, "strip_right": True}, ("bytes",))
    c["Strip(left)"] = (lambda: {"type": "Strip", "strip_left": True, "strip_right": False}, ("bytes",))
    c["Strip(right)"] = (lambda: {"type": "Strip", "strip_left": False, "strip_right": True}, ("bytes",))
    c["Replace(' ','\u2581')"] = (lambda: replace(" ", "\u2581"), ("bytes",))
    c["Replace('\u0301','')"] = (lambda: replace("\u0301", ""), ("bytes",))
    c["Replace('e\u0301','\u00e9\u00e9')"] = (lambda: replace("e\u0301", "\u00e9\u00e9"), ("bytes",))
    c["Replace(re'\\s+',' ')"] = (lambda: replace(r"\s+", " ", regex=True), ("bytes",))
    c["Replace(re'\\p{M}+','')"] = (lambda: replace(r"\p{M}+", "", regex=True), ("bytes",))
    c["Replace(re'[\\x00-\\x1f]','\u2400')"] = (lambda: replace(r"[\x00-\x1f]", "\u2400", regex=True), ("bytes",))
    c["Prepend('\u2581')"] = (lambda: {"type": "Prepend", "prepend": "\u2581"}, ("bytes",))
    c["Prepend('\u0301')"] = (lambda: {"type": "Prepend", "prepend": "\u0301"}, ("bytes",))
    c["Prepend('')"] = (lambda: {"type": "Prepend", "prepend": ""}, ("chars",))
    c["Precompiled(nmt_nfkc)"] = (precompiled, ("bytes",))
    # Poisoned text (native/text/normalize.h): an insertion at 0 hands out (0, 0), after which every
    # transform-based step takes tokenizers' faithful (and sometimes panicking) path.
    c["Replace('','-')"] = (lambda: replace("", "-"), ("chars",))
    c["Replace(re'x*','')"] = (lambda: replace("x*", "", regex=True), ("chars",))
    c["seq(Prepend(''),Strip)"] = (
        lambda: seq({"type": "Prepend", "prepend": ""}, {"type": "Strip", "strip_left": True, "strip_right": True}),
        ("chars",))
    c["seq(Prepend(''),NFC)"] = (lambda: seq({"type": "Prepend", "prepend": ""}, {"type": "NFC"}), ("chars",))
    c["seq(Prepend(''),NFKD,Lowercase)"] = (
        lambda: seq({"type": "Prepend", "prepend": ""}, {"type": "NFKD"}, {"type": "Lowercase"}), ("chars",))
    c["seq(Prepend(''),Precompiled)"] = (lambda: seq({"type": "Prepend", "prepend": ""}, precompiled()), ("chars",))
    # Sequences: the real ones (CLIP, SentencePiece-style) and orders that make the steps meet.
    c["seq(NFC,Replace(re'\\s+'),Lowercase)"] = (
        lambda: seq({"type": "NFC"}, replace(r"\s+", " ", regex=True), {"type": "Lowercase"}), ("bytes",))
    c["seq(Prepend('\u2581'),Replace(' ','\u2581'))"] = (
        lambda: seq({"type": "Prepend", "prepend": "\u2581"}, replace(" ", "\u2581")), ("bytes",))
    c["seq(NFKD,bert[all])"] = (lambda: seq({"type": "NFKD"}, bert(15)), ("bytes", "bert"))
    c["seq(bert[clean],NFC)"] = (lambda: seq(bert(1), {"type": "NFC"}), ("bytes",))
    c["seq(Strip,NFD,Lowercase,NFC)"] = (
        lambda: seq({"type": "Strip", "strip_left": True, "strip_right": True}, {"type": "NFD"},
                    {"type": "Lowercase"}, {"type": "NFC"}), ("bytes",))
    c["seq(Lowercase,NFKC,Strip(left))"] = (
        lambda: seq({"type": "Lowercase"}, {"type": "NFKC"}, {"type": "Strip", "strip_left": True,
                                                                "strip_right": False}), ("bytes",))
    c["seq(Precompiled,bert[clean+strip])"] = (lambda: seq(precompiled(), bert(5)), ("bytes",))
    c["seq(Replace('\u0301',''),NFC,Prepend('\u2581'))"] = (
        lambda: seq(replace("\u0301", ""), {"type": "NFC"}, {"type": "Prepend", "prepend": "\u2581"}), ("bytes",))
    return c


# ------------------------------------------------------------------------------------------------
# Tokenizers
# ------------------------------------------------------------------------------------------------
def _byte_alphabet() -> list[str]:
    from tokenizers import pre_tokenizers

    return sorted(pre_tokenizers.ByteLevel.alphabet())


def tokenizer_json(normalizer: dict[str, Any], model: str) -> str:
    if model == "bert":
        d = json.loads(BERT_JSON.read_text(encoding="utf-8"))
        d["normalizer"] = normalizer
        return json.dumps(d)
    d: dict[str, Any] = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
                         "normalizer": normalizer, "post_processor": None, "decoder": None}
    if model == "bytes":
        d["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                              "use_regex": False}
        d["model"] = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": False, "vocab": {c: i for i, c in enumerate(_byte_alphabet())},
                      "merges": []}
    elif model == "chars":
        d["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(?m)."}, "behavior": "Isolated",
                              "invert": False}
        d["model"] = {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}
    else:
        raise ValueError(model)
    return json.dumps(d)


def load_pair(normalizer: dict[str, Any], model: str):
    import tokenizers

    import crayon_hf

    js = tokenizer_json(normalizer, model)
    ours = crayon_hf.Tokenizer.from_str(js)
    if ours.crayon_backend != "native":
        raise SystemExit(f"not native ({ours.crayon_backend}): {json.dumps(normalizer)[:200]} / {model}")
    return tokenizers.Tokenizer.from_str(js), ours


# ------------------------------------------------------------------------------------------------
# The generator
# ------------------------------------------------------------------------------------------------
def _unicode_data():
    try:
        import unicodedata2 as ud  # Unicode 16.0, the version tokenizers' classes come from
    except ImportError:  # pragma: no cover - the test extra installs it
        import unicodedata as ud
    return ud


class Pools:
    """Character classes, computed once from Unicode data (only to steer the generator: the
    oracle is tokenizers, whatever Unicode version each of its components uses)."""

    def __init__(self) -> None:
        ud = _unicode_data()
        canon, compat, controls, fmt, space, lower_changes, other = [], [], [], [], [], [], []
        marks_by_class: dict[int, list[str]] = {}
        enclosing, spacing_marks, mn_zero = [], [], []
        for cp in range(0x110000):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            ch = chr(cp)
            cat = ud.category(ch)
            dec = ud.decomposition(ch)
            ccc = ud.combining(ch)
            if dec and not dec.startswith("<"):
                canon.append(ch)
            elif dec:
                compat.append(ch)
            if ccc:
                marks_by_class.setdefault(ccc, []).append(ch)
            elif cat == "Mn":
                mn_zero.append(ch)
            elif cat == "Me":
                enclosing.append(ch)
            elif cat == "Mc":
                spacing_marks.append(ch)
            if cat == "Cc":
                controls.append(ch)
            elif cat == "Cf":
                fmt.append(ch)
            elif cat in ("Zs", "Zl", "Zp"):
                space.append(ch)
            if ch.lower() != ch or ch.upper() != ch and len(ch.upper()) > 1:
                lower_changes.append(ch)
            if cp % 97 == 0:
                other.append(ch)  # a thin uniform sample, unassigned code points included
        self.canon, self.compat, self.controls, self.format = canon, compat, controls, fmt
        self.space = space + ["\t", "\n", "\r", "\x0b", "\x0c", "\x85"]
        self.lower_changes, self.other = lower_changes, other
        self.mark_classes = sorted(marks_by_class)
        self.marks_by_class = marks_by_class
        # Marks that meet most: the classes of real text, each pool one entry per class.
        self.marks_flat = [m for ms in marks_by_class.values() for m in ms]
        self.mn_zero, self.enclosing, self.spacing_marks = mn_zero, enclosing, spacing_marks
        self.cjk = ([chr(c) for c in range(0x4E00, 0x9FFF, 37)] + [chr(c) for c in range(0x3400, 0x4DBF, 41)]
                    + [chr(c) for c in range(0x20000, 0x2A6DF, 997)] + [chr(c) for c in range(0xF900, 0xFB00)]
                    + [chr(c) for c in range(0x2F800, 0x2FA20)] + [chr(c) for c in range(0x3040, 0x3100, 3)]
                    + ["\u3007", "\u3005", "\u3000", "\u3001", "\u3002", "\uff01", "\uff21", "\uff41",
                       "\u2e80", "\u2f00", "\u31c0", "\U0002b740", "\U0002b81f", "\U0002ceb0", "\U00030000",
                       "\U00031350", "\U0002ebf0"])
        self.hangul = ([chr(c) for c in range(0xAC00, 0xD7A4, 53)] + [chr(c) for c in range(0x1100, 0x1200, 3)]
                       + [chr(c) for c in range(0x11A8, 0x11C3)] + ["\u3131", "\u318e", "\uffa0"])
        self.surrogate_edges = ["\ud7ff", "\ud7fb", "\ud7a3", "\ud7a4", "\ue000", "\ue001", "\uf8ff", "\ufdd0",
                                "\ufeff", "\ufffc", "\ufffd", "\ufffe", "\uffff", "\U00010000", "\U0001ffff",
                                "\U000e0001", "\U000e007f", "\U000e0100", "\U000f0000", "\U000ffffd",
                                "\U00100000", "\U0010fffd", "\U0010ffff"]
        self.emoji = ["\U0001f44d", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
                      "\U0001f1eb\U0001f1f7", "\U0001f1fa", "1\ufe0f\u20e3", "#\u20e3", "\u2764\ufe0f",
                      "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f9d1\U0001f3ff\u200d\U0001f52c", "\u263a\ufe0e",
                      "\U0001f600", "\U0001faf8", "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e"
                      "\U000e0067\U000e007f", "\u00a9\ufe0f", "\U0001f170\ufe0f"]
        self.ascii = [chr(c) for c in range(0x20, 0x7F)]
        self.letters = list("aeiouxyzAEIOUXYZ0159")
        self.specials = ["\u0130", "\u0131", "\u03a3", "\u03c2", "\u1e9e", "\u00df", "\u212a", "\u212b", "\u2126",
                         "\u01c5", "\u0390", "\u1f82", "\u1fb3", "\u1fbc", "\ufb01", "\ufb2c", "\u0149", "\u2163",
                         "\u24b6", "\U00010400", "\U0001e900", "\u0344", "\u0f73", "\u0f75", "\u0f81", "\u0958",
                         "\u2adc", "\U0001d15e", "\U0001d160", "\U0001d1bb", "\u0340", "\u0341", "\u0343",
                         "\u0374", "\u037e", "\u0387", "\u1fee", "\u1ffd", "\u2000", "\u2001", "\u3099",
                         "\u309a", "\u309b", "\uff9e", "\u0cca", "\u0dda", "\u0b4b", "\u1026", "\U000110ab",
                         "\U0001133b", "\u05bc", "\u0e33", "\u0eb3", "\u1e9b", "\u00a8", "\u00b4", "\u1fc1"]

    def mark(self, rng: random.Random) -> str:
        r = rng.random()
        if r < 0.5:  # the classes that collide in real text
            return rng.choice(["\u0300", "\u0301", "\u0302", "\u0303", "\u0308", "\u030a", "\u0316", "\u0323",
                               "\u0327", "\u0328", "\u0331", "\u0345", "\u034f", "\u0360", "\u0361", "\u093c",
                               "\u094d", "\u05b0", "\u05bc", "\u05c1", "\u064b", "\u0651", "\u0670", "\u0f71",
                               "\u0f72", "\u0f74", "\u0f80", "\u3099", "\u309a", "\u20dd", "\u1dc0", "\u1dfa",
                               "\U0001d165", "\U0001d167", "\U0001d16e", "\U0001e944", "\u1ab0", "\u0315",
                               "\u031b", "\u0338", "\u0334", "\u0e38", "\u0e48", "\u0c55", "\u0c56", "\u0f39"])
        if r < 0.8:
            return rng.choice(self.marks_by_class[rng.choice(self.mark_classes)])
        return rng.choice(rng.choice([self.mn_zero, self.enclosing, self.spacing_marks]))

    def base(self, rng: random.Random) -> str:
        r = rng.random()
        if r < 0.25:
            return rng.choice(self.letters)
        if r < 0.45:
            return rng.choice(self.canon)
        if r < 0.6:
            return rng.choice(self.compat)
        if r < 0.7:
            return rng.choice(self.specials)
        if r < 0.78:
            return rng.choice(self.hangul)
        if r < 0.86:
            return rng.choice(self.cjk)
        if r < 0.93:
            return rng.choice(self.lower_changes)
        return rng.choice(self.other)

    def interrupter(self, rng: random.Random) -> str:
        """What clean_text removes or maps, between a base and its marks."""
        r = rng.random()
        if r < 0.45:
            return rng.choice(["\x00", "\x01", "\x1f", "\x7f", "\x08", "\x1b", "\ufffd", "\u200b", "\u200d",
                               "\u00ad", "\ufeff", "\u2060", "\u034f"])
        if r < 0.65:
            return rng.choice(self.controls)
        if r < 0.85:
            return rng.choice(self.format)
        return rng.choice(self.space)

    def item(self, rng: random.Random) -> str:
        r = rng.random()
        if r < 0.45:  # a cluster: base, marks in any order, maybe an interrupter among them
            out = [self.base(rng)]
            for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4, 6))):
                if rng.random() < 0.2:
                    out.append(self.interrupter(rng))
                out.append(self.mark(rng))
            if rng.random() < 0.1:
                out.append(self.interrupter(rng))
            return "".join(out)
        if r < 0.55:
            return self.mark(rng)  # a leading or stray mark
        if r < 0.65:
            return self.interrupter(rng)
        if r < 0.72:
            return rng.choice(self.space)
        if r < 0.78:
            return rng.choice(self.emoji)
        if r < 0.84:
            return rng.choice(self.surrogate_edges)
        if r < 0.90:
            return "".join(rng.choice(self.ascii) for _ in range(rng.randint(1, 6)))
        if r < 0.95:
            return self.ascii_run(rng)
        if r < 0.97:  # a run of marks long enough for the sort's other path (> 32)
            return rng.choice(self.letters) + "".join(self.mark(rng) for _ in range(rng.randint(20, 45)))
        if r < 0.98:  # the bert model's special tokens (not normalized): each segment between them is
            return rng.choice(["[MASK]", "[SEP]", "[CLS]", "[UNK]", "[mask]", "[MASK"])
        return self.base(rng)

    def ascii_run(self, rng: random.Random) -> str:
        """7 to 80 ASCII chars, some upper case, some controls: the eight-byte and 64-byte paths,
        and what they do when a control or a mark sits inside or right after a block."""
        out = []
        for _ in range(rng.randint(7, 80)):
            r = rng.random()
            if r < 0.06:
                out.append(rng.choice("\x00\x01\x08\x0b\x0c\x1f\x7f\t\n\r"))
            elif r < 0.09:
                out.append(self.mark(rng))
            elif r < 0.25:
                out.append(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
            elif r < 0.35:
                out.append(" ")
            else:
                out.append(rng.choice(self.ascii))
        return "".join(out)

    def text(self, rng: random.Random) -> str:
        n = rng.choice((1, 1, 2, 2, 3, 3, 4, 5, 6, 8, 12))
        return "".join(self.item(rng) for _ in range(n))


def texts(pools: Pools, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    while True:
        yield pools.text(rng)


# ------------------------------------------------------------------------------------------------
# Comparison
# ------------------------------------------------------------------------------------------------
def _result(tok, text: str) -> tuple:
    try:
        e = tok.encode(text)
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        return ("panic",)
    return (e.ids, e.tokens, e.offsets)


def shrink(ref, ours, text: str) -> str:
    """Drops chars (then pairs of neighbours) while the two still disagree."""
    def bad(t: str) -> bool:
        return _result(ref, t) != _result(ours, t)

    changed = True
    while changed:
        changed = False
        for width in (2, 1):
            i = 0
            while i + width <= len(text):
                cand = text[:i] + text[i + width:]
                if cand and bad(cand):
                    text, changed = cand, True
                else:
                    i += 1
    return text


def compare_batch(ref, ours, batch: list[str]) -> list[str]:
    """The texts of `batch` on which the two disagree. A batch in which tokenizers panics is
    halved until the panicking texts are alone (each then compared on its own)."""
    try:
        want = ref.encode_batch(batch)
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        if len(batch) > 4:
            half = len(batch) // 2
            return compare_batch(ref, ours, batch[:half]) + compare_batch(ref, ours, batch[half:])
        return [t for t in batch if _result(ref, t) != _result(ours, t)]
    try:
        got = ours.encode_batch(batch)
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        return [t for t in batch if _result(ref, t) != _result(ours, t)]
    bad = []
    for t, w, g in zip(batch, want, got):
        if w.ids != g.ids or w.offsets != g.offsets or w.tokens != g.tokens:
            bad.append(t)
    return bad


def run(names: list[str], per_config: int, seed: int, batch: int, out: Path | None, max_findings: int) -> int:
    confs = configurations()
    pools = Pools()
    total_bad = 0
    sink = out.open("a", encoding="utf-8") if out else None
    for name in names:
        make, models = confs[name]
        normalizer = make()
        for model in models:
            ref, ours = load_pair(normalizer, model)
            gen = texts(pools, seed)
            t0 = time.time()
            n = found = 0
            seen: set[str] = set()
            while n < per_config:
                chunk = [next(gen) for _ in range(min(batch, per_config - n))]
                n += len(chunk)
                for text in compare_batch(ref, ours, chunk):
                    found += 1
                    if len(seen) >= max_findings:
                        continue
                    small = shrink(ref, ours, text)
                    if small in seen:
                        continue
                    seen.add(small)
                    rec = {"config": name, "model": model, "seed": seed, "text": text, "shrunk": small,
                           "tokenizers": _result(ref, small), "crayon_hf": _result(ours, small)}
                    line = json.dumps(rec, ensure_ascii=True)
                    print("  MISMATCH", line, flush=True)
                    if sink:
                        sink.write(line + "\n")
                        sink.flush()
            total_bad += found
            print(f"{name:48s} {model:6s} strings={n} mismatches={found} distinct_shrunk={len(seen)}"
                  f" seconds={time.time() - t0:.1f}", flush=True)
    if sink:
        sink.close()
    return total_bad


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-config", type=int, default=20000, help="strings per configuration and model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--only", action="append", default=[],
                    help="run the configurations whose name contains this (repeatable)")
    ap.add_argument("--out", type=Path, help="append each shrunk counterexample to this JSONL file")
    ap.add_argument("--max-findings", type=int, default=20, help="shrunk counterexamples kept per configuration")
    ap.add_argument("--list", action="store_true", help="list the configurations and exit")
    args = ap.parse_args(argv)
    names = list(configurations())
    if args.only:
        names = [n for n in names if any(o in n for o in args.only)]
    if args.list:
        print("\n".join(names))
        return 0
    bad = run(names, args.per_config, args.seed, args.batch, args.out, args.max_findings)
    print(f"total mismatches: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
