#!/usr/bin/env python3
"""Generate native/tables/word_char_table.h: the "word character" test of `single_word` added tokens.

tokenizers (AddedVocabulary::find_matches) accepts a single_word occurrence only when the text
before it does not end with a word character and the text after it does not start with one; it
tests that with the Rust `regex` crate's `\\w$` and `^\\w`. The crate's Unicode `\\w` is
Alphabetic | Mark | Decimal_Number | Connector_Punctuation | Join_Control (UTS #18), at the Unicode
version of the regex-syntax the wheel was built with; no Python database carries Alphabetic at
that version, so the set is *probed from the reference*: an added token "x" with single_word=true
is searched right after and right before every code point, and the code points that stop it from
matching are the word characters.

Cross-checks (all must hold, or the script fails):
* the left probe (`c + "x"`) and the right probe (`"x" + c`) find the same set;
* the set equals {code points assigned in unicodedata2's Unicode 16.0 that the `regex` module
  (Unicode 17) puts in Alphabetic | M | Nd | Pc | Join_Control}: unicodedata2 fixes the version,
  the `regex` module supplies Alphabetic, which unicodedata2 lacks;
* letters first assigned in 16.0 are word characters and letters first assigned in 17.0 are not
  (this pins the probed version to 16.0).

Usage:
    python tools/gen_word_char_table.py            # (re)write native/tables/word_char_table.h
    python tools/gen_word_char_table.py --check    # exit 1 if the committed header is stale

Requires tokenizers (0.23.x), unicodedata2 (16.0.0) and regex.
"""
from __future__ import annotations

import sys
from pathlib import Path

from _generated import PROBED, generator_main  # tools/ is on sys.path when a generator runs

HEADER = Path(__file__).resolve().parent.parent / "native" / "tables" / "word_char_table.h"
MAX_CP = 0x110000
EXPECTED_UNICODE = "16.0.0"
TOKENIZERS_SERIES = "0.23"
CHUNK = 8192  # code points per probe string (encode_batch runs the chunks in parallel)
# Letters new in Unicode 16.0: Garay, Todhri, Tulu-Tigalari, Sunuwar, Gurung Khema, Kirat Rai, Ol Onal.
NEW_IN_16 = [0x10D50, 0x105C0, 0x11380, 0x11BC0, 0x16100, 0x16D43, 0x1E5D0]


def all_code_points() -> list[int]:
    return [c for c in range(MAX_CP) if not 0xD800 <= c <= 0xDFFF]


def probe(cps: list[int]) -> tuple[set[int], set[int]]:
    """(left, right): the code points c for which a single_word "x" does not match in "c x" / "x c"
    position. Each chunk is ".".join of "c" + "x" (left) or "x" + "c" (right) cells separated by
    ".", which is no word character, so each "x" is judged by its own c alone."""
    import tokenizers
    from tokenizers import models

    tok = tokenizers.Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.add_tokens([tokenizers.AddedToken("x", single_word=True, normalized=False)])
    x_id = tok.token_to_id("x")
    results = []
    for left in (True, False):
        texts, where = [], []
        for k in range(0, len(cps), CHUNK):
            chunk = cps[k:k + CHUNK]
            if left:
                texts.append("".join("." + chr(c) + "x" for c in chunk))
                where.append({3 * i + 2: c for i, c in enumerate(chunk)})
            else:
                texts.append("".join(".x" + chr(c) for c in chunk))
                where.append({3 * i + 1: c for i, c in enumerate(chunk)})
        blocked = set(cps)
        for enc, pos_to_cp in zip(tok.encode_batch(texts, add_special_tokens=False), where):
            for i, (s, _) in zip(enc.ids, enc.offsets):
                if i == x_id and s in pos_to_cp:
                    blocked.discard(pos_to_cp[s])
        results.append(blocked)
    return results[0], results[1]


def expected_from_databases(cps: list[int]) -> set[int]:
    import regex
    import unicodedata2 as ud

    rx = regex.compile(r"[\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]")
    return {c for c in cps if ud.category(chr(c)) != "Cn" and rx.match(chr(c))}


def build() -> str:
    import regex
    import tokenizers
    import unicodedata2 as ud

    if ud.unidata_version != EXPECTED_UNICODE:
        raise SystemExit(f"unicodedata2 has Unicode {ud.unidata_version}, need {EXPECTED_UNICODE}")
    if not tokenizers.__version__.startswith(TOKENIZERS_SERIES + "."):
        print(f"warning: probing tokenizers {tokenizers.__version__}, the table was made with"
              f" {TOKENIZERS_SERIES}.x", file=sys.stderr)
    cps = all_code_points()
    left, right = probe(cps)
    problems = []
    if left != right:
        problems.append(f"left/right probes differ: {sorted(map(hex, left ^ right))[:8]}")
    want = expected_from_databases(cps)
    if left != want:
        problems.append(f"probe-only {sorted(map(hex, left - want))[:8]},"
                        f" database-only {sorted(map(hex, want - left))[:8]}")
    missing16 = [hex(c) for c in NEW_IN_16 if c not in left]
    if missing16:
        problems.append(f"letters new in Unicode 16.0 are not word characters: {missing16}")
    alpha = regex.compile(r"\p{Alphabetic}")
    new17 = [c for c in cps if ud.category(chr(c)) == "Cn" and alpha.match(chr(c))]
    if not new17 or any(c in left for c in new17):
        problems.append("letters new in Unicode 17.0 are word characters (or none were found)")
    if problems:
        raise SystemExit("probe/cross-check failed:\n  " + "\n  ".join(problems))
    return render(left)


def render(word: set[int]) -> str:
    bits = [0] * (MAX_CP // 64)
    for c in word:
        bits[c >> 6] |= 1 << (c & 63)
    best = None
    for shift in range(6, 13):  # block = 1 << shift code points = 1 << (shift - 6) words
        per = 1 << (shift - 6)
        index: dict[tuple[int, ...], int] = {}
        blocks: list[tuple[int, ...]] = []
        stage1 = []
        for k in range(0, len(bits), per):
            blk = tuple(bits[k:k + per])
            if blk not in index:
                index[blk] = len(blocks)
                blocks.append(blk)
            stage1.append(index[blk])
        s1_bytes = 1 if len(blocks) <= 256 else 2
        cost = s1_bytes * len(stage1) + 8 * per * len(blocks)
        if best is None or cost < best[0]:
            best = (cost, shift, stage1, blocks, s1_bytes)
    assert best is not None
    cost, shift, stage1, blocks, s1_bytes = best
    stage2 = [w for b in blocks for w in b]
    s1_type = "uint8_t" if s1_bytes == 1 else "uint16_t"
    ascii_lo = bits[0]
    ascii_hi = bits[1]
    s1_rows = "\n".join("    " + ",".join(map(str, stage1[i:i + 32])) + "," for i in range(0, len(stage1), 32))
    s2_rows = "\n".join("    " + ",".join(f"0x{w:016X}" for w in stage2[i:i + 4]) + ","
                        for i in range(0, len(stage2), 4))
    return f"""\
// GENERATED FILE - DO NOT EDIT. Regenerate with: python tools/gen_word_char_table.py
//
// The word characters of `single_word` added tokens: the Rust regex crate's Unicode \\w
// (Alphabetic | Mark | Nd | Pc | Join_Control) as tokenizers {TOKENIZERS_SERIES}.x uses it in
// AddedVocabulary::find_matches, probed over every code point and found to be Unicode
// {EXPECTED_UNICODE[:-2]} (cross-checked against unicodedata2 {EXPECTED_UNICODE} and the regex module's
// Alphabetic; see the generator). {len(word)} code points.
//
//   word = kWordStage2[(kWordStage1[cp >> {shift}] << {shift - 6}) + ((cp >> 6) & {(1 << (shift - 6)) - 1})] >> (cp & 63) & 1
//   ({len(blocks)} distinct blocks of {1 << shift} code points, {cost} bytes)
#pragma once

#include <cstdint>

namespace crayon::word_char_table {{

inline constexpr int kWordShift = {shift};
inline constexpr uint64_t kWordAscii[2] = {{0x{ascii_lo:016X}, 0x{ascii_hi:016X}}};
inline constexpr {s1_type} kWordStage1[{len(stage1)}] = {{
{s1_rows}
}};
inline constexpr uint64_t kWordStage2[{len(stage2)}] = {{
{s2_rows}
}};

// True when cp is a word character; false for anything above U+10FFFF (utf8::kInvalid included).
inline bool is_word_char(uint32_t cp) {{
  if (cp < 0x80) return (kWordAscii[cp >> 6] >> (cp & 63)) & 1;
  if (cp >= 0x110000) return false;
  const uint32_t block = kWordStage1[cp >> kWordShift];
  const uint64_t word = kWordStage2[(block << (kWordShift - 6)) + ((cp >> 6) & ((1u << (kWordShift - 6)) - 1))];
  return (word >> (cp & 63)) & 1;
}}

}}  // namespace crayon::word_char_table
"""


def main() -> int:
    return generator_main(build, HEADER, __doc__, "gen_word_char_table.py", inputs=PROBED)


if __name__ == "__main__":
    sys.exit(main())
