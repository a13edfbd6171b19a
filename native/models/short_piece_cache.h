// A per-thread first-level cache from short pieces (<= 16 bytes) to their ids, in front of the
// whole-token trie walk and the PieceCache.
//
//   piece + 16 readable bytes --two masked loads--> (a, b, len) --mix--> one 32-byte slot of kSlots
//        hit:  1-3 ids come back from that slot (the key compared in full), or, to the probes
//              that ask for them, up to 16 whose third repeats to the end (runs, see put())
//        miss: the caller encodes the piece (index, trie walk, PieceCache, BPE) and offers the ids back
//
// Why: a common word's trie walk is a chain of one dependent load per byte: 11-12 ns per piece on
// cl100k_base even when every node is in L1 (300 common English words in random order), 2.5x
// what the scanner spends finding the piece. A probe here is two unconditional loads, a multiply
// and one slot compare: ~4 ns hot. fastokens' lead on byte-level vocabularies is mostly this
// (docs/benchmarks.md, "New text against repeated text").
//
// The key is built without a branch on the length: the caller guarantees 16 readable bytes at
// the piece (it passes pieces that end at least 16 bytes before the end of the text it scans, so
// the loads stay inside the caller's buffer), and the bytes past the piece are masked off. An
// earlier cache of the same shape keyed through make_byte_key (a branch per length class, loads
// kept inside the piece) measured no faster than the trie walk it replaced; so this one lives
// or dies by its key staying branch-free.
//
// Exactness: a hit needs the same engine tag, the same length and the same 16 masked bytes, so it
// returns exactly what the engine returned for these bytes (encoding is a pure function of the
// vocabulary and the bytes). Tags are 16 bits, per thread: tag_of() hands each engine a tag the
// first time the thread meets it and never hands a tag out twice until every slot has been
// cleared (after 65,535 engines). A collision only evicts.
//
// Memory: kSlots * 32 bytes (2 MiB) per thread, plus 64 owner entries, shared by every engine
// the thread uses, no growth with input. The slots are one transparent huge page where the kernel
// offers them (all 2 MiB resident from the thread's first encode), else zeroed pages from calloc,
// touched only where slots are used. Size measured: 2^16 slots against 2^14 gave +4-5% in the
// turn-taking peer comparison (more distinct pieces stay), 2^13-2^15 were within noise warm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/append_ids.h"
#include "core/engine_tags.h"
#include "core/huge_pages.h"
#include "core/thread_scratch.h"

namespace crayon {

namespace short_piece_detail {

struct Masks {
  uint64_t lo;
  uint64_t hi;
};

// Keeps the first n of 16 bytes (little-endian loads).
constexpr Masks mask_of(size_t n) {
  return Masks{n >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * n)) - 1,
               n <= 8 ? 0 : n >= 16 ? ~uint64_t{0} : (uint64_t{1} << (8 * (n - 8))) - 1};
}

constexpr Masks kMasks[17] = {mask_of(0),  mask_of(1),  mask_of(2),  mask_of(3),  mask_of(4),  mask_of(5),
                              mask_of(6),  mask_of(7),  mask_of(8),  mask_of(9),  mask_of(10), mask_of(11),
                              mask_of(12), mask_of(13), mask_of(14), mask_of(15), mask_of(16)};

}  // namespace short_piece_detail

class ShortPieceCache {
 public:
  static constexpr size_t kMaxLen = 16;    // longest piece kept
  static constexpr size_t kMaxIds = 3;     // most ids kept per piece
  static constexpr unsigned kSlotBits = 16;  // 2 MiB per thread
  static constexpr size_t kSlots = size_t{1} << kSlotBits;
  static constexpr uint32_t kPartBit = 0x80;  // in Key::len: the key of a part (make_key)
  // In a slot's length: its ids are a run (put()). Never in a Key, so holds() misses a run.
  static constexpr uint32_t kRunBit = 0x40;
  // Most ids a run gives back: kMaxIds, the last of them repeated. A piece of n bytes has at
  // most n ids (every token has a byte).
  static constexpr size_t kMaxRunIds = kMaxLen;
  static_assert(kMaxLen + 1 == sizeof(short_piece_detail::kMasks) / sizeof(short_piece_detail::kMasks[0]));
  static_assert(kMaxLen < kRunBit && (kMaxLen | kPartBit | kRunBit) < 0xFF, "kNoKey's length is no key's");

  struct Key {
    uint64_t a;
    uint64_t b;
    uint32_t len;
    uint32_t index;
  };

  static ShortPieceCache& local() { return thread_scratch<ShortPieceCache>(); }
  ShortPieceCache() {
    // One huge page where the kernel offers them (core/huge_pages.h): the slots are probed in
    // random order, and on 4 KiB pages they span 512 TLB entries.
    if (void* huge = alloc_huge_zeroed(kBytes)) {
      raw_ = huge;
      huge_ = true;
      slots_ = static_cast<Slot*>(huge);
      return;
    }
    raw_ = std::calloc(kBytes + 64, 1);
    if (raw_ == nullptr) throw std::bad_alloc();
    // calloc aligns to 16 bytes; slots start on a cache line so that none straddles two.
    slots_ = reinterpret_cast<Slot*>((reinterpret_cast<uintptr_t>(raw_) + 63) & ~uintptr_t{63});
  }
  ~ShortPieceCache() {
    if (huge_) free_huge(raw_, kBytes);
    else std::free(raw_);
  }
  ShortPieceCache(const ShortPieceCache&) = delete;
  ShortPieceCache& operator=(const ShortPieceCache&) = delete;

  // The thread's tag for the engine whose process-unique owner id is `owner` (core/engine_tags.h).
  // Call it once per encode call, not per piece.
  uint16_t tag_of(uint64_t owner) {
    return tags_.tag_of(owner, [&] { std::memset(static_cast<void*>(slots_), 0, kSlots * sizeof(Slot)); });
  }

  // Tests only (EngineTags::skip_to_last_tag).
  void skip_to_last_tag() { tags_.skip_to_last_tag(); }

  // Key of s[0, n), 1 <= n <= kMaxLen, where s[0, 16) is readable. `part`: the key of a part of
  // a piece cut by SafeCuts (models/safe_cuts.h), whose ids are its BPE without tiktoken's
  // whole-piece shortcut: the same bytes as a whole piece may have other ids, so parts are a key
  // space of their own (a different slot, and a length that never matches a piece's).
  static Key make_key(const uint8_t* s, size_t n, uint16_t tag, bool part = false) {
    uint64_t a, b;
    std::memcpy(&a, s, 8);
    std::memcpy(&b, s + 8, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    a = __builtin_bswap64(a);  // the masks keep the low-order bytes of a little-endian load
    b = __builtin_bswap64(b);
#endif
    a &= short_piece_detail::kMasks[n].lo;
    b &= short_piece_detail::kMasks[n].hi;
    const uint32_t len = static_cast<uint32_t>(n) | (part ? kPartBit : 0u);
    const uint64_t h = (a ^ (b * 0xC2B2AE3D27D4EB4Full) ^ (uint64_t{tag} << 8 | len)) * 0x9E3779B97F4A7C15ull;
    return Key{a, b, len, static_cast<uint32_t>(h >> (64 - kSlotBits))};
  }

  // Starts loading the slot of `k` (callers that know their next pieces overlap the misses).
  void prefetch(const Key& k) const { __builtin_prefetch(&slots_[k.index]); }

  // Appends the cached ids of `k` for `tag` to out and returns true, or returns false.
  template <class Out>
  bool find(uint16_t tag, const Key& k, Out& out) const {
    const Slot& s = slots_[k.index];
    if (!s.holds_or_run(tag, k)) return false;
    const uint32_t n = s.n();
    append_few_ids(out, s.ids, n < kMaxIds ? n : kMaxIds);
    for (uint32_t i = kMaxIds; i < n; ++i) out.push_back(s.ids[kMaxIds - 1]);
    return true;
  }

  // A key no slot holds (a length no key has: at most kMaxLen | kPartBit): the probe of a piece
  // that is not cached misses without a branch on whether it was keyed.
  static constexpr Key kNoKey{0, 0, 0xFF, 0};

  // Whether the slot of `k` holds `k` for `tag`, not as a run.
  bool holds(uint16_t tag, const Key& k) const { return slots_[k.index].holds(tag, k); }
  // The same, as a run or not.
  bool holds_or_run(uint16_t tag, const Key& k) const { return slots_[k.index].holds_or_run(tag, k); }

  // Writes the ids of a held `k` (holds() said so) to w (room for kMaxIds) and returns how many.
  // The common single id is stored under a branch, not by a count loaded from the slot: the
  // caller's next write then does not wait for this slot's load, so that cold slots miss together
  // (a branch-free version measured 10-14% slower on the turn-taking benchmark).
  size_t copy_held(const Key& k, uint32_t* w) const {
    const Slot& s = slots_[k.index];
    const uint32_t n = s.n();
    if (n == 1) {
      w[0] = s.ids[0];
      return 1;
    }
    std::memcpy(w, s.ids, sizeof(s.ids));
    return n;
  }
  // copy_held() of a `k` that holds_or_run() found: w has room for kMaxRunIds.
  size_t copy_held_or_run(const Key& k, uint32_t* w) const {
    const size_t n = copy_held(k, w);
    for (size_t i = kMaxIds; i < n; ++i) w[i] = w[kMaxIds - 1];
    return n;
  }

  // Remembers ids[0, n) for `k` (ignored when n is 0): up to kMaxIds of them, or up to
  // kMaxRunIds whose last n - kMaxIds + 1 are one id, a run (else ignored). Under r50k's
  // vocabulary no two whitespace bytes make a token, and a newline and an indentation ("\n" and
  // 7 spaces: [198, 220 x 7]) is a tenth of gpt2's pieces of code; each missed this cache and the
  // PieceCache (more than 7 ids) for the LongPieceCache's hash, probe and copy. A run is stored
  // with kRunBit in its length, so that only the probes with room for its ids (find,
  // holds_or_run) see it; the others (holds) miss it and encode the piece.
  void put(uint16_t tag, const Key& k, const uint32_t* ids, size_t n) {
    if (n == 0) return;
    uint32_t len = k.len;
    if (n > kMaxIds) {
      if (n > kMaxRunIds) return;
      for (size_t i = kMaxIds; i < n; ++i) {
        if (ids[i] != ids[kMaxIds - 1]) return;
      }
      len |= kRunBit;
    }
    Slot& s = slots_[k.index];
    s.a = k.a;
    s.b = k.b;
    std::memcpy(s.ids, ids, (n < kMaxIds ? n : kMaxIds) * sizeof(uint32_t));
    s.meta = Slot::meta_of(tag, len) | static_cast<uint32_t>(n) << 24;
  }

 private:
  struct alignas(32) Slot {
    uint64_t a;
    uint64_t b;
    uint32_t ids[kMaxIds];
    uint32_t meta;  // tag | len << 16 | n << 24; tag 0: empty (tags start at 1)
    static uint32_t meta_of(uint16_t tag, uint32_t len) { return tag | len << 16; }
    // One compare of everything a hit needs (no branch per field: the probe asks every piece).
    // `meta_bits`: the bits of meta compared (the tag and the length, with the run bit or without).
    bool matches(uint16_t t, const Key& k, uint32_t meta_bits) const {
      return ((a ^ k.a) | (b ^ k.b) | ((meta ^ meta_of(t, k.len)) & meta_bits)) == 0;
    }
    bool holds(uint16_t t, const Key& k) const { return matches(t, k, 0xFFFFFFu); }
    bool holds_or_run(uint16_t t, const Key& k) const { return matches(t, k, 0xFFFFFFu & ~(kRunBit << 16)); }
    uint32_t n() const { return meta >> 24; }
  };
  static_assert(sizeof(Slot) == 32, "two slots per cache line");

  static constexpr size_t kBytes = kSlots * sizeof(Slot);
  static_assert(kBytes % kHugePage == 0, "the slots fill whole huge pages");

  void* raw_ = nullptr;    // zeroed; calloc's pages are touched only where slots are used
  bool huge_ = false;      // raw_ is one huge page from alloc_huge_zeroed
  Slot* slots_ = nullptr;  // raw_ rounded up to a cache line
  EngineTags tags_;
};

}  // namespace crayon
