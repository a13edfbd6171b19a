#include "engines/added_tokens.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "core/utf8.h"
#include "tables/word_char_table.h"

namespace crayon {

AddedTokenSet::AddedTokenSet(std::vector<AddedToken> tokens) {
  std::vector<std::pair<std::string_view, int32_t>> keys;
  // The first token with a given content wins. A hash set keeps this linear: with 100k added
  // tokens a pairwise scan took most of a minute.
  std::unordered_set<std::string> seen;
  seen.reserve(tokens.size());
  tokens_.reserve(tokens.size());
  for (AddedToken& t : tokens) {
    if (t.content.empty() || !seen.insert(t.content).second) continue;
    tokens_.push_back(std::move(t));
  }
  keys.reserve(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) {
    keys.emplace_back(tokens_[i].content, static_cast<int32_t>(i));
    const uint8_t b = static_cast<uint8_t>(tokens_[i].content[0]);
    first_bytes_[b >> 6] |= uint64_t{1} << (b & 63);
  }
  if (!keys.empty()) trie_ = build_double_array(keys);
  int distinct = 0;
  for (int b = 0; b < 256; ++b) {
    if ((first_bytes_[b >> 6] >> (b & 63)) & 1) {
      ++distinct;
      single_first_byte_ = b;
    }
  }
  if (distinct != 1) single_first_byte_ = -1;
}

namespace {

// Start of the whitespace run that ends at `end` (Rust's char::is_whitespace).
size_t skip_white_back(std::string_view s, size_t end) {
  size_t i = end;
  while (i > 0) {
    size_t j = i - 1;
    while (j > 0 && (static_cast<uint8_t>(s[j]) & 0xC0) == 0x80 && i - j < 4) --j;
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    const utf8::Decoded d = utf8::decode(p + j, p + i);
    if (d.len != i - j || !utf8::is_white_space(d.cp)) break;
    i = j;
  }
  return i;
}

// The character that ends at `end` (end > 0), or kInvalid for a byte that ends no well-formed one.
uint32_t char_before(std::string_view s, size_t end) {
  size_t j = end - 1;
  while (j > 0 && (static_cast<uint8_t>(s[j]) & 0xC0) == 0x80 && end - j < 4) --j;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const utf8::Decoded d = utf8::decode(p + j, p + end);
  return d.len == end - j ? d.cp : utf8::kInvalid;
}

// tokenizers' single_word test: neither neighbour of [start, stop) is a word character.
bool stands_alone(std::string_view s, size_t start, size_t stop) {
  using word_char_table::is_word_char;
  if (start > 0 && is_word_char(char_before(s, start))) return false;
  if (stop < s.size()) {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    if (is_word_char(utf8::decode(p + stop, p + s.size()).cp)) return false;
  }
  return true;
}

size_t skip_white_forward(std::string_view s, size_t from) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  size_t i = from;
  while (i < s.size()) {
    const utf8::Decoded d = utf8::decode(p + i, p + s.size());
    if (!utf8::is_white_space(d.cp)) break;
    i += d.len;
  }
  return i;
}

}  // namespace

void AddedTokenSet::split(std::string_view sentence, bool encode_special_tokens,
                          std::vector<AddedSplit>& out) const {
  const size_t n = sentence.size();
  if (n == 0) return;
  if (tokens_.empty()) {
    out.push_back(AddedSplit{-1, 0, static_cast<uint32_t>(n)});
    return;
  }
  const DoubleArrayView trie(trie_);
  const auto* s = reinterpret_cast<const uint8_t*>(sentence.data());
  size_t start_offset = 0;  // end of the previous token split
  size_t pos = 0;           // where the occurrence search resumes
  while (pos < n) {
    // Leftmost occurrence, longest at that position.
    size_t at = pos, len = 0;
    int32_t index = -1;
    for (; at < n; ++at) {
      if (single_first_byte_ >= 0) {
        // Every token starts with the same byte (true of most vocabularies: '<'): memchr to it.
        const void* hit = std::memchr(s + at, single_first_byte_, n - at);
        if (hit == nullptr) {
          at = n;
          break;
        }
        at = static_cast<size_t>(static_cast<const uint8_t*>(hit) - s);
      } else if (!((first_bytes_[s[at] >> 6] >> (s[at] & 63)) & 1)) {
        continue;
      }
      len = trie.longest_prefix(s + at, n - at, &index);
      if (len > 0) break;
    }
    if (len == 0) break;
    pos = at + len;
    const AddedToken& t = tokens_[static_cast<size_t>(index)];
    if (encode_special_tokens && t.special) continue;
    if (t.single_word && !stands_alone(sentence, at, at + len)) continue;
    size_t start = at, stop = at + len;
    if (t.lstrip) start = std::max(skip_white_back(sentence, start), start_offset);
    if (t.rstrip) stop = skip_white_forward(sentence, stop);
    if (start_offset < start) {
      out.push_back(AddedSplit{-1, static_cast<uint32_t>(start_offset), static_cast<uint32_t>(start)});
    }
    out.push_back(AddedSplit{index, static_cast<uint32_t>(start), static_cast<uint32_t>(stop)});
    start_offset = stop;
  }
  if (start_offset < n) {
    out.push_back(AddedSplit{-1, static_cast<uint32_t>(start_offset), static_cast<uint32_t>(n)});
  }
}

}  // namespace crayon
