#!/usr/bin/env python3
"""Generate native/tables/regex_tables.h: the Unicode data of the Oniguruma-compatible regex engine and of
tokenizers' char-class pre-tokenizers.

Every table is *probed from the reference* (tokenizers 0.23.3, which runs Split patterns with
Oniguruma and its char-class pre-tokenizers with Rust's `char` methods), not only derived from a
Unicode database:

* general category: from unicodedata2 (Unicode 16.0), cross-checked against Oniguruma's \\p{..} for
  every category over every assigned code point;
* \\w \\s \\d: Oniguruma's own sets, probed over every code point (\\w is Alphabetic|M|Nd|Pc|Join_C,
  which no Python database carries);
* scripts (\\p{Han}, \\p{Latin}, ...): probed, for the few scripts listed in SCRIPTS;
* case folding for (?i): orbits proposed by the `regex` module and Python, restricted to code
  points assigned in 16.0, then each orbit checked against Oniguruma; the characters Oniguruma folds
  to several characters (so that `(?i)ss` matches "ß") are recorded so the engine can refuse them;
* the pre-tokenizer predicates (Whitespace's \\w/\\s, WhitespaceSplit's char::is_whitespace,
  Digits' char::is_numeric, Punctuation's is_punc, which uses older Unicode tables) probed by running
  the pre-tokenizers themselves over every code point.

Usage:
    python tools/gen_regex_tables.py            # (re)write native/tables/regex_tables.h
    python tools/gen_regex_tables.py --check    # exit 1 if the committed header is stale

Requires tokenizers (0.23.x), unicodedata2 (16.0.0) and regex.
"""
from __future__ import annotations

import sys
from pathlib import Path

from _generated import PROBED, generator_main  # tools/ is on sys.path when a generator runs

HEADER = Path(__file__).resolve().parent.parent / "native" / "tables" / "regex_tables.h"
MAX_CP = 0x110000
EXPECTED_UNICODE = "16.0.0"
TOKENIZERS_SERIES = "0.23"

# General categories in the order of their numeric codes (0 = Cn, so unassigned is zero).
CATEGORIES = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd",
              "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf",
              "Cs", "Co"]

# Per-code-point flag bits. Oniguruma's \w (and \p{Word}, \b) outside brackets also matches the
# Latin-1 superscript digits and fractions; inside brackets it does not (probed), hence two bits. (uint16 together with the 5-bit category in the low bits).
FLAGS = [
    ("kWord", 0x0020, "Oniguruma \\w"),
    ("kSpace", 0x0040, "Oniguruma \\s (White_Space)"),
    ("kDigit", 0x0080, "Oniguruma \\d (Nd)"),
    ("kWsWord", 0x0100, "pre_tokenizers.Whitespace: \\w"),
    ("kWsSpace", 0x0200, "pre_tokenizers.Whitespace: \\s"),
    ("kRustWhitespace", 0x0400, "pre_tokenizers.WhitespaceSplit: char::is_whitespace"),
    ("kRustNumeric", 0x0800, "pre_tokenizers.Digits: char::is_numeric"),
    ("kPunc", 0x1000, "pre_tokenizers.Punctuation: is_punc (older Unicode tables)"),
    ("kWordInClass", 0x2000, "Oniguruma [\\w] inside brackets (lacks U+00B2 B3 B9 BC BD BE)"),
]

# Scripts \p{..} accepts; any other script name is refused by the engine (RegexError).
SCRIPTS = ["Latin", "Greek", "Cyrillic", "Armenian", "Hebrew", "Arabic", "Devanagari", "Bengali",
           "Thai", "Georgian", "Hangul", "Hiragana", "Katakana", "Han", "Common", "Inherited"]


def all_code_points() -> list[int]:
    return [c for c in range(MAX_CP) if not 0xD800 <= c <= 0xDFFF]


_UNIVERSE: dict[int, set[int]] = {}


def split_removed(pattern: str, text: str) -> set[int]:
    """Code points of `text` that Oniguruma (via tokenizers' Split) matches with the one-char class."""
    from tokenizers import Regex
    from tokenizers import pre_tokenizers as pt

    kept: set[int] = set()
    for piece, _ in pt.Split(Regex(pattern), "removed").pre_tokenize_str(text):
        kept.update(map(ord, piece))
    if len(text) < 100_000:
        return {ord(c) for c in text} - kept
    # The big probe texts are module-lifetime objects; their code point sets are computed once.
    if id(text) not in _UNIVERSE:
        _UNIVERSE[id(text)] = set(map(ord, text))
    return _UNIVERSE[id(text)] - kept


def probe_pretokenizer(pretok, cps: list[int]) -> tuple[set[int], set[int]]:
    """Runs `pretok` on "a c1 a c2 a ..." (char offsets) and returns (dropped, joined) code points:
    dropped = not in any piece, joined = in the same piece as the 'a' before it."""
    import numpy as np

    text = "a" + "".join(chr(c) + "a" for c in cps)
    spans = np.array([o for _, o in pretok.pre_tokenize_str(text)], dtype=np.int64).reshape(-1, 2)
    pos = 1 + 2 * np.arange(len(cps), dtype=np.int64)
    k = np.searchsorted(spans[:, 0], pos, side="right") - 1  # last piece starting at or before pos
    covered = (k >= 0) & (spans[np.maximum(k, 0), 1] > pos)
    joined_mask = covered & (spans[np.maximum(k, 0), 0] < pos)
    arr = np.array(cps, dtype=np.int64)
    return set(arr[~covered].tolist()), set(arr[joined_mask].tolist())


def case_orbits(assigned: set[int], problems: list[str]) -> tuple[list[list[int]], list[tuple[int, str]]]:
    import regex

    cand = set()
    for c in range(MAX_CP):
        if c not in assigned:
            continue
        ch = chr(c)
        if ch.lower() != ch or ch.upper() != ch or ch.casefold() != ch:
            cand.add(c)
    for prop in (r"\p{Changes_When_Casemapped}", r"\p{Changes_When_Casefolded}"):
        rx = regex.compile(prop)
        cand.update(c for c in assigned if rx.match(chr(c)))
    cand_sorted = sorted(cand)
    # The regex module (Unicode 17, Turkic-aware) only proposes candidates; the orbits are what
    # Oniguruma itself matches. Candidates are separated by U+0000 so that a multi-character folding
    # ((?i)ﬅ matching "st") cannot show up as two adjacent candidates.
    cand_text = "\0".join(map(chr, cand_sorted))
    matched = {c: split_removed(f"(?i)\\x{{{c:X}}}", cand_text) for c in cand_sorted}
    orbits = []
    for c in cand_sorted:
        got = matched[c]
        if c not in got:
            problems.append(f"(?i) U+{c:04X} does not match itself")
        for m in got:
            if matched.get(m) != got:
                problems.append(f"(?i) U+{c:04X} matches U+{m:04X} but their sets differ")
        if len(got) > 1 and c == min(got):
            orbits.append(sorted(got))
    # Cross-check against the regex module's simple folding, apart from the Turkic dotted/dotless i.
    for c in cand_sorted:
        rx = {ord(m.group()) for m in regex.finditer("(?i)" + regex.escape(chr(c)), cand_text)} - {0}
        if c not in (0x49, 0x69, 0x130, 0x131):
            rx -= {0x130, 0x131}
        else:
            rx = {0x49, 0x69} if c in (0x49, 0x69) else {c}
        if rx != matched[c]:
            problems.append(f"(?i) U+{c:04X}: Oniguruma {sorted(map(hex, matched[c]))}, regex {sorted(map(hex, rx))}")
    # Characters whose full case folding has several characters: Oniguruma matches (?i)ss against "ß".
    multi = []
    for c in sorted(assigned):
        f = chr(c).casefold()
        if len(f) > 1:
            multi.append((c, f))
            if split_removed("(?i)" + "".join(f"\\x{{{ord(x):X}}}" for x in f), chr(c) + " ") != {c}:
                problems.append(f"(?i) multi-char fold of U+{c:04X} ({f!r}) not matched by Oniguruma")
    return orbits, multi


def build() -> str:
    import tokenizers
    import unicodedata2 as ud
    from tokenizers import pre_tokenizers as pt

    if ud.unidata_version != EXPECTED_UNICODE:
        raise SystemExit(f"unicodedata2 has Unicode {ud.unidata_version}, need {EXPECTED_UNICODE}")
    if not tokenizers.__version__.startswith(TOKENIZERS_SERIES + "."):
        print(f"warning: probing tokenizers {tokenizers.__version__}, tables were made with"
              f" {TOKENIZERS_SERIES}.x", file=sys.stderr)
    cps = all_code_points()
    text = "".join(map(chr, cps))
    problems: list[str] = []
    cat = [0] * MAX_CP
    for c in cps:
        cat[c] = CATEGORIES.index(ud.category(chr(c)))
    assigned = {c for c in cps if cat[c] != 0}
    # Probe text for categories and scripts: everything but private use and most unassigned points.
    probe_cps = [c for c in cps if (cat[c] != 0 and CATEGORIES[cat[c]] != "Co") or c % 61 == 0]
    probe_text = "".join(map(chr, probe_cps))
    for code, name in enumerate(CATEGORIES):
        if name == "Cs":
            continue
        got = split_removed(f"\\p{{{name}}}", probe_text)
        want = {c for c in probe_cps if cat[c] == code}
        if got != want:
            problems.append(f"\\p{{{name}}}: Oniguruma-only {sorted(map(hex, got - want))[:8]},"
                            f" unicodedata2-only {sorted(map(hex, want - got))[:8]}")

    flags = [0] * MAX_CP

    def setbit(bit: int, members: set[int]) -> None:
        for c in members:
            flags[c] |= bit

    bits = {n: b for n, b, _ in FLAGS}
    word = split_removed(r"\w", text)
    setbit(bits["kWord"], word)
    word_in_class = split_removed(r"[\w]", text)
    setbit(bits["kWordInClass"], word_in_class)
    if word - word_in_class != {0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE} or word_in_class - word:
        problems.append("\\w and [\\w] differ by more than the six Latin-1 digits/fractions")
    setbit(bits["kSpace"], split_removed(r"\s", text))
    digits = split_removed(r"\d", text)
    if digits != {c for c in cps if CATEGORIES[cat[c]] == "Nd"}:
        problems.append("\\d is not \\p{Nd}")
    setbit(bits["kDigit"], digits)

    dropped, joined = probe_pretokenizer(pt.Whitespace(), cps)
    setbit(bits["kWsSpace"], dropped)
    setbit(bits["kWsWord"], joined)
    dropped, _ = probe_pretokenizer(pt.WhitespaceSplit(), cps)
    setbit(bits["kRustWhitespace"], dropped)
    # Digits(individual_digits=True) isolates each numeric char: numeric = split from the 'a' before.
    d_dropped, d_joined = probe_pretokenizer(pt.Digits(individual_digits=True), cps)
    assert not d_dropped
    setbit(bits["kRustNumeric"], set(cps) - d_joined)
    p_dropped, p_joined = probe_pretokenizer(pt.Punctuation("isolated"), cps)
    assert not p_dropped
    setbit(bits["kPunc"], set(cps) - p_joined)

    script = [0] * MAX_CP
    for k, name in enumerate(SCRIPTS, start=1):
        for c in split_removed(f"\\p{{{name}}}", probe_text):
            if script[c]:
                problems.append(f"U+{c:04X} in two scripts")
            script[c] = k

    orbits, multi = case_orbits(assigned, problems)
    if problems:
        raise SystemExit("probe/cross-check failed:\n  " + "\n  ".join(problems))
    props = [cat[c] | flags[c] for c in range(MAX_CP)]
    return render(props, script, orbits, multi)


def two_stage(values: list[int], shift: int) -> tuple[list[int], list[tuple[int, ...]]]:
    size = 1 << shift
    index: dict[tuple[int, ...], int] = {}
    blocks: list[tuple[int, ...]] = []
    stage1 = []
    for start in range(0, MAX_CP, size):
        blk = tuple(values[start:start + size])
        if blk not in index:
            index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(index[blk])
    return stage1, blocks


def best_two_stage(values: list[int], elem_bytes: int) -> tuple[int, list[int], list[tuple[int, ...]]]:
    best = None
    for s in range(5, 10):
        st1, blocks = two_stage(values, s)
        cost = 2 * len(st1) + elem_bytes * len(blocks) * (1 << s)
        if best is None or cost < best[0]:
            best = (cost, s, st1, blocks)
    assert best is not None
    return best[1], best[2], best[3]


def rows(values, fmt, per_line: int) -> str:
    out = []
    for i in range(0, len(values), per_line):
        out.append("    " + ",".join(fmt(v) for v in values[i:i + per_line]) + ",")
    return "\n".join(out)


def render(props: list[int], script: list[int], orbits: list[list[int]],
           multi: list[tuple[int, str]]) -> str:
    ps, p1, pblocks = best_two_stage(props, 2)
    ss, s1, sblocks = best_two_stage(script, 1)
    p2 = [v for b in pblocks for v in b]
    s2 = [v for b in sblocks for v in b]
    # Case orbits as a cycle: kFoldNext maps each member to the next member (sorted by code point).
    nxt = []
    for o in orbits:
        for i, c in enumerate(o):
            nxt.append((c, o[(i + 1) % len(o)]))
    nxt.sort()
    # First two characters of every multi-character fold: a (?i) literal pair folding to one of
    # these could match a single character in Oniguruma, which the engine refuses.
    pairs = sorted({(ord(f[0]), ord(f[1])) for _, f in multi})
    flag_lines = "\n".join(f"inline constexpr uint16_t {n} = 0x{b:04X};  // {d}" for n, b, d in FLAGS)
    cat_lines = "\n".join(f"  k{n} = {i}," for i, n in enumerate(CATEGORIES))
    script_lines = "\n".join(f'    "{n}",' for n in SCRIPTS)
    return f"""\
// GENERATED FILE - DO NOT EDIT. Regenerate with: python tools/gen_regex_tables.py
//
// Unicode data for the Oniguruma-compatible regex engine (regex.cc) and tokenizers' char-class
// pre-tokenizers (split.cc), probed from tokenizers {TOKENIZERS_SERIES}.x over every code point and
// cross-checked against unicodedata2 (Unicode {EXPECTED_UNICODE}); see the generator for how.
//
// props(cp): low 5 bits = general category (enum Category), high bits = the k* flags below.
//   props = kPropStage2[(kPropStage1[cp >> {ps}] << {ps}) + (cp & {(1 << ps) - 1})]   ({len(pblocks)} blocks)
// script(cp): index into kScriptNames plus one, 0 = none of them.
//   script = kScriptStage2[(kScriptStage1[cp >> {ss}] << {ss}) + (cp & {(1 << ss) - 1})]   ({len(sblocks)} blocks)
// Case folding ((?i)): kFoldNext is sorted by code point and maps each character with other case
// forms to the next member of its orbit (a cycle); characters absent from it have no other forms.
// kMultiFold lists the characters whose full case folding has several characters, and
// kMultiFoldPairs the first two (folded) characters of each such folding.
#pragma once

#include <cstdint>

namespace crayon::regex_tables {{

enum Category : uint8_t {{
{cat_lines}
}};
inline constexpr uint16_t kCategoryMask = 0x001F;
{flag_lines}

inline constexpr int kPropShift = {ps};
inline constexpr uint16_t kPropStage1[{len(p1)}] = {{
{rows(p1, str, 24)}
}};
inline constexpr uint16_t kPropStage2[{len(p2)}] = {{
{rows(p2, lambda v: f"0x{v:04X}", 12)}
}};

inline constexpr int kScriptCount = {len(SCRIPTS)};
inline constexpr const char* kScriptNames[{len(SCRIPTS)}] = {{
{script_lines}
}};
inline constexpr int kScriptShift = {ss};
inline constexpr uint16_t kScriptStage1[{len(s1)}] = {{
{rows(s1, str, 24)}
}};
inline constexpr uint8_t kScriptStage2[{len(s2)}] = {{
{rows(s2, str, 32)}
}};

struct FoldLink {{
  uint32_t cp, next;
}};
inline constexpr FoldLink kFoldNext[{len(nxt)}] = {{
{rows(nxt, lambda v: f"{{0x{v[0]:X},0x{v[1]:X}}}", 8)}
}};

inline constexpr uint32_t kMultiFold[{len(multi)}] = {{
{rows([c for c, _ in multi], lambda v: f"0x{v:X}", 12)}
}};

inline constexpr uint32_t kMultiFoldPairs[{len(pairs)}][2] = {{
{rows(pairs, lambda v: f"{{0x{v[0]:X},0x{v[1]:X}}}", 8)}
}};

inline uint16_t props(uint32_t cp) {{
  if (cp >= 0x110000) return 0;
  return kPropStage2[(static_cast<uint32_t>(kPropStage1[cp >> kPropShift]) << kPropShift) +
                     (cp & ((1u << kPropShift) - 1))];
}}

inline uint8_t script(uint32_t cp) {{
  if (cp >= 0x110000) return 0;
  return kScriptStage2[(static_cast<uint32_t>(kScriptStage1[cp >> kScriptShift]) << kScriptShift) +
                       (cp & ((1u << kScriptShift) - 1))];
}}

}}  // namespace crayon::regex_tables
"""


def main() -> int:
    return generator_main(build, HEADER, __doc__, "gen_regex_tables.py", inputs=PROBED)


if __name__ == "__main__":
    sys.exit(main())
