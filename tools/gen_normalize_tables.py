#!/usr/bin/env python3
"""Generate native/tables/normalize_tables.h: the Unicode data behind tokenizers' normalizers.

`tokenizers` 0.23.3 takes its NFD/NFKD/NFC/NFKC from the `unicode-normalization-alignments` crate
(a 2019 fork of unicode-normalization, Unicode 9.0 data) and its Lowercase from Rust's
`char::to_lowercase` (the Rust standard library's Unicode version, 16.0 here). The two are years
apart, so no single Unicode database reproduces both. The tables are therefore *probed from the
reference*, every code point at a time:

  decompositions    tokenizers NFD / NFKD of each code point alone (batched, NUL-separated)
  lowercase         tokenizers Lowercase of each code point alone
  combining class   reordering experiments: whether a code point moves in front of a mark of
                    known class under NFD (U+0345, class 240; U+0334, class 1), then its exact
                    class by the same experiment against one probed mark of every class
  compositions      the one-level canonical pairs of unicodedata2 restricted to the code points the
                    crate decomposes and NFC keeps; each pair is confirmed by tokenizers NFC(a+b)

A Python model of the crate's algorithm (decompose, stable reorder, recompose) built from these
tables must then reproduce tokenizers' NFC and NFKC of every code point and NFC of every canonical
decomposition; unicodedata2 (16.0) must agree with every probed value on code points the crate
knows (differences are allowed only where the crate has no data at all, i.e. newer characters),
and the counts of such differences are recorded in the header. Any other difference is an error.

Usage:
    python tools/gen_normalize_tables.py            # (re)write native/tables/normalize_tables.h
    python tools/gen_normalize_tables.py --check    # exit 1 if the committed header is stale

Requires tokenizers (0.23.x) and unicodedata2 (16.0.0) for both modes.
"""
from __future__ import annotations

import sys
from pathlib import Path

from _generated import PROBED, generator_main  # tools/ is on sys.path when a generator runs

HEADER = Path(__file__).resolve().parent.parent / "native" / "tables" / "normalize_tables.h"
MAX_CP = 0x110000
EXPECTED_UNICODE = "16.0.0"
TOKENIZERS_SERIES = "0.23"

# Hangul syllables are decomposed and composed arithmetically (Unicode ch. 3.12), by the crate and
# by normalize.cc alike; the tables carry only their flags.
S_BASE, L_BASE, V_BASE, T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
L_COUNT, V_COUNT, T_COUNT = 19, 21, 28
N_COUNT = V_COUNT * T_COUNT
S_COUNT = L_COUNT * N_COUNT

# Flag bits above the combining class (bits 0-7) in kProps.
FLAGS = [
    ("kCanonDecomp", 1 << 8, "has a canonical decomposition (NFD changes it)"),
    ("kCompatDecomp", 1 << 9, "has a compatibility-or-canonical decomposition (NFKD changes it)"),
    ("kNfcNo", 1 << 10, "cannot occur in NFC output (NFC_Quick_Check=No, crate data)"),
    ("kNfkcNo", 1 << 11, "cannot occur in NFKC output (NFKC_Quick_Check=No, crate data)"),
    ("kTrailer", 1 << 12, "second member of some composition (Quick_Check=Maybe)"),
    ("kLowerChanges", 1 << 13, "char::to_lowercase differs from the character"),
    ("kCanonBadStart", 1 << 14, "canonical decomposition starts with a non-starter or trailer"),
    ("kCompatBadStart", 1 << 15, "compatibility decomposition starts with a non-starter or trailer"),
]
F = {name: bit for name, bit, _ in FLAGS}

# Evidence for the crate's Unicode version: combining marks and their first version.
VERSION_MARKERS = [
    (0x1E944, "9.0 (Adlam)"),
    (0x11C3F, "9.0 (Bhaiksuki)"),
    (0x11D42, "10.0 (Masaram Gondi)"),
    (0x1DF6, "10.0"),
    (0x16FF0, "13.0"),
]


def all_code_points() -> list[int]:
    return [c for c in range(MAX_CP) if not 0xD800 <= c <= 0xDFFF]


def is_hangul(c: int) -> bool:
    return S_BASE <= c < S_BASE + S_COUNT


# ----------------------------------------------------------------------------------------------
# Probing
# ----------------------------------------------------------------------------------------------

def normalize_each(norm, cps: list[int]) -> list[str]:
    """norm applied to each code point alone, in one call (NUL never decomposes or composes)."""
    assert 0 not in cps
    out = norm.normalize_str("\x00".join(map(chr, cps))).split("\x00")
    assert len(out) == len(cps), (norm, len(out), len(cps))
    return out


def reorders(norm, first: int, cps: list[int]) -> list[bool]:
    """For each c: does NFD(' ' + first + c) put c before `first`? (c must not decompose.)"""
    out = norm.normalize_str("".join(" " + chr(first) + chr(c) for c in cps))
    assert len(out) == 3 * len(cps)
    return [out[3 * i + 1] == chr(c) != chr(first) for i, c in enumerate(cps)]


def reorders_after(norm, last: int, cps: list[int]) -> list[bool]:
    """For each c: does NFD(' ' + c + last) put `last` before c? (c must not decompose.)"""
    out = norm.normalize_str("".join(" " + chr(c) + chr(last) for c in cps))
    assert len(out) == 3 * len(cps)
    return [out[3 * i + 1] == chr(last) != chr(c) for i, c in enumerate(cps)]


class Probe:
    """Everything tokenizers' normalizers reveal about each code point."""

    def __init__(self) -> None:
        import tokenizers
        from tokenizers import normalizers as N

        if not tokenizers.__version__.startswith(TOKENIZERS_SERIES + "."):
            print(f"warning: probing tokenizers {tokenizers.__version__}, tables were made with"
                  f" {TOKENIZERS_SERIES}.x; a difference will show as a cross-check failure",
                  file=sys.stderr)
        self.version = tokenizers.__version__
        cps = [c for c in all_code_points() if c != 0]
        self.cps = cps
        self.nfd = dict(zip(cps, normalize_each(N.NFD(), cps)))
        self.nfkd = dict(zip(cps, normalize_each(N.NFKD(), cps)))
        self.nfc = dict(zip(cps, normalize_each(N.NFC(), cps)))
        self.nfkc = dict(zip(cps, normalize_each(N.NFKC(), cps)))
        self.lower = dict(zip(cps, normalize_each(N.Lowercase(), cps)))
        for table in (self.nfd, self.nfkd, self.nfc, self.nfkc, self.lower):
            table[0] = "\x00"

        # Combining classes of the characters NFD leaves alone (the only ones whose class the
        # crate ever consults). Class != 0 iff c moves in front of U+0345 (240) or U+0334 (1)
        # moves in front of c.
        nfd = N.NFD()
        simple = [c for c in all_code_points() if self.nfd[c] == chr(c)]
        a = reorders(nfd, 0x0345, simple)
        b = reorders_after(nfd, 0x0334, simple)
        nonzero = [c for c, x, y in zip(simple, a, b) if x or y]
        # Exact class: c moves in front of a mark of class k iff ccc(c) < k. One reference mark per
        # class the crate knows (chosen with unicodedata2, confirmed by the probe's consistency).
        import unicodedata2 as ud

        refs: dict[int, int] = {}
        for c in nonzero:
            refs.setdefault(ud.combining(chr(c)), c)
        self.ccc: dict[int, int] = {c: 0 for c in all_code_points()}
        below = {c: [] for c in nonzero}  # classes k with ccc(c) < k
        for k, ref in sorted(refs.items()):
            for c, moved in zip(nonzero, reorders(nfd, ref, nonzero)):
                if moved:
                    below[c].append(k)
        classes = sorted(refs)
        for c in nonzero:
            ks = below[c]
            # ccc(c) is the largest reference class that c does not move in front of.
            not_below = [k for k in classes if k not in ks]
            value = max(not_below)
            if any(k <= value for k in ks):
                raise SystemExit(f"U+{c:04X}: inconsistent reordering against classes {ks}")
            self.ccc[c] = value
        for c in nonzero:
            if self.ccc[c] != ud.combining(chr(c)):
                raise SystemExit(f"U+{c:04X}: probed class {self.ccc[c]},"
                                 f" unicodedata2 {ud.combining(chr(c))}")
        # Decomposable characters: the class is never consulted by the crate; keep the standard
        # (stable) value so the quick checks follow UAX #15.
        for c in all_code_points():
            if self.nfd[c] != chr(c):
                self.ccc[c] = ud.combining(chr(c))
        self.marker_classes = {c: self.ccc[c] for c, _ in VERSION_MARKERS}


# ----------------------------------------------------------------------------------------------
# The crate's algorithm over the probed tables (used to verify them)
# ----------------------------------------------------------------------------------------------

class Model:
    def __init__(self, canon: dict[int, list[int]], compat: dict[int, list[int]],
                 ccc: dict[int, int], comp: dict[tuple[int, int], int]) -> None:
        self.canon, self.compat, self.ccc, self.comp = canon, compat, ccc, comp

    def decompose_char(self, c: int, compat: bool) -> list[int]:
        if is_hangul(c):
            s = c - S_BASE
            out = [L_BASE + s // N_COUNT, V_BASE + (s % N_COUNT) // T_COUNT]
            if s % T_COUNT:
                out.append(T_BASE + s % T_COUNT)
            return out
        if compat and c in self.compat:
            return self.compat[c]
        return self.canon.get(c, [c])

    def decompose(self, cps: list[int], compat: bool) -> list[int]:
        out: list[int] = []
        run_start = 0
        for c in cps:
            for d in self.decompose_char(c, compat):
                if self.ccc.get(d, 0) == 0:
                    out[run_start:] = sorted(out[run_start:], key=lambda x: self.ccc.get(x, 0))
                    run_start = len(out)
                out.append(d)
        out[run_start:] = sorted(out[run_start:], key=lambda x: self.ccc.get(x, 0))
        return out

    def compose_pair(self, a: int, b: int) -> int | None:
        if L_BASE <= a < L_BASE + L_COUNT and V_BASE <= b < V_BASE + V_COUNT:
            return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT
        if is_hangul(a) and (a - S_BASE) % T_COUNT == 0 and T_BASE < b < T_BASE + T_COUNT:
            return a + (b - T_BASE)
        return self.comp.get((a, b))

    def compose(self, cps: list[int]) -> list[int]:
        """UAX #15 canonical composition, as the crate's Recompositions performs it."""
        out: list[int] = []
        starter = -1  # index in out of the last starter, if nothing blocks it
        last_ccc = -1  # class of the last character kept after the starter; -1 = none
        for c in cps:
            cc = self.ccc.get(c, 0)
            if starter >= 0 and (last_ccc == -1 or (last_ccc < cc)):
                r = self.compose_pair(out[starter], c)
                if r is not None:
                    out[starter] = r
                    continue
            if cc == 0:
                starter = len(out)
                last_ccc = -1
            else:
                last_ccc = cc
            out.append(c)
        return out

    def nfc(self, s: str, compat: bool) -> str:
        return "".join(map(chr, self.compose(self.decompose([ord(x) for x in s], compat))))


# ----------------------------------------------------------------------------------------------
# Building and checking the tables
# ----------------------------------------------------------------------------------------------

def build() -> str:
    import unicodedata2 as ud

    if ud.unidata_version != EXPECTED_UNICODE:
        raise SystemExit(f"unicodedata2 has Unicode {ud.unidata_version}, need {EXPECTED_UNICODE}:"
                         f" pip install unicodedata2=={EXPECTED_UNICODE}")
    p = Probe()
    cps = all_code_points()
    problems: list[str] = []
    notes: dict[str, list[int]] = {"nfd": [], "nfkd": [], "ccc": [], "lower": []}

    canon: dict[int, list[int]] = {}
    compat: dict[int, list[int]] = {}
    lower: dict[int, list[int]] = {}
    for c in cps:
        ch = chr(c)
        if p.nfd[c] != ch and not is_hangul(c):
            canon[c] = [ord(x) for x in p.nfd[c]]
        if p.nfkd[c] != ch and not is_hangul(c):
            compat[c] = [ord(x) for x in p.nfkd[c]]
        if p.lower[c] != ch:
            lower[c] = [ord(x) for x in p.lower[c]]
        # Cross-checks with unicodedata2 where the crate has data.
        for form, got, table in (("NFD", p.nfd[c], "nfd"), ("NFKD", p.nfkd[c], "nfkd")):
            want = ud.normalize(form, ch)
            if got != want:
                if got == ch:
                    notes[table].append(c)  # newer than the crate
                else:
                    problems.append(f"{form}(U+{c:04X}) = {got!r}, unicodedata2 {want!r}")
        if p.ccc[c] != ud.combining(ch):
            if p.ccc[c] == 0:
                notes["ccc"].append(c)
            else:
                problems.append(f"ccc(U+{c:04X}) = {p.ccc[c]}, unicodedata2 {ud.combining(ch)}")
        if p.lower[c] != ch.lower():
            notes["lower"].append(c)  # Python 3.11's str.lower is Unicode 14.0
    # Facts the header states about Lowercase; probed, not assumed.
    if p.lower[0x03A3] != "\u03c3" or p.lower[0x0130] != "i\u0307" or p.lower[0x10D50] == "\U00010D50":
        problems.append("Lowercase: expected context-free sigma, dotted I -> i + U+0307, Garay (16.0)")
    # normalize.cc lowercases in place first and then looks again: the mapping must be idempotent.
    for c, low in lower.items():
        if any(p.lower[x] != chr(x) for x in low):
            problems.append(f"Lowercase is not idempotent at U+{c:04X}")
    if not set(canon) <= set(compat):
        problems.append("some canonical decompositions are missing from NFKD")

    # Composition pairs: one-level canonical decompositions of the primary composites the crate
    # knows (NFC keeps them), each confirmed by tokenizers NFC(first + second).
    from tokenizers import normalizers as N

    comp: dict[tuple[int, int], int] = {}
    for c in canon:
        d = ud.decomposition(chr(c))
        if not d or d.startswith("<") or p.nfc[c] != chr(c):
            continue
        parts = [int(x, 16) for x in d.split()]
        if len(parts) != 2:
            problems.append(f"U+{c:04X}: primary composite with {len(parts)}-part mapping")
            continue
        comp[(parts[0], parts[1])] = c
    pairs = sorted(comp)
    got = N.NFC().normalize_str("\x00".join(chr(a) + chr(b) for a, b in pairs)).split("\x00")
    for (a, b), g in zip(pairs, got):
        if g != chr(comp[(a, b)]):
            problems.append(f"NFC(U+{a:04X} U+{b:04X}) = {g!r}, expected U+{comp[(a, b)]:04X}")
    # Hangul: LV + T composes for T in U+11A8..U+11C2 only (U+11A7 is T_BASE itself).
    hangul = N.NFC().normalize_str("\u1100\u1161\x00\uAC00\u11A8\x00\uAC00\u11A7\x00\uAC01\u11A8")
    if hangul != "\uAC00\x00\uAC01\x00\uAC00\u11A7\x00\uAC01\u11A8":
        problems.append(f"Hangul composition differs: {hangul!r}")

    model = Model(canon, compat, p.ccc, comp)
    # The model must reproduce tokenizers on every single code point, and NFC must recompose
    # every canonical decomposition exactly as tokenizers does.
    for c in cps:
        ch = chr(c)
        for compat_form, table in ((False, p.nfc), (True, p.nfkc)):
            if model.nfc(ch, compat_form) != table[c]:
                problems.append(f"model {'NFKC' if compat_form else 'NFC'}(U+{c:04X})"
                                f" = {model.nfc(ch, compat_form)!r}, tokenizers {table[c]!r}")
    decomposed = [p.nfd[c] for c in sorted(canon)] + [p.nfkd[c] for c in sorted(compat)]
    want = N.NFC().normalize_str("\x00".join(decomposed)).split("\x00")
    for s, w in zip(decomposed, want):
        if model.nfc(s, False) != w:
            problems.append(f"model NFC({s!r}) = {model.nfc(s, False)!r}, tokenizers {w!r}")
    if problems:
        raise SystemExit("probe/cross-check failed:\n  " + "\n  ".join(problems[:40]))

    # Per-code-point properties.
    trailers = {b for _, b in comp} | set(range(V_BASE, V_BASE + V_COUNT)) | set(
        range(T_BASE + 1, T_BASE + T_COUNT))
    props = [0] * MAX_CP
    for c in cps:
        v = p.ccc[c]
        ch = chr(c)
        if p.nfd[c] != ch:
            v |= F["kCanonDecomp"]
        if p.nfkd[c] != ch:
            v |= F["kCompatDecomp"]
        if p.nfc[c] != ch:
            v |= F["kNfcNo"]
        if p.nfkc[c] != ch:
            v |= F["kNfkcNo"]
        if c in trailers:
            v |= F["kTrailer"]
        if p.lower[c] != ch:
            v |= F["kLowerChanges"]
        for flag, form in (("kCanonBadStart", p.nfd), ("kCompatBadStart", p.nfkd)):
            first = ord(form[c][0])
            if form[c] != ch and (p.ccc[first] != 0 or first in trailers):
                v |= F[flag]
        props[c] = v
    # The fast paths rely on these: quick-check Yes characters round-trip, trailers are never
    # decomposable starters' leads in a way that matters, and ASCII is inert except for case.
    for c in range(128):
        assert props[c] & ~F["kLowerChanges"] == 0, hex(c)

    # Records: one per code point with a decomposition or a lowercase mapping.
    pool: list[int] = []
    pool_index: dict[tuple[int, ...], int] = {}

    def intern(seq: list[int]) -> int:
        key = tuple(seq)
        if key not in pool_index:
            # Reuse an existing occurrence inside the pool when there is one (cheap dedupe).
            pool_index[key] = len(pool)
            pool.extend(seq)
        return pool_index[key]

    records: list[tuple[int, int, int, int, int, int]] = [(0, 0, 0, 0, 0, 0)]
    record_of = [0] * MAX_CP
    for c in cps:
        if c not in canon and c not in compat and c not in lower:
            continue
        cs = canon.get(c, [])
        ks = compat.get(c, cs)
        ls = lower.get(c, [])
        rec = (intern(cs) if cs else 0, intern(ks) if ks else 0, intern(ls) if ls else 0,
               len(cs), len(ks), len(ls))
        record_of[c] = len(records)
        records.append(rec)
    assert len(pool) < 65536 and len(records) < 65536
    assert max(max(r[3:]) for r in records) < 256

    info = {
        "tokenizers": p.version,
        "canon": len(canon),
        "compat": len(compat),
        "lower": len(lower),
        "pairs": len(comp),
        "notes": {k: len(v) for k, v in notes.items()},
        "note_examples": {k: v[:4] for k, v in notes.items()},
        "markers": p.marker_classes,
        "ccc_nonzero": sum(1 for c in cps if p.ccc[c]),
    }
    return render(props, record_of, records, pool, sorted(comp.items()), info)


def two_stage(values: list[int], shift: int) -> tuple[list[int], list[tuple[int, ...]]]:
    size = 1 << shift
    blocks: dict[tuple[int, ...], int] = {}
    order: list[tuple[int, ...]] = []
    stage1 = []
    for start in range(0, MAX_CP, size):
        blk = tuple(values[start:start + size])
        if blk not in blocks:
            blocks[blk] = len(order)
            order.append(blk)
        stage1.append(blocks[blk])
    return stage1, order


def best_two_stage(values: list[int], width: int) -> tuple[int, list[int], list[tuple[int, ...]]]:
    """The block shift that makes stage1 (uint16) + stage2 (`width` bytes each) smallest."""
    def cost(s: int) -> int:
        st1, blocks = two_stage(values, s)
        return 2 * len(st1) + width * len(blocks) * (1 << s)
    s = min(range(4, 10), key=cost)
    st1, blocks = two_stage(values, s)
    assert len(blocks) < 65536
    return s, st1, blocks


def rows(values, fmt, per_line) -> str:
    out = []
    for i in range(0, len(values), per_line):
        out.append("    " + ",".join(fmt(v) for v in values[i:i + per_line]) + ",")
    return "\n".join(out)


def render(props, record_of, records, pool, comp, info) -> str:
    ps, p1, pb = best_two_stage(props, 2)
    rs, r1, rb = best_two_stage(record_of, 2)
    p2 = [v for b in pb for v in b]
    r2 = [v for b in rb for v in b]
    total = 2 * (len(p1) + len(p2) + len(r1) + len(r2)) + 10 * len(records) + 4 * len(pool) + 12 * len(comp)
    flag_lines = "\n".join(f"inline constexpr uint16_t {n} = 0x{b:04X};  // {d}" for n, b, d in FLAGS)
    notes = info["notes"]
    ex = {k: " ".join(f"U+{c:04X}" for c in v) for k, v in info["note_examples"].items()}
    markers = ", ".join(f"U+{c:04X} {v} -> {info['markers'][c]}" for c, v in VERSION_MARKERS)
    rec_rows = rows(records, lambda r: "{%d,%d,%d,%d,%d,%d}" % r, 6)
    comp_keys = rows([(a << 21) | b for (a, b), _ in comp], lambda v: f"0x{v:X}ull", 6)
    comp_vals = rows([c for _, c in comp], lambda v: f"0x{v:X}", 10)
    return f"""\
// GENERATED FILE - DO NOT EDIT. Regenerate with: python tools/gen_normalize_tables.py
//
// Unicode data for the normalizers, probed from tokenizers {info['tokenizers']} over every code point.
// Two Unicode versions meet here, exactly as in tokenizers:
//   * NFD/NFKD/NFC/NFKC: the unicode-normalization-alignments crate, Unicode 9.0 data. Class
//     evidence: {markers}.
//     Against unicodedata2 {EXPECTED_UNICODE}, the crate lacks {notes['nfd']} canonical and {notes['nfkd']} compatibility
//     decompositions (e.g. NFKD {ex['nfkd']}) and {notes['ccc']} non-zero combining classes
//     (e.g. {ex['ccc']}), all on characters newer than 9.0; every value it has agrees.
//   * Lowercase: Rust char::to_lowercase (context-free: Σ always -> σ; İ -> i + U+0307), Unicode 16.0
//     (Garay U+10D50 lowercases). {notes['lower']} code points differ from Python 3.11's str.lower (Unicode
//     14.0), e.g. {ex['lower']}.
// Counts: {info['canon']} canonical and {info['compat']} compatibility decompositions (Hangul syllables are arithmetic and
// not listed), {info['ccc_nonzero']} non-zero classes, {info['pairs']} composition pairs, {info['lower']} lowercase mappings.
//
// Lookups (both two-stage, uint16 blocks):
//   props(cp)  = kPropsStage2[(kPropsStage1[cp >> {ps}] << {ps}) + (cp & {(1 << ps) - 1})]     bits 0-7: combining class
//   record(cp) = kRecordStage2[(kRecordStage1[cp >> {rs}] << {rs}) + (cp & {(1 << rs) - 1})]   0: none, else kRecords[i]
// A record holds three sequences in kPool (offset, length): the canonical full decomposition, the
// compatibility full decomposition (equal to the canonical one where only that exists) and the
// lowercase mapping. Compositions: kCompKeys (first << 21 | second, sorted) -> kCompValues.
// Total {total} bytes.
#pragma once

#include <cstdint>

namespace crayon::normalize_tables {{

{flag_lines}

struct Record {{
  uint16_t canon_off, compat_off, lower_off;  // into kPool
  uint8_t canon_len;   // 0: no canonical decomposition
  uint8_t compat_len;  // 0: no compatibility decomposition
  uint8_t lower_len;   // 0: lowercase is the character itself
}};

inline constexpr int kPropsShift = {ps};
inline constexpr int kRecordShift = {rs};

inline constexpr uint16_t kPropsStage1[{len(p1)}] = {{
{rows(p1, str, 24)}
}};

inline constexpr uint16_t kPropsStage2[{len(p2)}] = {{
{rows(p2, lambda v: f"0x{v:X}", 16)}
}};

inline constexpr uint16_t kRecordStage1[{len(r1)}] = {{
{rows(r1, str, 24)}
}};

inline constexpr uint16_t kRecordStage2[{len(r2)}] = {{
{rows(r2, str, 20)}
}};

inline constexpr Record kRecords[{len(records)}] = {{
{rec_rows}
}};

inline constexpr uint32_t kPool[{len(pool)}] = {{
{rows(pool, lambda v: f"0x{v:X}", 12)}
}};

inline constexpr uint64_t kCompKeys[{len(comp)}] = {{
{comp_keys}
}};

inline constexpr uint32_t kCompValues[{len(comp)}] = {{
{comp_vals}
}};

// Properties of a code point; 0 for anything above U+10FFFF.
inline uint16_t props(uint32_t cp) {{
  if (cp >= 0x110000) return 0;
  return kPropsStage2[(static_cast<uint32_t>(kPropsStage1[cp >> kPropsShift]) << kPropsShift) +
                      (cp & ((1u << kPropsShift) - 1))];
}}

// The record of a code point, or nullptr when it has no decomposition and no lowercase mapping.
inline const Record* record(uint32_t cp) {{
  if (cp >= 0x110000) return nullptr;
  const uint16_t i = kRecordStage2[(static_cast<uint32_t>(kRecordStage1[cp >> kRecordShift]) << kRecordShift) +
                                   (cp & ((1u << kRecordShift) - 1))];
  return i ? &kRecords[i] : nullptr;
}}

}}  // namespace crayon::normalize_tables
"""


def main() -> int:
    return generator_main(build, HEADER, __doc__, "gen_normalize_tables.py", inputs=PROBED)


if __name__ == "__main__":
    sys.exit(main())
