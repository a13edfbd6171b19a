// Where a piece can be cut without changing its BPE: between two characters that no token spans.
//
//   vocabulary --SafeCuts::build--> the character pairs tokens hold --for_each_part--> parts of a piece
//
// Why: a run of CJK characters is one pre-token under the cl100k_base and o200k_base patterns (and
// Llama 3's, Qwen2's, DeepSeek-V3's), often tens of characters long, and its BPE was most of the
// engine's time on Chinese (backtracking with a pair check per candidate). Few of its boundaries
// can be crossed by a token: on zh_hongloumeng 87% of the boundaries inside such pieces are safe
// under o200k_base and 99% under cl100k_base, so a piece falls apart into parts of one or two
// characters, each a whole-token lookup or a short BPE.
//
// Exactness: BPE starts from single bytes and only ever merges two adjacent parts into a token. If
// no token equals a substring of the piece that crosses byte position p, no part ever crosses p,
// no pair across p is ever merged, and each side's merges happen in the order they would alone
// (the lowest rank first, the leftmost on ties, among pairs of that side), so
// BPE(piece) = BPE(piece[0, p)) + BPE(piece[p, n)). A token crossing the boundary between
// characters X and Y holds, at that place, X (or a suffix of X's bytes, when the token starts
// inside X) followed by Y (or a prefix of Y's bytes). build() records every such adjacent pair of
// every token: pairs of whole characters by code point, pairs with a partial side by their bytes.
// join() answers kCut only where none of them could sit at the boundary, so a cut is made only
// where no token can cross. Only boundaries between two well-formed characters are ever cut, and
// never between two ASCII characters (their pairs are not recorded). A part must then be BPE'd as
// it is: tiktoken's shortcut (a whole piece that is a token is that token) does not hold for parts,
// since a token is its own BPE only when merges reach it (TiktokenEngine::encode_part).
//
// Which vocabularies: every one (until the ninth session only those with 1,500 or more CJK
// characters as tokens of their own: with few, most parts were a character of byte tokens and
// cutting was slower than backtracking over the run; since parts are named and BPE'd from their
// characters, cl100k_base's Chinese is 1.8x faster cut). Which pieces: longer than 8 bytes,
// holding a CJK character (TiktokenEngine::cuts_for). Parts of one character, or of two that are a
// token, come out with their token (for_each_part), the rest is the caller's to encode.
//
// Memory: per vocabulary, a table of 8-byte slots at most half full (o200k_base: 21k character
// pairs with a non-ASCII side, 512 KiB; DeepSeek-V3 33k, 1 MiB), a 32 KiB filter in front of it,
// a small table for partial pairs (619 for o200k_base), 128 KiB of their lengths, the 112 KiB
// table of one-character tokens and a 3.5 KiB bitmap for whole_characters(). Built on the first
// piece that could be cut, from the vocabulary (a trie lookup per non-ASCII token: 9-15 ms for
// o200k_base on this project's machines, once per engine), never from input text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/utf8.h"
#include "models/bpe.h"

namespace crayon {

class SafeCuts {
 public:
  // The cuts of the mergeable tokens of `t` (the trie's keys), or null when the trie and the
  // token bytes disagree (a damaged vocabulary: then no piece is cut).
  // `kinds` (n_ids entries, or null when every id with bytes is mergeable): ids whose kind is not
  // `mergeable` (special tokens, absent ids) are not tokens BPE makes.
  // `split_left` (n_ids entries, or null): the backtracking tables' left halves, which say which
  // tokens merges reach (piece::kNoSplit: none do); the named parts and whole_characters() come
  // from it (without it, no part is named and whole_characters() takes none).
  static std::unique_ptr<const SafeCuts> build(const BpeTables& t, const uint8_t* kinds = nullptr, uint8_t mergeable = 1,
                                               const uint32_t* split_left = nullptr);

  // At the boundary between the well-formed characters x (xn bytes, code point cx) and y (yn
  // bytes, code point cy): kCut when no token can cross it; else the token whose bytes are x y
  // alone when there is one and merges reach it, else kJoined.
  static constexpr uint32_t kCut = 0xFFFFFFFFu, kJoined = 0xFFFFFFFEu;
  uint32_t join(const uint8_t* x, uint32_t xn, uint32_t cx, const uint8_t* y, uint32_t yn, uint32_t cy) const {
    if ((cx | cy) < 0x80) return kJoined;
    const uint64_t key = full_key(cx, cy);
    if (maybe_pair(key)) {
      const int64_t token = full_.find(key);
      if (token > 0) return static_cast<uint32_t>(token - 1);
      if (token == 0) return kJoined;
    }
    const uint32_t lengths = partial_lengths_[uint32_t{x[xn - 1]} << 8 | y[0]];
    return lengths == 0 ? kCut : join_partial(x, xn, y, yn, lengths);
  }

  // Calls part(begin, end, token) for the parts of piece[0, n) between its safe cuts, in order
  // (none for an empty piece). `token` is the part's BPE when this already knows it to be one
  // token: a part of one character of U+3000..U+9FFF (lead bytes E3-E9) that merges make a token
  // of, or of two characters whose bytes are a token merges reach (most parts of a cut Chinese
  // piece are one of the two); else kNoToken, and the part is the caller's to encode. Those
  // tokens come from the decoding and the pair lookups the cuts make anyway, where the part's
  // trie walk (three or six bytes, the deeper levels cold on new text), its split entry and a
  // cache probe were four to eight loads.
  static constexpr uint32_t kNoToken = 0xFFFFFFFFu;
  template <class Part>
  void for_each_part(const uint8_t* piece, size_t n, Part&& part) const {
    if (n == 0) return;
    const uint8_t* const end = piece + n;
    size_t begin = 0, prev = 0;
    utf8::Decoded x = utf8::decode_common(piece, end);
    uint32_t known = one_character_token(x);
    bool one_character = true;  // the current part is x alone
    for (size_t at = x.len; at < n;) {
      const utf8::Decoded y = utf8::decode_common(piece + at, end);
      const uint32_t j = x.cp != utf8::kInvalid && y.cp != utf8::kInvalid
                             ? join(piece + prev, x.len, x.cp, piece + at, y.len, y.cp)
                             : kJoined;
      if (j == kCut) {
        part(begin, at, known);
        begin = at;
        known = one_character_token(y);
        one_character = true;
      } else {
        known = one_character && j != kJoined ? j : kNoToken;
        one_character = false;
      }
      prev = at;
      at += y.len;
      x = y;
    }
    part(begin, n, known);
  }

  // Whether part[0, n) may be BPE'd from its characters (piece::encode_small_from with a part per
  // character) instead of from its bytes: n is 3 * (2..8), every character is one of U+3000..U+9FFF
  // that merges make a token of and that sits in no token ranked before that character is whole
  // (char_level_ below), and no partial pair can sit at a boundary between them. Then, in BPE of
  // the bytes, no merge crosses a boundary but between whole characters (a token crossing one
  // holds whole characters: else it would be a partial pair at the first or last boundary it
  // crosses), each character's own merges run as they would alone, and a merge across is ranked
  // after every merge that completes a character it holds (so no pair between characters is held
  // back by an unfinished neighbour): the merges between characters come in the order of BPE
  // from the characters.
  bool whole_characters(const uint8_t* part, size_t n) const {
    if (n < 6 || n > 24 || n % 3 != 0) return false;
    for (size_t i = 0; i < n; i += 3) {
      const uint8_t* c = part + i;
      if (c[0] < 0xE3 || c[0] > 0xE9 || !utf8::is_continuation(c[1]) || !utf8::is_continuation(c[2])) return false;
      const uint32_t cp = utf8::three_byte_cp(c);
      if (!(char_level_[(cp - kCjkFirst) >> 6] >> ((cp - kCjkFirst) & 63) & 1)) return false;
      if (i > 0 && partial_lengths_[uint32_t{c[-1]} << 8 | c[0]] != 0) return false;
    }
    return true;
  }

  // Pairs recorded (tests and docs).
  size_t full_pairs() const { return full_.count; }
  size_t partial_pairs() const { return partial_.count; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  // Open addressing over keys of 64 - kValueBits bits, each with a value of kValueBits bits in the
  // same slot (key << kValueBits | value), linear probing, at most half full. An all-ones slot is
  // empty, so no key may be all ones.
  template <unsigned kValueBits>
  struct KeySet {
    std::vector<uint64_t> slots = std::vector<uint64_t>(16, kEmpty);
    unsigned shift = 60;  // 64 - log2(slots.size())
    size_t count = 0;
    // Adds key, or gives a present key whose value is 0 the value `value` (< 2^kValueBits).
    void insert(uint64_t key, uint64_t value = 0);
    // The key's value, or -1 when it is absent.
    int64_t find(uint64_t key) const {
      for (size_t i = home(key);; i = (i + 1) & (slots.size() - 1)) {
        if (slots[i] >> kValueBits == key) return static_cast<int64_t>(slots[i] & ((uint64_t{1} << kValueBits) - 1));
        if (slots[i] == kEmpty) return -1;
      }
    }
    size_t home(uint64_t key) const {
      key ^= key >> 29;  // code points differ in their low bits: spread them before the multiply
      return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift);
    }
  };

  static uint64_t full_key(uint32_t cx, uint32_t cy) { return (uint64_t{cx} << 21) | cy; }
  // Fills char_level_ (build, with split_left), given the tokens of two or more characters of
  // U+3000..U+9FFF.
  void mark_char_level(const BpeTables& t, const std::vector<uint32_t>& cjk_words);
  // join() where a partial pair of one of `lengths` (partial_lengths_) could sit at the boundary.
  uint32_t join_partial(const uint8_t* x, uint32_t xn, const uint8_t* y, uint32_t yn, uint32_t lengths) const;
  // A pair with a partial side: its bytes (at most 7 in all) and both lengths.
  static uint64_t partial_key(const uint8_t* l, uint32_t ln, const uint8_t* r, uint32_t rn);

  // A one-hash Bloom filter of full_'s keys, 2^18 bits (32 KiB), asked before full_: most
  // boundaries inside a CJK piece are no pair (o200k_base Chinese: 13% are), and a probe of full_
  // (512 KiB for o200k_base, 1 MiB for DeepSeek-V3) is a cache miss where this stays in cache.
  // 21k keys (o200k_base) set 8% of its bits, 33k (DeepSeek-V3) 12%. It replaced two bitmaps of
  // the pairs' left and right characters (64% of o200k_base's Chinese boundaries passed them).
  static constexpr unsigned kPairBitsLog2 = 18;
  static size_t pair_bit(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - kPairBitsLog2)); }
  bool maybe_pair(uint64_t key) const {
    const size_t b = pair_bit(key);
    return pair_bits_[b >> 6] >> (b & 63) & 1;
  }

  // The token of a character of U+3000..U+9FFF that merges reach, from a 112 KiB table filled
  // from split_left at build (all kNoToken without it); kNoToken for any other character.
  static constexpr uint32_t kCjkFirst = 0x3000, kCjkEnd = 0xA000;  // lead bytes E3-E9
  uint32_t one_character_token(const utf8::Decoded& c) const {
    return c.cp >= kCjkFirst && c.cp < kCjkEnd ? cjk_tokens_[c.cp - kCjkFirst] : kNoToken;
  }

  // Whole characters by code point (42 bits), valued 1 + the token of x y when there is one that
  // merges reach (ids below 2^22 - 1; others are left out: those parts take the general way).
  static constexpr unsigned kTwoCharacterBits = 22;
  KeySet<kTwoCharacterBits> full_;
  KeySet<0> partial_;  // at least one side a partial character, by bytes
  uint64_t pair_bits_[(size_t{1} << kPairBitsLog2) / 64] = {};
  // By (last byte of the left side) * 256 + (first byte of the right side): the lengths of the
  // partial pairs with those bytes at their boundary, bit (left - 1) * 4 + (right - 1). A
  // boundary is looked up in partial_ only for those lengths (on o200k_base Chinese, 5% of the
  // boundaries have any, and trying every length cost 8 probes each). 128 KiB, little of it read.
  uint16_t partial_lengths_[256 * 256] = {};
  std::vector<uint32_t> cjk_tokens_ = std::vector<uint32_t>(kCjkEnd - kCjkFirst, kNoToken);
  // By code point - kCjkFirst: the characters whole_characters() takes (those with a token in
  // cjk_tokens_, less those held by a token of whole characters ranked before some character it
  // holds is whole: 26 tokens of o200k_base, 10 of DeepSeek-V3's, 32 of Qwen2's).
  std::vector<uint64_t> char_level_ = std::vector<uint64_t>((kCjkEnd - kCjkFirst) / 64, 0);
};

}  // namespace crayon
