#include "engines/special_tokens.h"

#include <cstring>

namespace crayon {

SpecialTokenMatcher::SpecialTokenMatcher(DoubleArrayView trie, uint32_t count) : trie_(trie), count_(count) {
  int distinct = 0;
  for (int c = 0; c < 256; ++c) {
    if (trie_.size() > 0 && trie_.child(DoubleArrayView::kRoot, static_cast<uint8_t>(c)) >= 0) {
      first_bytes_[c >> 6] |= uint64_t{1} << (c & 63);
      single_first_byte_ = c;
      ++distinct;
    }
  }
  if (distinct != 1) single_first_byte_ = -1;
  if (distinct == 0) count_ = 0;
}

size_t SpecialTokenMatcher::next_candidate(const uint8_t* s, size_t n, size_t i) const {
  if (single_first_byte_ >= 0) {
    const void* p = std::memchr(s + i, single_first_byte_, n - i);
    return p == nullptr ? n : static_cast<size_t>(static_cast<const uint8_t*>(p) - s);
  }
  while (i < n && !((first_bytes_[s[i] >> 6] >> (s[i] & 63)) & 1)) ++i;
  return i;
}

}  // namespace crayon
