#!/usr/bin/env python3
"""Generate native/tables/unicode_tables.h: the character classes the pre-tokenizer scanners need.

The tables are *probed from the reference*, not derived from a Unicode database: for each class we
run tiktoken's own regex engine (fancy-regex) over every code point and record what it matches.
tiktoken's `find_iter` drops text the pattern does not match, so encoding a string of all code
points with a byte-level vocabulary and decoding the tokens gives back exactly the matched
characters. The result is then cross-checked against `unicodedata2` (Unicode 16.0, the version
tiktoken 0.14's regex crates use); any difference is an error.

Usage:
    python tools/gen_unicode_tables.py            # (re)write native/tables/unicode_tables.h
    python tools/gen_unicode_tables.py --check    # exit 1 if the committed header is stale

Requires tiktoken (0.14.x) and unicodedata2 (16.0.0) for both modes.
"""
from __future__ import annotations

import sys
from pathlib import Path

from _generated import PROBED, generator_main  # tools/ is on sys.path when a generator runs

HEADER = Path(__file__).resolve().parent.parent / "native" / "tables" / "unicode_tables.h"
MAX_CP = 0x110000
EXPECTED_UNICODE = "16.0.0"
TIKTOKEN_SERIES = "0.14"  # the reference this project pins; its regex crates use Unicode 16.0

# Flag bits of one code point. Categories are mutually exclusive in Unicode, so the byte also
# encodes each letter subcategory: Lu = L&U&~W&~LT, Lt = LT, Ll = L&W&~U, Lm = LM, Lo = L&U&W&~LM.
FLAGS = [
    ("kLetter", 0x01, r"\p{L}"),
    ("kNumber", 0x02, r"\p{N}"),
    ("kSpace", 0x04, r"\s"),  # Rust regex \s = White_Space
    ("kUpperish", 0x08, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"),  # o200k's first letter class
    ("kLowerish", 0x10, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"),  # o200k's second letter class
    ("kMark", 0x20, r"\p{M}"),
    ("kTitlecase", 0x40, r"\p{Lt}"),
    ("kModifier", 0x80, r"\p{Lm}"),
]

# Classes only used to check the flag byte encodes them exactly.
CHECK_CLASSES = {
    r"\p{Lu}": lambda f: f & 0x01 and f & 0x08 and not f & 0x10 and not f & 0x40,
    r"\p{Lt}": lambda f: f & 0x40,
    r"\p{Ll}": lambda f: f & 0x01 and f & 0x10 and not f & 0x08,
    r"\p{Lm}": lambda f: f & 0x80,
    r"\p{Lo}": lambda f: f & 0x01 and f & 0x08 and f & 0x10 and not f & 0x80,
    r"[^\s\p{L}\p{N}]": lambda f: not f & 0x07,
    r"[^\r\n\p{L}\p{N}]": None,  # checked separately (needs the code point)
}

# The letters of the contractions 's 't 're 've 'm 'll 'd, matched case-insensitively by
# cl100k, o200k and Llama 3. Probed: U+017F LATIN SMALL LETTER LONG S matches s.
CONTRACTION_LETTERS = "sdmtlvre"

WHITE_SPACE = (  # PropList.txt White_Space, unchanged since Unicode 6.3
    list(range(0x09, 0x0E)) + [0x20, 0x85, 0xA0, 0x1680] + list(range(0x2000, 0x200B))
    + [0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)


def all_code_points() -> list[int]:
    return [c for c in range(MAX_CP) if not 0xD800 <= c <= 0xDFFF]


def probe(pattern: str, text: str) -> set[int]:
    """Code points of `text` matched by `pattern` under tiktoken's regex engine."""
    import tiktoken

    enc = tiktoken.Encoding(
        "probe",
        pat_str=pattern,
        mergeable_ranks={bytes([b]): b for b in range(256)},
        special_tokens={},
    )
    matched = enc.decode_bytes(enc.encode_ordinary(text)).decode("utf-8")
    return {ord(c) for c in matched}


def reference_sets(cps: list[int]) -> dict[str, set[int]]:
    """The same classes from unicodedata2, for the cross-check."""
    import unicodedata2 as ud

    if ud.unidata_version != EXPECTED_UNICODE:
        raise SystemExit(f"unicodedata2 has Unicode {ud.unidata_version}, need {EXPECTED_UNICODE}:"
                         f" pip install unicodedata2=={EXPECTED_UNICODE}")
    cat = {c: ud.category(chr(c)) for c in cps}
    by = lambda *gcs: {c for c, g in cat.items() if g in gcs}  # noqa: E731
    return {
        r"\p{L}": by("Lu", "Ll", "Lt", "Lm", "Lo"),
        r"\p{N}": by("Nd", "Nl", "No"),
        r"\s": set(WHITE_SPACE),
        r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]": by("Lu", "Lt", "Lm", "Lo", "Mn", "Mc", "Me"),
        r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]": by("Ll", "Lm", "Lo", "Mn", "Mc", "Me"),
        r"\p{M}": by("Mn", "Mc", "Me"),
        r"\p{Lt}": by("Lt"),
        r"\p{Lm}": by("Lm"),
        r"\p{Lu}": by("Lu"),
        r"\p{Ll}": by("Ll"),
        r"\p{Lo}": by("Lo"),
    }


def build() -> str:
    import tiktoken

    if not tiktoken.__version__.startswith(TIKTOKEN_SERIES + "."):
        print(f"warning: probing tiktoken {tiktoken.__version__}, tables were made with"
              f" {TIKTOKEN_SERIES}.x; a difference will show as a cross-check failure",
              file=sys.stderr)
    cps = all_code_points()
    text = "".join(map(chr, cps))
    ref = reference_sets(cps)
    problems: list[str] = []

    flags = [0] * MAX_CP
    for name, bit, pattern in FLAGS:
        got = probe(pattern, text)
        if got != ref[pattern]:
            extra = sorted(got - ref[pattern])[:10]
            missing = sorted(ref[pattern] - got)[:10]
            problems.append(f"{pattern}: tiktoken-only {list(map(hex, extra))},"
                            f" unicodedata2-only {list(map(hex, missing))}")
        for c in got:
            flags[c] |= bit

    for pattern, decode in CHECK_CLASSES.items():
        got = probe(pattern, text)
        if decode is None:
            want = {c for c in cps if not flags[c] & 0x03 and c not in (0x0D, 0x0A)}
        else:
            want = {c for c in cps if decode(flags[c])}
        if got != want:
            problems.append(f"{pattern}: flag byte does not encode it"
                            f" ({len(got ^ want)} code points differ)")
        if pattern in ref and got != ref[pattern]:
            problems.append(f"{pattern}: differs from unicodedata2")

    # Case-insensitive contraction letters: which code points match each letter under (?i:..).
    fold: dict[int, str] = {}
    for letter in CONTRACTION_LETTERS:
        for c in probe(f"(?i:{letter})", text):
            if c in fold:
                problems.append(f"U+{c:04X} matches both {fold[c]} and {letter}")
            fold[c] = letter
    apostrophe = probe("(?i:')", text)
    if apostrophe != {0x27}:
        problems.append(f"(?i:') matches {sorted(map(hex, apostrophe))}, scanners assume only U+0027")
    for c, letter in fold.items():
        if c < 128 and chr(c).lower() != letter:
            problems.append(f"U+{c:04X} folds to {letter} (unexpected ASCII case mapping)")
    for letter in CONTRACTION_LETTERS:
        for c in (ord(letter), ord(letter.upper())):
            if fold.get(c) != letter:
                problems.append(f"{chr(c)!r} does not match (?i:{letter})")
    if problems:
        raise SystemExit("probe/cross-check failed:\n  " + "\n  ".join(problems))
    fold_extra = sorted((c, l) for c, l in fold.items() if c >= 128)

    for c in range(0xD800, 0xE000):
        assert flags[c] == 0

    return render(flags, fold_extra)


def two_stage(flags: list[int], shift: int) -> tuple[list[int], list[bytes]]:
    size = 1 << shift
    blocks: dict[bytes, int] = {}
    order: list[bytes] = []
    stage1 = []
    for start in range(0, MAX_CP, size):
        blk = bytes(flags[start:start + size])
        if blk not in blocks:
            blocks[blk] = len(order)
            order.append(blk)
        stage1.append(blocks[blk])
    return stage1, order


def render(flags: list[int], fold_extra: list[tuple[int, str]]) -> str:
    # Pick the block size that makes the two tables smallest (stage1 entries are uint16).
    best = min(range(5, 10), key=lambda s: (lambda t: 2 * len(t[0]) + len(t[1]) * (1 << s))(
        two_stage(flags, s)))
    stage1, blocks = two_stage(flags, best)
    assert len(blocks) < 65536
    stage2 = b"".join(blocks)

    def rows(values, fmt, per_line):
        out = []
        for i in range(0, len(values), per_line):
            out.append("    " + ",".join(fmt(v) for v in values[i:i + per_line]) + ",")
        return "\n".join(out)

    flag_lines = "\n".join(f"inline constexpr uint8_t {n} = 0x{b:02X};  // {p}" for n, b, p in FLAGS)
    fold_lines = "\n".join(f"    case 0x{c:04X}: return '{l}';" for c, l in fold_extra)
    return f"""\
// GENERATED FILE - DO NOT EDIT. Regenerate with: python tools/gen_unicode_tables.py
//
// Character classes for the pre-tokenizer scanners, probed from tiktoken's regex engine (fancy-regex
// and the regex crate; tiktoken {TIKTOKEN_SERIES}.x) over every code point and cross-checked against unicodedata2
// (Unicode {EXPECTED_UNICODE}). Surrogates and values above U+10FFFF have no flags.
//
// Lookup: flags(cp) = kStage2[(kStage1[cp >> {best}] << {best}) + (cp & {(1 << best) - 1})], with an ASCII table in
// front. Tables: {len(stage1)} stage-1 entries (uint16), {len(blocks)} distinct blocks of {1 << best} bytes.
// Letter subcategories are exclusive, so the byte encodes them all:
//   Lu = kLetter & kUpperish & ~kLowerish & ~kTitlecase     Ll = kLetter & kLowerish & ~kUpperish
//   Lt = kTitlecase   Lm = kModifier   Lo = kLetter & kUpperish & kLowerish & ~kModifier
#pragma once

#include <cstdint>

namespace crayon::unicode {{

{flag_lines}

inline constexpr int kBlockShift = {best};

inline constexpr uint8_t kAsciiFlags[128] = {{
{rows(flags[:128], lambda v: f"0x{v:02X}", 16)}
}};

inline constexpr uint16_t kStage1[{len(stage1)}] = {{
{rows(stage1, str, 24)}
}};

inline constexpr uint8_t kStage2[{len(stage2)}] = {{
{rows(list(stage2), lambda v: f"0x{v:02X}", 16)}
}};

// Flags of a code point; 0 for surrogates and anything above U+10FFFF.
inline uint8_t flags(uint32_t cp) {{
  if (cp < 128) return kAsciiFlags[cp];
  if (cp >= 0x110000) return 0;
  return kStage2[(static_cast<uint32_t>(kStage1[cp >> kBlockShift]) << kBlockShift) +
                 (cp & ((1u << kBlockShift) - 1))];
}}

// The contraction letter (one of "{CONTRACTION_LETTERS}") that `cp` matches case-insensitively under
// tiktoken's `(?i:...)`, or 0. The apostrophe itself matches only U+0027 (probed).
inline char contraction_letter(uint32_t cp) {{
  if (cp < 128) {{
    const uint32_t lower = cp | 0x20;
    switch (lower) {{
      case 's': case 'd': case 'm': case 't': case 'l': case 'v': case 'r': case 'e':
        return (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') ? static_cast<char>(lower) : 0;
      default: return 0;
    }}
  }}
  switch (cp) {{
{fold_lines}
    default: return 0;
  }}
}}

}}  // namespace crayon::unicode
"""


def main() -> int:
    return generator_main(build, HEADER, __doc__, "gen_unicode_tables.py", inputs=PROBED)


if __name__ == "__main__":
    sys.exit(main())
