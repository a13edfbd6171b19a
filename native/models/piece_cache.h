// A per-thread cache from pre-token bytes to their ids, in front of a BPE encoder.
//
//   piece (<= 24 bytes) --hash--> one slot of kSlots (direct mapped, per thread, per engine tag)
//        hit:  the ids come back (one cache line read, the key compared in full)
//        miss: the caller encodes the piece and offers the ids back (kept when <= 7 of them)
//
// Why: real text repeats its words. On new English text ~95% of pre-tokens were seen earlier by
// the same thread, and a hit (hash of at most three words, one line, three compares) is cheaper
// than the whole-piece trie walk (one dependent load per byte) and far cheaper than backtracking.
//
// Exactness: a hit requires the same engine tag (unique for the process lifetime, never reused),
// the same length and the same bytes (the key is stored zero-padded and compared as three words),
// so a hit returns exactly what the encoder returned for these bytes: the encoders are pure
// functions of (vocabulary, bytes). Nothing is ever approximated; a collision only evicts.
//
// Memory: kSlots * 64 bytes per thread (2 MiB), shared by every engine the thread uses; it is
// allocated on a thread's first encode and lives until the thread exits. No growth with input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#ifndef CRAYON_PIECE_CACHE_BITS
#define CRAYON_PIECE_CACHE_BITS 12
#endif

namespace crayon {

class PieceCache {
 public:
  static constexpr size_t kMaxLen = 24;  // longest piece kept
  static constexpr size_t kMaxIds = 7;   // most ids kept per piece
  static constexpr size_t kSlots = size_t{1} << CRAYON_PIECE_CACHE_BITS;

  struct Key {
    uint64_t w[3];
    uint64_t hash;
    uint32_t len;
  };

  // Key of s[0, n), 1 <= n <= kMaxLen: the bytes as up to three words, read with overlapping
  // loads inside [s, s + n) (never past the piece, and no store-to-load stall of a memcpy into a
  // zeroed buffer). For a given length every byte lands at a fixed place, so (len, w) is unique.
  static Key make_key(const uint8_t* s, size_t n) {
    Key k{{0, 0, 0}, 0, static_cast<uint32_t>(n)};
    if (n >= 8) {
      k.w[0] = load64(s);
      if (n > 16) {
        k.w[1] = load64(s + 8);
        k.w[2] = load64(s + n - 8);
      } else if (n > 8) {
        k.w[1] = load64(s + n - 8);
      }
    } else if (n >= 4) {
      k.w[0] = load32(s) | uint64_t{load32(s + n - 4)} << 32;
    } else {
      k.w[0] = s[0] | uint64_t{s[n >> 1]} << 8 | uint64_t{s[n - 1]} << 16;
    }
    uint64_t h = (k.w[0] ^ (uint64_t{k.len} << 56)) * 0x9E3779B97F4A7C15ull;
    h = (h ^ (h >> 29) ^ k.w[1]) * 0xff51afd7ed558ccdull;
    h = (h ^ (h >> 32) ^ k.w[2]) * 0xc4ceb9fe1a85ec53ull;
    k.hash = h ^ (h >> 31);
    return k;
  }

  // The calling thread's cache.
  static PieceCache& local() {
    thread_local PieceCache cache;
    return cache;
  }

  // Appends the cached ids of `k` for engine `tag` to out and returns true, or returns false.
  template <class Out>
  bool find(uint64_t tag, const Key& k, Out& out) {
    const Slot& s = slot(tag, k);
    if (s.tag != tag || s.len != k.len || s.w[0] != k.w[0] || s.w[1] != k.w[1] || s.w[2] != k.w[2]) return false;
    out.insert(out.end(), s.ids, s.ids + s.n);
    return true;
  }

  // Remembers ids[0, n) for `k` (ignored when n is 0 or more than kMaxIds).
  void put(uint64_t tag, const Key& k, const uint32_t* ids, size_t n) {
    if (n == 0 || n > kMaxIds) return;
    Slot& s = slot(tag, k);
    s.tag = tag;
    s.w[0] = k.w[0];
    s.w[1] = k.w[1];
    s.w[2] = k.w[2];
    s.len = static_cast<uint8_t>(k.len);
    s.n = static_cast<uint8_t>(n);
    std::memcpy(s.ids, ids, n * sizeof(uint32_t));
  }

 private:
  static uint64_t load64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  static uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }

  struct alignas(64) Slot {
    uint64_t tag;  // 0: empty (engine tags are never 0)
    uint64_t w[3];
    uint8_t len;
    uint8_t n;
    uint32_t ids[kMaxIds];
  };
  static_assert(sizeof(Slot) == 64, "one cache line per slot");

  PieceCache() : slots_(new Slot[kSlots]()) {}

  Slot& slot(uint64_t tag, const Key& k) { return slots_[(k.hash ^ tag) & (kSlots - 1)]; }

  std::unique_ptr<Slot[]> slots_;
};

}  // namespace crayon
