// Normalizers of tokenizers 0.23.3 (NFD, NFKD, NFC, NFKC, Lowercase, Prepend, Strip, Replace),
// reproducing its normalized text AND its alignment bookkeeping bit for bit.
//
//   original ──from_original──▶ NormalizedText{text, align} ──normalize_*──▶ … ──▶ pre-tokenizer
//                                 │                    │
//                                 │                    └─ align[i] = byte range of the ORIGINAL
//                                 │                       text that normalized byte i came from
//                                 └─ normalized UTF-8
//
// tokenizers' NormalizedString rewrites its text through `transform`, which consumes the old
// characters left to right while the new ones are produced as (char, change) pairs:
//   change  0   replaces the next old char            -> takes that char's alignment
//   change -N   replaces the next old char, then drops N more (a composition) -> same
//   change +1   is inserted                            -> takes the alignment of the old byte
//                                                         just before the read position, or
//                                                         (0, 0) at position 0
// The alignment is therefore POSITIONAL: after canonical reordering a mark takes the alignment of
// whichever old char sits at the read position, not of the char it came from (NFC of
// "a\u0316\u0301" aligns the U+0316 to the U+0301). normalize.cc reproduces the pair sequences of
// the unicode-normalization-alignments crate exactly; docs/normalizers.md lists the rules.
//
// Invariant kept by every function here (and by tokenizers): all bytes of one character share one
// alignment. The in-place fast paths rely on it.
//
// Poisoned text (a tokenizers bug reproduced on purpose): an insertion at position 0 (Prepend(""),
// a Replace whose match is empty at 0) gives the first chars the zero-width alignment (0, 0).
// From then on every transform-based normalizer (the four forms, Lowercase, Strip) runs on the
// normalized range that starts at the first byte with a non-empty alignment, while its pairs
// still come from the whole text: the prefix is kept AND re-emitted, and the read position can
// run off the end, where tokenizers panics ("index out of bounds"). Such text takes the faithful
// path here, and NormalizerPanic is thrown exactly where tokenizers panics.
//
// Bounds: every function is linear in the text (canonical reordering sorts runs of combining
// marks in O(k log k)); memory is the output plus the longest run of non-starters. Text that a
// normalizer leaves unchanged is scanned once and neither copied nor allocated (NFC of NFC text,
// NFD of ASCII, Lowercase of lowercase text, Replace without a match, Strip without whitespace).
// Input is expected to be valid UTF-8 (tokenizers only sees Rust strings); an invalid byte is
// carried through unchanged as a one-byte starter, never read past, never a crash.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crayon {

using Alignment = std::pair<uint32_t, uint32_t>;  // [start, end) byte range in the original

// Thrown where tokenizers panics (only on poisoned text, see above); the text is then unspecified.
struct NormalizerPanic : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct NormalizedText {
  std::string text;              // normalized UTF-8
  std::vector<Alignment> align;  // one per byte of text

  // Identity alignments, as tokenizers' From<String>: every byte maps to its whole char's range.
  static NormalizedText from_original(std::string_view original);
};

// Unicode normalization forms (crate data: Unicode 9.0; see normalize_tables.h).
void normalize_nfd(NormalizedText&);
void normalize_nfkd(NormalizedText&);
void normalize_nfc(NormalizedText&);
void normalize_nfkc(NormalizedText&);

// Rust char::to_lowercase per char (Unicode 16.0; context-free, so a final Σ becomes σ).
void normalize_lowercase(NormalizedText&);

// Prepend: no-op on empty text. The prefix and the first char all take the first char's
// alignment; an EMPTY prefix gives the first char the alignment (0, 0) (tokenizers' quirk).
void normalize_prepend(NormalizedText&, std::string_view prefix);

// Strip: removes leading / trailing chars with Rust char::is_whitespace (White_Space).
// Also transform-based (poisoned text, see above).
void normalize_strip(NormalizedText&, bool left, bool right);

// Replace {"String": pattern}: leftmost non-overlapping occurrences. tokenizers compiles the
// escaped pattern with Oniguruma, so an empty pattern matches at every char boundary including
// the end ("ab" -> "xaxbx"). Nothing happens on empty text.
void normalize_replace_literal(NormalizedText&, std::string_view pattern, std::string_view content);

// Replace {"Regex": ...}: the caller finds the matches with the regex engine and passes them as
// non-overlapping [start, end) byte ranges of `text`, ascending, on char boundaries (empty ranges
// allowed). Every inserted byte takes the alignment of the match's last byte (of the byte before an
// empty match; (0, 0) for an empty match at 0). Nothing happens on empty text, as in tokenizers.
// Ranges that break the contract (out of order, out of bounds) are ignored, never a crash.
void normalize_replace_ranges(NormalizedText&, const std::vector<std::pair<uint32_t, uint32_t>>& matches,
                              std::string_view content);

// NormalizedString::transform(pairs, initial_chars) itself, for normalizers written elsewhere
// (bert.cc, precompiled.cc): `pairs` are (code point, change) as tokenizers builds them, read
// against the old text by position as described at the top of this file; `initial_chars` old chars
// are dropped before the first pair (filter's leading removals). Throws NormalizerPanic where
// tokenizers panics. A code point may be 0x80000000 | byte to carry an invalid byte through.
void transform_chars(NormalizedText&, const std::vector<std::pair<uint32_t, int32_t>>& pairs,
                     size_t initial_chars = 0);

// Cheap checks: true when the normalizer would leave `text` (and its alignments) unchanged. Used
// to skip work, e.g. to skip building alignments for a whole document. They may answer false for
// some unchanged texts (quick-check "maybe"), never true for a changed one. They judge the text
// alone: poisoned alignments (see above) make every transform-based normalizer rewrite it.
bool nfd_is_identity(std::string_view text);
bool nfkd_is_identity(std::string_view text);
bool nfc_is_identity(std::string_view text);
bool nfkc_is_identity(std::string_view text);
bool lowercase_is_identity(std::string_view text);

// The slow, obviously-faithful twins: one transform over the whole text, no quick checks, no
// in-place paths. Test oracles for the functions above (tests/native/normalize_driver.cc).
namespace reference {
void normalize_nfd(NormalizedText&);
void normalize_nfkd(NormalizedText&);
void normalize_nfc(NormalizedText&);
void normalize_nfkc(NormalizedText&);
void normalize_lowercase(NormalizedText&);
}  // namespace reference

}  // namespace crayon
