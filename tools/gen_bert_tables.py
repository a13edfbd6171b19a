#!/usr/bin/env python3
"""Generate native/tables/bert_tables.h: the character classes of BertNormalizer and BertPreTokenizer.

tokenizers (normalizers/bert.rs, pre_tokenizers/bert.rs) decides them with three sources of
Unicode data, of three different ages, so every class is *probed from the reference* (tokenizers
0.23.3) over every code point rather than taken from one database:

* clean_text removes NUL, U+FFFD and `is_control` (the `unicode_categories` crate's is_other:
  Cc | Cf | Co, Unicode 8.0 tables, minus tab, newline and carriage return), then maps
  `is_whitespace` (Rust's char::is_whitespace, plus \\t \\n \\r) to ' '. Unassigned code points
  are kept (the crate's Cn test matches nothing), and so are the format characters added after
  8.0 (U+0890, U+08E2, U+13430, ...); U+000B, U+000C and U+0085 are Cc, so they are removed
  before they could be mapped to ' '.
* handle_chinese_chars: the fixed code point ranges of bert.rs' is_chinese_char.
* strip_accents: NFD (unicode-normalization-alignments, Unicode 9.0, see normalize_tables.h) then
  drops `is_mark_nonspacing` (unicode_categories, Unicode 8.0: U+1171E is Mn, U+1E944 is not).
  kMn is probed on the characters NFD leaves alone, the only ones the filter ever sees; the
  script checks that every decomposable character comes out as its NFD minus the kMn characters.
* BertPreTokenizer removes char::is_whitespace (White_Space, Rust std) and isolates
  `is_ascii_punctuation || is_punctuation` (unicode_categories, Unicode 8.0: U+2E42 is
  punctuation, U+2E43 is not), probed by running the pre-tokenizer on "a c a c ...".
* lowercase is Rust's char::to_lowercase, already in normalize_tables.h; the script checks that
  BertNormalizer(lowercase only) and the Lowercase normalizer agree on every code point.

Each probed set is cross-checked against unicodedata2 (Unicode 16.0) and the differences must be
exactly the known ones (characters new since 8.0, and the two marks and two punctuation signs whose
category changed later); the script fails otherwise.

Usage:
    python tools/gen_bert_tables.py            # (re)write native/tables/bert_tables.h
    python tools/gen_bert_tables.py --check    # exit 1 if the committed header is stale

Requires tokenizers (0.23.x) and unicodedata2 (16.0.0).
"""
from __future__ import annotations

import sys
from pathlib import Path

from _generated import PROBED, generator_main  # tools/ is on sys.path when a generator runs
from gen_regex_tables import best_two_stage, probe_pretokenizer, rows

HEADER = Path(__file__).resolve().parent.parent / "native" / "tables" / "bert_tables.h"
MAX_CP = 0x110000
EXPECTED_UNICODE = "16.0.0"
TOKENIZERS_SERIES = "0.23"
CHUNK = 8192
SEP = "|"  # separates probed code points; probed on its own

FLAGS = [
    ("kRemove", 0x01, "clean_text removes it (NUL, U+FFFD, is_control)"),
    ("kSpace", 0x02, "clean_text maps it to ' ' (is_whitespace and not removed)"),
    ("kChinese", 0x04, "handle_chinese_chars surrounds it with spaces"),
    ("kMn", 0x08, "strip_accents drops it after NFD (set only where NFD keeps the character)"),
    ("kPunc", 0x10, "BertPreTokenizer isolates it"),
    ("kWhitespace", 0x20, "BertPreTokenizer splits on it and drops it (char::is_whitespace)"),
]

# bert.rs' is_chinese_char, verbatim ranges (U+2B820..U+2B91F is not among them).
CHINESE_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
                  (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
ASCII_PUNCT = {ord(c) for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"}
WHITE_SPACE = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028,
               0x2029, 0x202F, 0x205F, 0x3000}
# Known differences from unicodedata2 16.0 (all must hold exactly; see the module docstring).
CATEGORY_CHANGED_MN = {0x1734, 0x1171E}     # Mn in 8.0, Mc since 14.0
CATEGORY_CHANGED_PUNC = {0x166D, 0x111C9}   # Po in 8.0, So / Mn later
# Version pins: (code point, expected membership) for characters of 8.0 and 9.0.
PINS = {
    "kMn": [(0x1171E, True), (0x1E944, False), (0x08D4, False)],
    "kPunc": [(0x2E42, True), (0x2E43, False), (0x1144B, False)],
    "kRemove": [(0x1D173, True), (0x08E2, False), (0x110CD, False), (0xE000, True), (0x0378, False)],
}


def all_code_points() -> list[int]:
    return [c for c in range(MAX_CP) if not 0xD800 <= c <= 0xDFFF]


class Probe:
    """Every code point alone, SEP-separated in chunks (built once, run through each normalizer);
    SEP itself goes on its own."""

    def __init__(self, cps: list[int]):
        self.cps = cps
        body = [c for c in cps if chr(c) != SEP]
        self.chunks = [body[i:i + CHUNK] for i in range(0, len(body), CHUNK)]
        self.texts = [SEP.join(map(chr, chunk)) for chunk in self.chunks]

    def __call__(self, normalizer) -> dict[int, str]:
        """normalize_str of every code point alone."""
        out: dict[int, str] = {}
        for chunk, text in zip(self.chunks, self.texts):
            got = normalizer.normalize_str(text).split(SEP)
            if len(got) != len(chunk):
                raise SystemExit(f"probe separator {SEP!r} was disturbed near U+{chunk[0]:04X}")
            out.update(zip(chunk, got))
        if ord(SEP) in self.cps:
            out[ord(SEP)] = normalizer.normalize_str(SEP)
        return out


def bert(clean=False, chinese=False, strip=False, lower=False):
    from tokenizers import normalizers

    return normalizers.BertNormalizer(clean_text=clean, handle_chinese_chars=chinese, strip_accents=strip,
                                      lowercase=lower)


def hexes(cs) -> str:
    cs = sorted(cs)
    return " ".join(f"U+{c:04X}" for c in cs[:12]) + (f" ... ({len(cs)})" if len(cs) > 12 else "")


def build() -> str:
    import tokenizers
    import unicodedata2 as ud
    from tokenizers import normalizers
    from tokenizers import pre_tokenizers as pt

    if ud.unidata_version != EXPECTED_UNICODE:
        raise SystemExit(f"unicodedata2 has Unicode {ud.unidata_version}, need {EXPECTED_UNICODE}")
    if not tokenizers.__version__.startswith(TOKENIZERS_SERIES + "."):
        print(f"warning: probing tokenizers {tokenizers.__version__}, tables were made with"
              f" {TOKENIZERS_SERIES}.x", file=sys.stderr)
    cps = all_code_points()
    cat = {c: ud.category(chr(c)) for c in cps}
    per_code_point = Probe(cps)
    problems: list[str] = []
    sets: dict[str, set[int]] = {}

    # clean_text
    clean = per_code_point(bert(clean=True))
    odd = [c for c in cps if clean[c] not in ("", " ", chr(c))]
    if odd:
        problems.append(f"clean_text maps {hexes(odd)} to something other than '', ' ' or itself")
    sets["kRemove"] = {c for c in cps if clean[c] == ""}
    sets["kSpace"] = {c for c in cps if clean[c] == " "}
    control = {c for c in cps if cat[c] in ("Cc", "Cf", "Co")} - {0x09, 0x0A, 0x0D}
    cf_kept = control - sets["kRemove"]
    if sets["kRemove"] - control != {0xFFFD} or 0x0000 not in sets["kRemove"]:
        problems.append(f"clean_text removes non-control {hexes(sets['kRemove'] - control - {0xFFFD})}")
    if any(cat[c] != "Cf" for c in cf_kept):
        problems.append(f"clean_text keeps Cc/Co {hexes(c for c in cf_kept if cat[c] != 'Cf')}")
    if sets["kSpace"] != WHITE_SPACE - {0x0B, 0x0C, 0x85}:
        problems.append(f"clean_text spaces {hexes(sets['kSpace'] ^ (WHITE_SPACE - {0x0B, 0x0C, 0x85}))} differ")

    # handle_chinese_chars
    chinese = per_code_point(bert(chinese=True))
    sets["kChinese"] = {c for c in cps if chinese[c] == f" {chr(c)} "}
    if any(chinese[c] != chr(c) for c in cps if c not in sets["kChinese"]):
        problems.append("handle_chinese_chars does something other than surround with spaces")
    want = {c for a, b in CHINESE_RANGES for c in range(a, b + 1)}
    if sets["kChinese"] != want:
        problems.append(f"chinese chars differ from bert.rs' ranges: {hexes(sets['kChinese'] ^ want)}")

    # strip_accents = NFD, then drop Mn
    nfd = per_code_point(normalizers.NFD())
    strip = per_code_point(bert(strip=True))
    stable = [c for c in cps if nfd[c] == chr(c)]
    if any(strip[c] not in ("", chr(c)) for c in stable):
        problems.append("strip_accents changes an NFD-stable character other than by dropping it")
    sets["kMn"] = {c for c in stable if strip[c] == ""}
    unstable = [c for c in cps if nfd[c] != chr(c)]
    stable_set = set(stable)
    bad = [c for c in unstable if strip[c] != "".join(x for x in nfd[c] if ord(x) not in sets["kMn"])
           or any(ord(x) not in stable_set for x in nfd[c])]
    if bad:
        problems.append(f"strip_accents of {hexes(bad)} is not NFD minus the probed marks")
    mn16 = {c for c in stable if cat[c] == "Mn"}
    if sets["kMn"] - mn16 != CATEGORY_CHANGED_MN:
        problems.append(f"marks that are not Mn in 16.0: {hexes(sets['kMn'] - mn16)}")

    # lowercase: the Lowercase normalizer's tables (normalize_tables.h) serve BertNormalizer too
    lower_bert = per_code_point(bert(lower=True))
    lower = per_code_point(normalizers.Lowercase())
    if lower_bert != lower:
        problems.append(f"lowercase differs from Lowercase on {hexes(c for c in cps if lower_bert[c] != lower[c])}")

    # BertPreTokenizer
    dropped, joined = probe_pretokenizer(pt.BertPreTokenizer(), cps)
    sets["kWhitespace"] = dropped
    sets["kPunc"] = set(cps) - dropped - joined
    if dropped != WHITE_SPACE:
        problems.append(f"BertPreTokenizer whitespace is not White_Space: {hexes(dropped ^ WHITE_SPACE)}")
    p16 = {c for c in cps if cat[c].startswith("P")} | ASCII_PUNCT
    if sets["kPunc"] - p16 != CATEGORY_CHANGED_PUNC:
        problems.append(f"punctuation outside P* in 16.0: {hexes(sets['kPunc'] - p16)}")

    for name, pins in PINS.items():
        for c, member in pins:
            if (c in sets[name]) != member:
                problems.append(f"version pin: U+{c:04X} {'should' if member else 'should not'} be {name}")
    if problems:
        raise SystemExit("gen_bert_tables: probes disagree with expectations:\n  " + "\n  ".join(problems))

    values = [0] * MAX_CP
    bits = {n: b for n, b, _ in FLAGS}
    for name, members in sets.items():
        for c in members:
            values[c] |= bits[name]
    evidence = {
        "cf_kept": f"{len(cf_kept)} format chars ({' '.join(f'U+{c:04X}' for c in sorted(cf_kept)[:5])} ...)",
        "mn_missing": len(mn16 - sets["kMn"]),
        "punc_missing": len(p16 - sets["kPunc"]),
        "counts": {n: len(s) for n, s in sets.items()},
    }
    return render(values, evidence)


def render(values: list[int], ev: dict) -> str:
    shift, stage1, blocks = best_two_stage(values, 1)
    stage2 = [v for blk in blocks for v in blk]
    counts = ", ".join(f"{n} {c}" for n, c in ev["counts"].items())
    out = [
        "// GENERATED FILE - DO NOT EDIT. Regenerate with: python tools/gen_bert_tables.py",
        "//",
        "// Character classes of BertNormalizer and BertPreTokenizer, probed from tokenizers 0.23.3 over",
        "// every code point (see the generator). Their Unicode data is older than the rest of tokenizers:",
        "//   is_control / is_mark_nonspacing / is_punctuation: the unicode_categories crate, Unicode 8.0",
        "//     (U+1171E is Mn, U+1E944 is not; U+2E42 is punctuation, U+2E43 is not). Against",
        f"//     unicodedata2 16.0 it lacks {ev['cf_kept']},",
        f"//     {ev['mn_missing']} Mn and {ev['punc_missing']} punctuation chars (added or recategorised since"
        " 8.0), and has",
        "//     U+1734 U+1171E as Mn and U+166D U+111C9 as punctuation. Unassigned code points are kept",
        "//     (clean_text removes Cc, Cf and Co only; U+000B U+000C U+0085 are removed, not spaced).",
        "//   is_whitespace: Rust's char::is_whitespace (White_Space); is_chinese_char: bert.rs' ranges.",
        "// kMn is only meaningful where NFD leaves the character alone (strip_accents tests it after NFD).",
        f"// Counts: {counts}.",
        "//",
        f"//   props(cp) = kStage2[(kStage1[cp >> {shift}] << {shift}) + (cp & {(1 << shift) - 1})]"
        f"   ({len(blocks)} blocks, {2 * len(stage1) + len(stage2)} bytes)",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace crayon::bert_tables {",
        "",
    ]
    for name, bit, doc in FLAGS:
        out.append(f"inline constexpr uint8_t {name} = 0x{bit:02X};  // {doc}")
    out += [
        "",
        f"inline constexpr int kShift = {shift};",
        f"inline constexpr uint16_t kStage1[{len(stage1)}] = {{",
        rows(stage1, str, 24),
        "};",
        "",
        f"inline constexpr uint8_t kStage2[{len(stage2)}] = {{",
        rows(stage2, str, 32),
        "};",
        "",
        "inline uint8_t props(uint32_t cp) {",
        "  if (cp >= 0x110000) return 0;",
        "  return kStage2[(static_cast<uint32_t>(kStage1[cp >> kShift]) << kShift) + (cp & ((1u << kShift) - 1))];",
        "}",
        "",
        "}  // namespace crayon::bert_tables",
        "",
    ]
    return "\n".join(out)


def main() -> int:
    return generator_main(build, HEADER, __doc__, "gen_bert_tables.py", inputs=PROBED)


if __name__ == "__main__":
    sys.exit(main())
