#include "engines/added_tokens.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_set>

#include "core/utf8.h"
#include "tables/word_char_table.h"

namespace crayon {

namespace {

constexpr size_t kHeaderSize = 64;
constexpr size_t kRecordSize = 16;

uint32_t read_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void put_u32(std::string& out, size_t at, uint32_t v) { std::memcpy(&out[at], &v, 4); }

}  // namespace

std::string AddedTokenSet::serialize(std::vector<AddedToken> tokens) {
  // The first token with a given content wins. A hash set keeps this linear: with 100k added
  // tokens a pairwise scan took most of a minute.
  std::vector<AddedToken> kept;
  std::unordered_set<std::string> seen;
  seen.reserve(tokens.size());
  kept.reserve(tokens.size());
  for (AddedToken& t : tokens) {
    if (t.content.empty() || !seen.insert(t.content).second) continue;
    kept.push_back(std::move(t));
  }
  std::vector<std::pair<std::string_view, int32_t>> keys;
  keys.reserve(kept.size());
  uint64_t first_bytes[4] = {0, 0, 0, 0};
  uint64_t blob_size = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    keys.emplace_back(kept[i].content, static_cast<int32_t>(i));
    const uint8_t b = static_cast<uint8_t>(kept[i].content[0]);
    first_bytes[b >> 6] |= uint64_t{1} << (b & 63);
    blob_size += kept[i].content.size();
  }
  if (kept.size() > 0x7FFFFFFFu || blob_size > 0xFFFFFFFFu) throw std::length_error("too many added tokens");
  DoubleArrayData trie;
  if (!keys.empty()) trie = build_double_array(keys);
  int single = -1, distinct = 0;
  for (int b = 0; b < 256; ++b) {
    if ((first_bytes[b >> 6] >> (b & 63)) & 1) {
      ++distinct;
      single = b;
    }
  }
  if (distinct != 1) single = -1;

  const size_t n = kept.size(), units = trie.units.size();
  std::string out(kHeaderSize + n * kRecordSize + units * 12, '\0');
  put_u32(out, 0, static_cast<uint32_t>(n));
  put_u32(out, 4, static_cast<uint32_t>(units));
  put_u32(out, 8, static_cast<uint32_t>(blob_size));
  put_u32(out, 12, static_cast<uint32_t>(single));
  std::memcpy(&out[16], first_bytes, sizeof first_bytes);
  uint32_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const AddedToken& t = kept[i];
    const size_t at = kHeaderSize + i * kRecordSize;
    put_u32(out, at, t.id);
    put_u32(out, at + 4, offset);
    put_u32(out, at + 8, static_cast<uint32_t>(t.content.size()));
    put_u32(out, at + 12, (t.special ? kAddedSpecial : 0) | (t.lstrip ? kAddedLstrip : 0) |
                              (t.rstrip ? kAddedRstrip : 0) | (t.single_word ? kAddedSingleWord : 0) |
                              (t.show_text ? kAddedShowText : 0));
    offset += static_cast<uint32_t>(t.content.size());
  }
  if (units > 0) {
    std::memcpy(&out[kHeaderSize + n * kRecordSize], trie.units.data(), units * 8);
    std::memcpy(&out[kHeaderSize + n * kRecordSize + units * 8], trie.value.data(), units * 4);
  }
  for (const AddedToken& t : kept) out += t.content;
  return out;
}

AddedTokenSet::AddedTokenSet(std::vector<AddedToken> tokens) {
  owned_ = std::make_shared<const std::string>(serialize(std::move(tokens)));
  std::string error;
  // Our own image: view() cannot refuse it, and check() would pass.
  if (!view(*owned_, this, &error)) throw std::logic_error("added tokens: " + error);
}

bool AddedTokenSet::view(std::string_view image, AddedTokenSet* out, std::string* error) {
  if (image.size() < kHeaderSize) {
    *error = "the added-token section is shorter than its header";
    return false;
  }
  const char* p = image.data();
  const uint64_t n = read_u32(p), units = read_u32(p + 4), blob = read_u32(p + 8);
  const int32_t single = static_cast<int32_t>(read_u32(p + 12));
  if (kHeaderSize + n * kRecordSize + units * 12 + blob != image.size()) {
    *error = "the added-token section's size does not match its counts";
    return false;
  }
  if ((n == 0) != (units == 0) || single < -1 || single > 255) {
    *error = "the added-token section's header is inconsistent";
    return false;
  }
  out->n_ = static_cast<uint32_t>(n);
  out->records_ = reinterpret_cast<const Record*>(p + kHeaderSize);
  const char* trie = p + kHeaderSize + n * kRecordSize;
  out->trie_ = DoubleArrayView(reinterpret_cast<const DoubleArrayUnit*>(trie),
                               reinterpret_cast<const int32_t*>(trie + units * 8), static_cast<uint32_t>(units));
  out->blob_ = trie + units * 12;
  out->blob_size_ = static_cast<uint32_t>(blob);
  std::memcpy(out->first_bytes_, p + 16, sizeof out->first_bytes_);
  out->single_first_byte_ = single;
  return true;
}

bool AddedTokenSet::check(std::string* error) const {
  for (uint32_t i = 0; i < n_; ++i) {
    const Record& r = records_[i];
    if (r.length == 0 || r.offset > blob_size_ || r.length > blob_size_ - r.offset) {
      *error = "an added token's content lies outside the section";
      return false;
    }
  }
  const int32_t* values = trie_.values();
  for (uint32_t i = 0; i < trie_.size(); ++i) {
    if (values[i] < -1 || values[i] >= static_cast<int64_t>(n_)) {
      *error = "the added-token trie names a token that does not exist";
      return false;
    }
  }
  return true;
}

AddedEntry AddedTokenSet::token(size_t i) const {
  const Record& r = records_[i];
  return AddedEntry{r.id, std::string_view(blob_ + r.offset, r.length), r.flags};
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
  if (n_ == 0) {
    out.push_back(AddedSplit{-1, 0, static_cast<uint32_t>(n)});
    return;
  }
  const DoubleArrayView& trie = trie_;
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
      // check() proves index < n_ for a cartridge's set; the compare keeps a caller that skipped
      // it in bounds too, for the price of one branch per match.
      if (len > 0 && static_cast<uint32_t>(index) < n_) break;
      len = 0;
    }
    if (len == 0) break;
    pos = at + len;
    const uint32_t flags = records_[static_cast<size_t>(index)].flags;
    if (encode_special_tokens && (flags & kAddedSpecial)) continue;
    if ((flags & kAddedSingleWord) && !stands_alone(sentence, at, at + len)) continue;
    size_t start = at, stop = at + len;
    if (flags & kAddedLstrip) start = std::max(skip_white_back(sentence, start), start_offset);
    if (flags & kAddedRstrip) stop = skip_white_forward(sentence, stop);
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
