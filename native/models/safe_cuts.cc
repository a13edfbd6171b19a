// SafeCuts (see safe_cuts.h): the adjacent pairs of every token, recorded once per vocabulary.
#include "models/safe_cuts.h"

#include <algorithm>

#include "models/piece_encoder.h"

namespace crayon {
namespace {

using utf8::is_continuation;

// A token's bytes as units: well-formed characters, and partial ones (a run of continuation
// bytes, or a lead byte with fewer continuation bytes than it announces, or a byte no
// character starts with). A boundary between two characters of a piece is always a unit
// boundary of a token that crosses it (a lead byte always starts a unit here).
struct Unit {
  uint32_t start, len;
  uint32_t cp;  // utf8::kInvalid for a partial unit
};

void units_of(const uint8_t* t, uint32_t n, std::vector<Unit>& out) {
  out.clear();
  for (uint32_t i = 0; i < n;) {
    if (is_continuation(t[i])) {
      uint32_t j = i;
      while (j < n && is_continuation(t[j])) ++j;
      out.push_back({i, j - i, utf8::kInvalid});
      i = j;
      continue;
    }
    const utf8::Decoded d = utf8::decode(t + i, t + n);
    if (d.cp != utf8::kInvalid) {
      out.push_back({i, d.len, d.cp});
      i += d.len;
      continue;
    }
    uint32_t j = i + 1;
    while (j < n && j < i + 4 && is_continuation(t[j])) ++j;
    out.push_back({i, j - i, utf8::kInvalid});
    i = j;
  }
}

}  // namespace

template <unsigned kValueBits>
void SafeCuts::KeySet<kValueBits>::insert(uint64_t key, uint64_t value) {
  if ((count + 1) * 2 > slots.size()) {
    std::vector<uint64_t> old(slots.size() * 2, kEmpty);
    old.swap(slots);
    --shift;
    for (const uint64_t k : old) {
      if (k == kEmpty) continue;
      size_t i = home(k >> kValueBits);
      while (slots[i] != kEmpty) i = (i + 1) & (slots.size() - 1);
      slots[i] = k;
    }
  }
  size_t i = home(key);
  for (; slots[i] != kEmpty; i = (i + 1) & (slots.size() - 1)) {
    if (slots[i] >> kValueBits == key) {
      if ((slots[i] & ((uint64_t{1} << kValueBits) - 1)) == 0) slots[i] |= value;
      return;
    }
  }
  slots[i] = key << kValueBits | value;
  ++count;
}

uint64_t SafeCuts::partial_key(const uint8_t* l, uint32_t ln, const uint8_t* r, uint32_t rn) {
  uint64_t key = 0;
  for (uint32_t i = 0; i < ln; ++i) key = (key << 8) | l[i];
  for (uint32_t i = 0; i < rn; ++i) key = (key << 8) | r[i];
  return key | (uint64_t{ln | rn << 4} << 56);
}

std::unique_ptr<const SafeCuts> SafeCuts::build(const BpeTables& t, const uint8_t* kinds, uint8_t mergeable,
                                                const uint32_t* split_left) {
  auto cuts = std::make_unique<SafeCuts>();
  // The trie's keys must be the token table's mergeable strings: every one with a byte >= 0x80
  // (the only ones whose pairs a cut can meet: pairs of ASCII characters are never cut) is looked
  // up at its id, and there must be as many keys as mergeable tokens. A vocabulary that fails
  // this (only a damaged cartridge can) is not cut at all. (Walking every ASCII token as well
  // would double the cost of this, paid at the first CJK piece.)
  size_t keys = 0;
  for (uint32_t s = 0; s < t.trie.size(); ++s) keys += t.trie.value_at(static_cast<int32_t>(s)) >= 0;
  size_t tokens = 0;
  std::vector<Unit> units;
  std::vector<uint32_t> cjk_words;  // tokens of two or more characters of U+3000..U+9FFF
  for (uint32_t id = 0; id < t.n_ids; ++id) {
    const uint32_t a = t.token_offsets[id], b = t.token_offsets[id + 1];
    if (b <= a || (kinds != nullptr && kinds[id] != mergeable)) continue;
    if (b > t.token_bytes_size) return nullptr;
    const uint8_t* bytes = t.token_bytes + a;
    const uint32_t n = b - a;
    ++tokens;
    if (piece::is_ascii(bytes, n)) continue;
    if (t.trie.find(bytes, n) != static_cast<int32_t>(id)) return nullptr;
    units_of(bytes, n, units);
    // Merges reach the token (so a part of exactly its bytes is that token): one character's
    // token goes in cjk_tokens_, two characters' with their pair.
    const bool reached = split_left != nullptr && split_left[id] != piece::kNoSplit;
    if (reached && units.size() == 1 && units[0].cp >= kCjkFirst && units[0].cp < kCjkEnd) {
      cuts->cjk_tokens_[units[0].cp - kCjkFirst] = id;
    }
    const bool two_characters = reached && units.size() == 2 && units[0].cp != utf8::kInvalid &&
                                units[1].cp != utf8::kInvalid && id + 1 < (uint32_t{1} << kTwoCharacterBits);
    if (units.size() >= 2 && std::all_of(units.begin(), units.end(), [](const Unit& u) {
          return u.cp >= kCjkFirst && u.cp < kCjkEnd;
        })) {
      cjk_words.push_back(id);
    }
    for (size_t k = 1; k < units.size(); ++k) {
      const Unit& u = units[k - 1];
      const Unit& v = units[k];
      if (u.cp != utf8::kInvalid && v.cp != utf8::kInvalid) {
        if (u.cp >= 0x80 || v.cp >= 0x80) {
          const uint64_t key = full_key(u.cp, v.cp);
          cuts->full_.insert(key, two_characters ? id + 1 : 0);
          cuts->pair_bits_[pair_bit(key) >> 6] |= uint64_t{1} << (pair_bit(key) & 63);
        }
      } else if (u.len <= 4 && v.len <= 4 && u.len + v.len <= 7) {
        // (longer partial pairs cannot sit between two well-formed characters)
        cuts->partial_.insert(partial_key(bytes + u.start, u.len, bytes + v.start, v.len));
        cuts->partial_lengths_[uint32_t{bytes[v.start - 1]} << 8 | bytes[v.start]] |=
            static_cast<uint16_t>(1u << ((u.len - 1) * 4 + (v.len - 1)));
      }
    }
  }
  if (tokens != keys) return nullptr;
  if (split_left != nullptr) cuts->mark_char_level(t, cjk_words);
  return cuts;
}

void SafeCuts::mark_char_level(const BpeTables& t, const std::vector<uint32_t>& cjk_words) {
  // When each character is whole: the highest rank among the merges of its own BPE (ranks are ids
  // here, a token's rank the rank of the merge that makes it). A character of three bytes takes
  // two merges: the lower-ranked of its two byte pairs that is a token, then the character.
  std::vector<uint32_t> whole_at(kCjkEnd - kCjkFirst, 0);
  for (uint32_t cp = kCjkFirst; cp < kCjkEnd; ++cp) {
    const uint32_t id = cjk_tokens_[cp - kCjkFirst];
    if (id == kNoToken) continue;
    char bytes[4];
    utf8::encode(cp, bytes);
    const auto* c = reinterpret_cast<const uint8_t*>(bytes);
    const int32_t left = t.trie.find(c, 2), right = t.trie.find(c + 1, 2);
    if (left < 0 && right < 0) continue;  // not a BPE of its bytes after all (damaged tables)
    const uint32_t first = left < 0 ? static_cast<uint32_t>(right)
                           : right < 0 ? static_cast<uint32_t>(left)
                                       : static_cast<uint32_t>(std::min(left, right));
    whole_at[cp - kCjkFirst] = std::max(first, id);
    char_level_[(cp - kCjkFirst) >> 6] |= uint64_t{1} << ((cp - kCjkFirst) & 63);
  }
  // A token of such characters ranked at or before the merge that completes one of them takes all
  // of its characters out.
  std::vector<Unit> units;
  for (const uint32_t id : cjk_words) {
    const uint32_t a = t.token_offsets[id], b = t.token_offsets[id + 1];
    units_of(t.token_bytes + a, b - a, units);
    uint32_t latest = 0;
    bool characters = true;
    for (const Unit& u : units) {
      characters = characters && u.cp >= kCjkFirst && u.cp < kCjkEnd && cjk_tokens_[u.cp - kCjkFirst] != kNoToken;
      if (characters) latest = std::max(latest, whole_at[u.cp - kCjkFirst]);
    }
    if (!characters || id > latest) continue;
    for (const Unit& u : units) char_level_[(u.cp - kCjkFirst) >> 6] &= ~(uint64_t{1} << ((u.cp - kCjkFirst) & 63));
  }
}

uint32_t SafeCuts::join_partial(const uint8_t* x, uint32_t xn, const uint8_t* y, uint32_t yn, uint32_t lengths) const {
  for (; lengths != 0; lengths &= lengths - 1) {
    const uint32_t bit = static_cast<uint32_t>(__builtin_ctz(lengths));
    const uint32_t i = bit / 4 + 1, j = bit % 4 + 1;  // bytes of x's end and of y's start
    if (i <= xn && j <= yn && (i < xn || j < yn) && partial_.find(partial_key(x + xn - i, i, y, j)) >= 0) return kJoined;
  }
  return kCut;
}

template struct SafeCuts::KeySet<0>;
template struct SafeCuts::KeySet<SafeCuts::kTwoCharacterBits>;

}  // namespace crayon
