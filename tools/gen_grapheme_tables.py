#!/usr/bin/env python3
"""Generate native/tables/grapheme_tables.h: the grapheme-cluster properties behind tokenizers' Precompiled.

tokenizers 0.23.3 splits text into extended grapheme clusters with the `unicode-segmentation`
crate (1.13.3 in the wheel's SBOM: Unicode 17.0.0) before it looks clusters up in a SentencePiece
charsmap. The crate gives every code point ONE category (the Grapheme_Cluster_Break classes, with
InCB=Consonant and Extended_Pictographic folded in as two more) plus two flags (InCB=Extend,
InCB=Linker), and applies UAX #29's rules in its own order (see native/text/precompiled.h).

The tables are *probed from tokenizers*, not read from a Unicode database, so they are what the
pinned reference does, whatever Unicode version the Python packages here carry. Each probe is a
short text around the code point X, normalized by `normalizers.Precompiled` over a crafted
charsmap whose only keys are single lead bytes (every lead byte but one maps to "Q"): a cluster
shorter than 6 bytes that starts with a keyed char collapses to one "Q", so whether a trailing
unkeyed mark M survives (or whether "aX" collapses) tells whether a boundary fell at the probed
place. Fourteen probes per code point (after "a", before "a", before a mark, the emoji, Hangul and
Indic conjunct contexts) give a bit vector; a model of the crate's rules (below) computes the
vector every candidate (category, flag) would give, and X gets the candidate whose vector matches.
A vector that no candidate explains stops the generator. Where several candidates match, the
difference is unobservable through Precompiled (e.g. Regional_Indicator vs Any: every cluster with
an RI and another char is at least 6 bytes long, so it is never looked up whole); the tie is
broken by a fixed preference (the RI block stays Regional_Indicator), and the counts are
recorded in the header.

When the `regex` module is installed, its \\p{Grapheme_Cluster_Break=...}, \\p{InCB=...} and
\\p{Extended_Pictographic} are compared with the probed table and the differences are printed
(expected: only code points whose Unicode version differs from the crate's).

Usage:
    python tools/gen_grapheme_tables.py            # (re)write native/tables/grapheme_tables.h
    python tools/gen_grapheme_tables.py --check    # exit 1 if the committed header is stale

Requires tokenizers 0.23.x for both modes (about 15 s).
"""
from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

from _generated import PROBED, generator_main  # tools/ is on sys.path when a generator runs

HEADER = Path(__file__).resolve().parent.parent / "native" / "tables" / "grapheme_tables.h"
TOKENIZERS_SERIES = "0.23"
MAX_CP = 0x110000

# The crate's categories, in the order of native/tables/grapheme_tables.h's enum.
CATS = ["Any", "CR", "LF", "Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend", "SpacingMark",
        "L", "V", "T", "LV", "LVT", "InCB_Consonant", "Extended_Pictographic"]
C = {name: i for i, name in enumerate(CATS)}
INCB_EXTEND = 0x10
INCB_LINKER = 0x20
HANGUL_FIRST, HANGUL_COUNT = 0xAC00, 11172  # LV when (cp - 0xAC00) % 28 == 0, else LVT

# Candidates in order of preference for ties (unobservable differences): no flag before a flag,
# then CATS order. CR and LF are ASCII only (the crate decides ASCII without its tables).
CANDIDATES = [c | f for f in (0, INCB_EXTEND, INCB_LINKER) for c in range(len(CATS)) if CATS[c] not in ("CR", "LF")]
RI_FIRST, RI_LAST = 0x1F1E6, 0x1F1FF  # Regional_Indicator: fixed by Unicode's stability policy


def cat(props: int) -> int:
    return props & 0x0F


def ascii_props(cp: int) -> int:
    """The crate decides U+0000..U+007E without its tables."""
    if cp == 0x0A:
        return C["LF"]
    if cp == 0x0D:
        return C["CR"]
    return C["Control"] if cp < 0x20 else C["Any"]


# ----------------------------------------------------------------------------------------------
# A model of unicode-segmentation's forward GraphemeCursor (extended clusters), on abstract chars
# ----------------------------------------------------------------------------------------------
class Segmenter:
    """Forward state as the crate keeps it: the run of Regional_Indicators, the InCB conjunct
    (last non-Extend/Linker char a consonant, a Linker seen since), and ExtPict Extend* ZWJ."""

    def __init__(self) -> None:
        self.ri = 0
        self.incb_base = False
        self.incb_linker = False
        self.ep = False
        self.zwj_after_ep = False

    def step(self, p: int) -> None:
        c = cat(p)
        self.ri = self.ri + 1 if c == C["Regional_Indicator"] else 0
        if p & INCB_LINKER:
            self.incb_linker = True
        elif not p & INCB_EXTEND:
            self.incb_base = c == C["InCB_Consonant"]
            self.incb_linker = False
        if c == C["ZWJ"]:
            self.zwj_after_ep, self.ep = self.ep, False
        else:
            self.zwj_after_ep = False
            if c == C["Extended_Pictographic"]:
                self.ep = True
            elif c != C["Extend"]:
                self.ep = False

    def is_break(self, before: int, after: int) -> bool:
        b, a = cat(before), cat(after)
        ctrl = (C["Control"], C["CR"], C["LF"])
        if b == C["CR"] and a == C["LF"]:
            return False  # GB3
        if b in ctrl or a in ctrl:
            return True  # GB4, GB5
        if b == C["L"] and a in (C["L"], C["V"], C["LV"], C["LVT"]):
            return False  # GB6
        if b in (C["LV"], C["V"]) and a in (C["V"], C["T"]):
            return False  # GB7
        if b in (C["LVT"], C["T"]) and a == C["T"]:
            return False  # GB8
        if a in (C["Extend"], C["ZWJ"], C["SpacingMark"]) or b == C["Prepend"]:
            return False  # GB9, GB9a, GB9b
        if a == C["InCB_Consonant"]:
            return not (self.incb_base and self.incb_linker)  # GB9c
        if b == C["ZWJ"] and a == C["Extended_Pictographic"]:
            return not self.zwj_after_ep  # GB11
        if b == C["Regional_Indicator"] and a == C["Regional_Indicator"]:
            return self.ri % 2 == 0  # GB12, GB13
        return True


def model_output(chars: list[tuple[str, int, int, bool]]) -> list[str]:
    """Precompiled over the probe charsmap: chars are (name, props, utf8 length, keyed)."""
    clusters: list[list[tuple[str, int, int, bool]]] = []
    seg = Segmenter()
    for i, ch in enumerate(chars):
        if i and not seg.is_break(chars[i - 1][1], ch[1]):
            clusters[-1].append(ch)
        else:
            clusters.append([ch])
        seg.step(ch[1])
    out: list[str] = []
    for cl in clusters:
        if sum(c[2] for c in cl) < 6 and cl[0][3]:
            out.append("Q")  # looked up whole: the first key (its lead byte) replaces it all
            continue
        out.extend("Q" if c[3] else c[0] for c in cl)
    return out


# ----------------------------------------------------------------------------------------------
# Probes
# ----------------------------------------------------------------------------------------------
# Helper chars: (char, props as the crate has them). The probes would disagree wholesale with the
# model if one of these were wrong.
HELPERS = {
    "a": ("a", C["Any"]),
    "E": ("\u0483", C["Extend"] | INCB_EXTEND),          # COMBINING CYRILLIC TITLO
    "ZWJ": ("\u200d", C["ZWJ"] | INCB_EXTEND),
    "EP": ("\u00a9", C["Extended_Pictographic"]),         # COPYRIGHT SIGN, 2 bytes
    "L": ("\u1100", C["L"]),
    "V": ("\u1161", C["V"]),
    "T": ("\u11a8", C["T"]),
    "K": ("\u0915", C["InCB_Consonant"]),                 # DEVANAGARI LETTER KA
    "VIRAMA": ("\u094d", C["Extend"] | INCB_LINKER),
}
# Two charsmaps: all lead bytes but one map to "Q"; M (a combining mark whose lead byte is the
# unkeyed one) survives only where it is not swallowed by a whole-cluster lookup.
SCHEMES = {
    "A": {"unkeyed": 0xCC, "M": ("\u0301", C["Extend"] | INCB_EXTEND)},
    "B": {"unkeyed": 0xD6, "M": ("\u05b0", C["Extend"] | INCB_EXTEND)},
}
# name, parts around X, bit: "whole" (the piece collapsed to one Q) or "tail" (M survived)
TEMPLATES = [
    ("after_any", ["a", "X"], "whole"),
    ("before_any", ["X", "a"], "whole"),
    ("before_extend", ["X", "E", "M"], "tail"),
    ("emoji_extend", ["EP", "X", "ZWJ", "EP", "M"], "tail"),
    ("extpict", ["X", "ZWJ", "EP", "M"], "tail"),
    ("zwj", ["EP", "X", "EP", "M"], "tail"),
    ("before_v", ["X", "V", "M"], "tail"),
    ("before_t", ["X", "T", "M"], "tail"),
    ("after_l", ["L", "X", "M"], "tail"),
    ("after_v", ["V", "X", "M"], "tail"),
    ("after_t", ["T", "X", "M"], "tail"),
    ("incb_consonant", ["X", "VIRAMA", "K", "M"], "tail"),
    ("incb_linker", ["K", "X", "K", "M"], "tail"),
    ("incb_extend", ["K", "VIRAMA", "X", "K", "M"], "tail"),
]


def probe_charsmap(unkeyed: int) -> bytes:
    """A darts-clone double array whose keys are the single bytes 0x01..0xFF but `unkeyed` and
    "\\n" (the probe separator), every one mapping to "Q". Root at 0 with children at 256 + b;
    each child's leaf at 512 + b (units there have bit 31 set, so they never match a label)."""
    units = [0] * 768
    units[0] = 256 << 10
    for b in range(1, 256):
        if b in (unkeyed, 0x0A):
            continue
        units[256 + b] = b | (1 << 8) | (((256 + b) ^ (512 + b)) << 10)
        units[512 + b] = (1 << 31) | 0  # value: offset 0 of the normalized blob
    trie = b"".join(u.to_bytes(4, "little") for u in units)
    return len(trie).to_bytes(4, "little") + trie + b"Q\0"


def utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def expected_bits(scheme: str, x_props: int, x_len: int) -> tuple[bool, ...]:
    bits = []
    m_char, m_props = SCHEMES[scheme]["M"]
    for _, parts, kind in TEMPLATES:
        chars = []
        for part in parts:
            if part == "X":
                chars.append(("X", x_props, x_len, True))
            elif part == "M":
                chars.append(("M", m_props, 2, False))
            else:
                ch, p = HELPERS[part]
                chars.append((part, p, len(ch.encode()), True))
        out = model_output(chars)
        bits.append(out == ["Q"] if kind == "whole" else out[-1] == "M")
    return tuple(bits)


def probe_bits(cps: list[int], scheme: str) -> list[tuple[bool, ...]]:
    from tokenizers import normalizers

    norm = normalizers.Precompiled(probe_charsmap(SCHEMES[scheme]["unkeyed"]))
    m_char = SCHEMES[scheme]["M"][0]
    columns = []
    for _, parts, kind in TEMPLATES:
        text = [m_char if p == "M" else HELPERS[p][0] if p != "X" else "X" for p in parts]
        prefix, suffix = "".join(text[:parts.index("X")]), "".join(text[parts.index("X") + 1:])
        out = norm.normalize_str("\n".join(prefix + chr(cp) + suffix for cp in cps)).split("\n")
        if len(out) != len(cps):
            raise SystemExit(f"probe {parts}: {len(out)} pieces for {len(cps)} code points")
        columns.append([o == "Q" for o in out] if kind == "whole" else [o.endswith(m_char) for o in out])
    return list(zip(*columns))


def probed_props() -> tuple[list[int], Counter]:
    """props for every code point; ties counted by (chosen, alternatives)."""
    os.environ.setdefault("RUST_BACKTRACE", "0")
    props = [ascii_props(cp) if cp < 0x7F else C["Any"] for cp in range(MAX_CP)]
    targets = [cp for cp in range(0x7F, MAX_CP) if not 0xD800 <= cp <= 0xDFFF]
    by_scheme: dict[str, list[int]] = {"A": [], "B": []}
    for cp in targets:
        lead = chr(cp).encode()[0]
        by_scheme["B" if lead == SCHEMES["A"]["unkeyed"] else "A"].append(cp)
    ties: Counter = Counter()
    unexplained = []
    for scheme, cps in by_scheme.items():
        table: dict[tuple, dict[tuple[bool, ...], list[int]]] = {}
        for n in (1, 2, 3, 4):
            vecs: dict[tuple[bool, ...], list[int]] = {}
            for cand in CANDIDATES:
                vecs.setdefault(expected_bits(scheme, cand, n), []).append(cand)
            table[n] = vecs
        for cp, bits in zip(cps, probe_bits(cps, scheme)):
            options = table[utf8_len(cp)].get(bits)
            if not options:
                unexplained.append((cp, bits))
                continue
            choice = options[0]
            if len(options) > 1:
                if RI_FIRST <= cp <= RI_LAST and C["Regional_Indicator"] in options:
                    choice = C["Regional_Indicator"]
                ties[(name_of(choice), tuple(name_of(o) for o in options if o != choice))] += 1
            props[cp] = choice
    if unexplained:
        lines = [f"U+{cp:04X}: {''.join('1' if b else '0' for b in bits)}" for cp, bits in unexplained[:20]]
        raise SystemExit(f"{len(unexplained)} code points behave as no candidate of the model does "
                         f"(templates {[t[0] for t in TEMPLATES]}):\n  " + "\n  ".join(lines))
    return props, ties


def name_of(props: int) -> str:
    flags = ("+InCB_Extend" if props & INCB_EXTEND else "") + ("+InCB_Linker" if props & INCB_LINKER else "")
    return CATS[cat(props)] + flags


# ----------------------------------------------------------------------------------------------
# Cross-check with the regex module (informative only: printed, never written to the header)
# ----------------------------------------------------------------------------------------------
def regex_props() -> list[int] | None:
    try:
        import regex
    except ImportError:
        return None
    text = "".join(chr(c) if not 0xD800 <= c <= 0xDFFF else "\0" for c in range(MAX_CP))
    props = [C["Any"]] * MAX_CP

    def each(prop: str):
        return (m.start() for m in regex.finditer(r"\p{%s}" % prop, text))

    for name in ["Control", "Extend", "ZWJ", "Regional_Indicator", "Prepend", "SpacingMark", "L", "V", "T",
                 "LV", "LVT"]:
        for i in each(f"Grapheme_Cluster_Break={name}"):
            props[i] = C[name]
    for i in each("InCB=Consonant"):
        props[i] = C["InCB_Consonant"]
    for i in each("Extended_Pictographic"):
        props[i] = C["Extended_Pictographic"]
    for i in each("InCB=Extend"):
        props[i] |= INCB_EXTEND
    for i in each("InCB=Linker"):
        props[i] |= INCB_LINKER
    return props


def cross_check(probed: list[int]) -> None:
    ref = regex_props()
    if ref is None:
        print("regex not installed: no cross-check")
        return
    import regex

    diffs = [cp for cp in range(0x7F, MAX_CP) if not 0xD800 <= cp <= 0xDFFF and ref[cp] != probed[cp]]
    kinds = Counter((name_of(ref[cp]), name_of(probed[cp])) for cp in diffs)
    print(f"regex {regex.__version__}: {len(diffs)} code points differ from the probed table")
    for (r, p), n in kinds.most_common(12):
        ex = next(cp for cp in diffs if name_of(ref[cp]) == r and name_of(probed[cp]) == p)
        print(f"  {n:6d}  regex {r:32s} tokenizers {p:32s} e.g. U+{ex:04X}")


# ----------------------------------------------------------------------------------------------
# Header
# ----------------------------------------------------------------------------------------------
def check_hangul(props: list[int]) -> None:
    for i in range(HANGUL_COUNT):
        want = C["LV"] if i % 28 == 0 else C["LVT"]
        if props[HANGUL_FIRST + i] != want:
            raise SystemExit(f"U+{HANGUL_FIRST + i:04X}: probed {name_of(props[HANGUL_FIRST + i])}, "
                             f"the LV/LVT arithmetic says {CATS[want]}")


def runs_of(props: list[int]) -> list[tuple[int, int]]:
    flat = list(props)
    for i in range(HANGUL_COUNT):
        flat[HANGUL_FIRST + i] = C["LV"]  # one run; props() splits LV/LVT arithmetically
    for cp in range(0xD800, 0xE000):
        flat[cp] = flat[0xD7FF]  # never looked up: keep the run going
    runs = []
    for cp, p in enumerate(flat):
        if not runs or runs[-1][1] != p:
            runs.append((cp, p))
    return runs


def check_tokenizers() -> str:
    try:
        import tokenizers
    except ImportError:
        raise SystemExit("tokenizers is required: the tables are probed from it")
    if not tokenizers.__version__.startswith(TOKENIZERS_SERIES + "."):
        raise SystemExit(f"tokenizers {tokenizers.__version__} found; the tables are probed from "
                         f"{TOKENIZERS_SERIES}.x")
    return tokenizers.__version__


def build() -> str:
    version = check_tokenizers()
    props, ties = probed_props()
    check_hangul(props)
    cross_check(props)
    runs = runs_of(props)
    counts = Counter(CATS[cat(p)] for p in props[0x7F:])
    flag_counts = (sum(1 for p in props if p & INCB_EXTEND), sum(1 for p in props if p & INCB_LINKER))
    enum = "\n".join(f"  k{name.replace('_', '')} = {i}," for i, name in enumerate(CATS))
    tie_lines = "\n".join(f"//   {n:7d} probed as {chosen}, indistinguishable from {', '.join(alts)}"
                          for (chosen, alts), n in sorted(ties.items())) or "//   none"
    count_lines = "\n".join(f"//   {name:22s} {counts[name]:7d}" for name in CATS if name not in ("CR", "LF"))
    body = ",\n".join(
        "  " + ", ".join(f"0x{(cp << 8) | p:08X}" for cp, p in runs[i:i + 8]) for i in range(0, len(runs), 8))
    return f"""\
// Generated by tools/gen_grapheme_tables.py from probes of tokenizers {version}; do not edit.
//
// Grapheme-cluster properties as unicode-segmentation 1.13.3 (the crate in tokenizers' wheel,
// Unicode 17.0.0) has them: ONE category per code point (Grapheme_Cluster_Break, with
// InCB=Consonant and Extended_Pictographic folded in) plus the InCB=Extend / InCB=Linker flags.
// Probed, not read from a Unicode database: see the generator's docstring.
//
// Code points U+007F..U+10FFFF (ASCII below U+007F is decided without tables, as the crate does):
{count_lines}
//   InCB=Extend flags {flag_counts[0]}, InCB=Linker flags {flag_counts[1]}
// Ties (differences Precompiled can never show; fixed preference, the RI block kept as RI):
{tie_lines}
#pragma once

#include <cstdint>

namespace crayon::grapheme_tables {{

enum Cat : uint8_t {{
{enum}
}};
inline constexpr uint8_t kCatMask = 0x0F;
inline constexpr uint8_t kIncbExtend = 0x{INCB_EXTEND:02X};
inline constexpr uint8_t kIncbLinker = 0x{INCB_LINKER:02X};

// Hangul syllables U+AC00..U+D7A3 are one kLV run below: LV when (cp - 0xAC00) % 28 == 0, else LVT.
inline constexpr uint32_t kHangulFirst = 0x{HANGUL_FIRST:04X};
inline constexpr uint32_t kHangulCount = {HANGUL_COUNT};

// Runs: (first code point << 8) | props, ascending; a run lasts until the next one starts.
inline constexpr uint32_t kRunCount = {len(runs)};
inline constexpr uint32_t kRuns[kRunCount] = {{
{body}
}};

}}  // namespace crayon::grapheme_tables
"""


def main() -> int:
    return generator_main(build, HEADER, __doc__, "gen_grapheme_tables.py", inputs=PROBED)


if __name__ == "__main__":
    sys.exit(main())
