// A per-thread cache of a model's tokens for short words, shared by the models that need one
// (BPE's merge loop, Unigram's Viterbi). Real text repeats its words, so most words a thread meets
// were already encoded by it once; a hit costs one hash and one cache line.
//
//   word (<= 24 bytes) --hash ^ model tag--> one of kEntries slots (direct mapped, per thread)
//        hit: the tokens (<= 6, tiling the word) come back; miss: encode, then keep the result
//        when it tiles the word (byte-fallback runs and dropped characters do not)
//
// Entries carry their model's tag, so models never see each other's entries and nothing needs
// clearing; a model's tag is new at construction. Memory: 64 bytes x kEntries per thread and
// table size.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "models/hf_model.h"

namespace crayon {

struct WordCacheEntry {
  uint64_t owner = 0;  // 0: empty
  uint8_t len = 0;
  uint8_t n = 0;
  uint8_t ends[6] = {};
  uint8_t bytes[24] = {};
  uint32_t ids[6] = {};
};
static_assert(sizeof(WordCacheEntry) == 64, "one cache line per entry");

inline uint64_t word_hash(const uint8_t* s, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t w = 0;
    std::memcpy(&w, s + i, std::min<size_t>(8, n - i));
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  return h;
}

template <size_t kEntries>
class WordCache {
  static_assert(kEntries > 0 && (kEntries & (kEntries - 1)) == 0, "a power of two");

 public:
  WordCache() : owner_(next_owner()) {}

  // The model's tag (never 0, never reused in the process): also keys its other per-thread memos.
  uint64_t owner() const { return owner_; }

  // Appends word[0, n)'s tokens: from the cache, or from encode(word, n, out) (then kept).
  template <class Encode>
  void encode(const uint8_t* word, size_t n, std::vector<HfToken>& out, Encode&& encode) const {
    if (n > sizeof(WordCacheEntry::bytes)) {
      encode(word, n, out);
      return;
    }
    thread_local std::vector<WordCacheEntry> tl_entries;
    std::vector<WordCacheEntry>& entries = tl_entries;  // one TLS lookup per call
    if (entries.empty()) entries.resize(kEntries);
    WordCacheEntry& e = entries[(word_hash(word, n) ^ owner_) & (kEntries - 1)];
    if (e.owner == owner_ && e.len == n && std::memcmp(e.bytes, word, n) == 0) {
      uint32_t start = 0;
      for (uint8_t i = 0; i < e.n; ++i) {
        out.push_back(HfToken{e.ids[i], start, e.ends[i]});
        start = e.ends[i];
      }
      return;
    }
    const size_t first = out.size();
    encode(word, n, out);
    const size_t count = out.size() - first;
    if (count == 0 || count > sizeof(e.ids) / sizeof(e.ids[0])) return;
    uint32_t expect = 0;
    for (size_t i = first; i < out.size(); ++i) {
      if (out[i].start != expect) return;
      expect = out[i].end;
    }
    if (expect != n) return;
    e.owner = owner_;
    e.len = static_cast<uint8_t>(n);
    e.n = static_cast<uint8_t>(count);
    std::memcpy(e.bytes, word, n);
    for (size_t i = 0; i < count; ++i) {
      e.ids[i] = out[first + i].id;
      e.ends[i] = static_cast<uint8_t>(out[first + i].end);
    }
  }

 private:
  static uint64_t next_owner() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed) * 0x9E3779B97F4A7C15ull;
  }

  uint64_t owner_;
};

}  // namespace crayon
