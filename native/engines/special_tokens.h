// Special tokens: finding them in text.
//
// A small double-array trie over the special tokens' bytes (value = special index) and a bitmap of
// their first bytes. Scanning skips, with memchr when every special starts with the same byte
// (true of every shipped vocabulary: "<|"), to positions that can start one, then takes the longest
// special token there.
//
// tiktoken searches with a regex alternation whose order comes from a hash map, so when one special
// token is a prefix of another at the same position its choice is unspecified; we take the longest
// (no shipped vocabulary has such a pair).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/double_array.h"

namespace crayon {

struct SpecialMatch {
  size_t pos = 0;
  size_t len = 0;
  int32_t index = -1;  // special index, -1 when nothing was found
};

class SpecialTokenMatcher {
 public:
  SpecialTokenMatcher() = default;
  SpecialTokenMatcher(DoubleArrayView trie, uint32_t count);

  uint32_t count() const { return count_; }

  // The index of the special token spelled exactly `s`, or -1.
  int32_t exact(std::string_view s) const {
    if (count_ == 0) return -1;
    const int32_t v = trie_.find(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    return (v >= 0 && static_cast<uint32_t>(v) < count_) ? v : -1;
  }

  // The first special token occurrence at or after `from` whose index passes `accept(index)`.
  // Occurrences that fail `accept` are skipped by resuming the search one byte after their start,
  // as tiktoken does.
  template <class Accept>
  SpecialMatch find(std::string_view text, size_t from, Accept&& accept) const {
    SpecialMatch m;
    if (count_ == 0) return m;
    const uint8_t* s = reinterpret_cast<const uint8_t*>(text.data());
    const size_t n = text.size();
    size_t i = from;
    while (i < n) {
      i = next_candidate(s, n, i);
      if (i >= n) break;
      int32_t v = -1;
      const size_t len = trie_.longest_prefix(s + i, n - i, &v);
      if (len > 0 && v >= 0 && static_cast<uint32_t>(v) < count_ && accept(v)) {
        m.pos = i;
        m.len = len;
        m.index = v;
        return m;
      }
      ++i;
    }
    return m;
  }

 private:
  size_t next_candidate(const uint8_t* s, size_t n, size_t i) const;

  DoubleArrayView trie_;
  uint32_t count_ = 0;
  int single_first_byte_ = -1;  // the only first byte, when all specials share one
  uint64_t first_bytes_[4] = {0, 0, 0, 0};
};

}  // namespace crayon
