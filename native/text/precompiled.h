// tokenizers 0.23.3's `Precompiled` normalizer (the SentencePiece charsmap of T5, XLM-R, mBART, …),
// reproducing its normalized text AND its alignments bit for bit, quirks included.
//
//   precompiled_charsmap ──parse──▶ double array (u32 units) + replacement strings
//
//   text ──graphemes(true)──▶ cluster ──< 6 bytes?──yes──▶ first key that is a prefix ──hit──▶ replace
//                                │                                              │ miss
//                                └──── ≥ 6 bytes ──▶ each char: its first key ──┴──▶ replace / keep
//        replacements become (char, change) pairs ──▶ NormalizedString::transform (only if any hit)
//
// The blob (spm_precompiled 0.1.4): u32 LE trie size in bytes, then size/4 darts-clone units (u32
// LE), then the replacement strings, NUL-terminated, which must be valid UTF-8 as a whole. A trie
// size that is not a multiple of 4 leaves its last 1-3 bytes to the strings (as the crate does).
// Fewer than 4 bytes, a trie longer than the blob or invalid UTF-8 is rejected (tokenizers: "Cannot
// parse precompiled_charsmap"); the empty blob is rejected too. A key's value is the offset of its
// string; the string runs to the next NUL or the end.
//
// What tokenizers does, and so what this does:
// * Clusters come from unicode-segmentation 1.13.3 (extended clusters, Unicode 17.0.0), whose
//   properties native/tables/grapheme_tables.h holds (probed from tokenizers by
//   tools/gen_grapheme_tables.py); the crate's rule order, GB9c and GB11 included, is in
//   precompiled.cc.
// * A cluster shorter than 6 bytes is looked up whole and the FIRST (shortest) key that is a prefix
//   of it wins: the whole cluster becomes that key's string even when the key covers only part of
//   it ("a\u0301\u0302" with the key "a\u0301" -> "á", the U+0302 is dropped). A key may end inside
//   a character (a key "\xC3" matches every U+00C0..U+00FF). The walk stops at a NUL byte.
// * Otherwise each char is looked up alone. A cluster of 6 bytes or more is therefore exactly a
//   run of one-char clusters, and the segmentation only matters where it decides whether a cluster
//   of 2-5 bytes forms, directly or through context (GB9c gluing a consonant to an earlier conjunct
//   keeps "क़\u0301", 5 bytes, from being looked up whole). Two rules can never change the
//   result, and are still applied as the crate does: GB12/GB13 (Regional_Indicator pairs: an RI is
//   4 bytes and every joiner at least 2, so any cluster holding an RI and another char is per-char
//   anyway) and the Regional_Indicator category itself.
// * The pairs come from `replace(old, new)`: every new char is (c, 0); when new has MORE chars the
//   last (new - old) become (c, +1); when it has FEWER, (new - old) is added to the LAST pair pushed
//   so far, which belongs to an earlier cluster when new is empty ("™\x1e" -> "TM": M's +1 becomes
//   0), and is lost when nothing was pushed yet. So a text that STARTS with removed chars (nmt_nfkc
//   removes the C0 controls) is transformed with every later char aligned that many chars too
//   early, and the last chars of the original are never read; tokenizers does this, and so do we.
// * transform runs only when some lookup hit; then the alignment rules of normalize.h apply (the
//   reference path calls transform_chars itself; text whose first alignment is empty is "poisoned"
//   and always takes that path).
// * Where tokenizers panics on a hostile blob (a unit index or a string offset out of range, an
//   offset inside a UTF-8 sequence, any lookup in an empty trie) NormalizerPanic is thrown; the
//   text is then unspecified. Nothing is ever read out of bounds.
//
// Performance (normalize is on every text of T5/XLM-R): the common case is a run of chars that
// no key touches. Such runs are scanned once and, when the whole text is unchanged, neither copied
// nor allocated. An ASCII byte followed by an ASCII byte is a cluster of its own (GB4/GB5/GB999;
// CR LF excepted), so ASCII runs take a 128-entry action table with no segmentation. Other chars
// take their properties from a flat table (BMP) or a binary search (astral); two bitmaps filled
// at construction (65536 walks, well under a millisecond) say whether a BMP char alone is kept and
// whether any cluster starting with it can hit, so most clusters need no trie walk at all (the
// array is 177 KB for nmt_nfkc: its walks miss the cache). When something changes, unchanged runs
// are copied with their alignments in bulk as long as the read position of tokenizers' transform
// is in step with the text (it always is, except after the lost removals above); each change
// emits its pairs through the same positional rules. The slow twin, normalize_reference(), builds
// tokenizers' pair list for the whole text and calls transform_chars: the test oracle.
//
// A cartridge stores the bitmaps beside the blob (section_image(), META format 3's HNnn sections), so
// a load reads both in place: no 65536 walks, no copy, only the strings' UTF-8 check and the 128
// ASCII lookups.
//
// Bounds: linear in the text (a cluster is walked once; the trie walk reads at most 5 bytes per
// cluster and 4 per char); memory is the output text and alignments. Built from a blob, the object
// holds a copy of it and 16 KB of bitmaps; over a section, nothing but pointers into it.
#pragma once

#include <array>
#include <memory>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/normalize.h"

namespace crayon {

class PrecompiledNormalizer {
 public:
  // `blob`: the decoded bytes of precompiled_charsmap. Throws std::invalid_argument, saying what is
  // wrong, on a blob tokenizers rejects (shorter than 4 bytes, a trie longer than the blob, strings
  // that are not UTF-8).
  explicit PrecompiledNormalizer(std::string blob);
  // The normalizer over a cartridge's Precompiled section (section_image() of the same blob),
  // read in place: no bitmap is recomputed, so building it costs the strings' UTF-8 check and 128
  // lookups. `owner` keeps the section's bytes alive. Throws std::invalid_argument as above, and
  // when the section is shorter than its bitmaps; wrong bitmaps give wrong text, never a bad read.
  PrecompiledNormalizer(std::string_view section, std::shared_ptr<const void> owner);
  // What a cartridge stores for this normalizer: the quiet and dead bitmaps (8 KiB each, u64 words,
  // bit c of word c / 64 for code point c), then the charsmap blob.
  std::string section_image() const;
  static constexpr size_t kBitmapBytes = 2 * 1024 * 8;

  // True only when normalize() would leave text and alignments unchanged: no key matches anywhere
  // (false as soon as one does, even a key whose string equals what it replaces, and wherever
  // normalize() would throw). One scan, no allocation.
  bool is_identity(std::string_view text) const;

  void normalize(NormalizedText& t) const;

  // The hot path for original text (identity alignments), as normalize_bert_same_length: when every
  // change replaces one character by one character of the same byte length (nmt_nfkc's "\n" ->
  // " "), writes the normalized bytes to `out` (resized to text.size()) and returns true; normalized
  // byte i then has the alignment of original byte i's character, exactly as normalize() of
  // from_original(text) gives (each such change is tokenizers' (c, 0): the character keeps its
  // alignment). Returns false otherwise (out unspecified), and where normalize() would throw.
  // `out` must not alias `text`.
  bool normalize_same_length(std::string_view text, std::string& out) const;

  // The text normalize() makes of original text, without its alignments (ids-only encodes): the
  // text between matches as it is, each match's replacement string. False (out unspecified) where
  // normalize() would throw. `out` must not alias `text`.
  bool normalize_text(std::string_view text, std::string& out) const;

  // The slow, obviously-faithful twin: tokenizers' pair list for the whole text, then
  // transform_chars. Test oracle for normalize() (tests/native/precompiled_driver.cc).
  void normalize_reference(NormalizedText& t) const;

 private:
  enum class Hit : uint8_t { kNone, kFound, kPanic };
  struct Lookup {
    Hit hit;
    uint32_t off;  // the key's string: normalized_[off, off + len)
    uint32_t len;
    bool left;     // kNone only: the walk left the trie before the key's last byte
  };
  enum class Scan : uint8_t { kDone, kStopped, kPanic };

  struct Owned {
    std::string blob;
    std::array<uint64_t, 1024> quiet{};
    std::array<uint64_t, 1024> dead{};
  };
  void parse(std::string_view blob);  // units, strings (UTF-8 checked) and the ASCII table
  Lookup lookup(const uint8_t* key, size_t len) const;
  template <class Sink>
  Scan scan(std::string_view text, Sink& sink) const;

  // Per BMP code point c (bit c): `quiet_`: lookup(c) is kNone, so c alone is kept; `dead_`: the
  // walk leaves the trie inside c's bytes without a result, so no cluster starting with c hits.
  bool quiet(uint32_t cp) const { return cp < 0x10000 && (quiet_[cp >> 6] >> (cp & 63)) & 1; }
  bool dead(uint32_t cp) const { return cp < 0x10000 && (dead_[cp >> 6] >> (cp & 63)) & 1; }

  std::shared_ptr<const void> keep_;  // what the views below point into
  std::string_view blob_;
  const uint32_t* units_ = nullptr;
  uint64_t n_units_ = 0;
  std::string_view normalized_;
  // What a one-byte ASCII cluster becomes: hit is kNone (kept), kFound (replaced) or kPanic.
  std::array<Lookup, 128> ascii_{};
  const uint64_t* quiet_ = nullptr;  // 1024 words each
  const uint64_t* dead_ = nullptr;
};

}  // namespace crayon
