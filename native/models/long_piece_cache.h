// A per-thread cache from long pieces (25-256 bytes) and pieces of many tokens (> 7) to their ids,
// behind the PieceCache, which keeps neither.
//
//   piece --xxhash64(bytes, engine tag)--> up to kProbes slots (open addressing)
//        hit:  the ids come back from the arena (tag, hash, length and bytes compared in full)
//        miss: the caller encodes the piece and offers the ids back
//
// Why: outside Latin scripts a word's pieces are long in bytes and, on an English-centred
// vocabulary, many tokens each (a Devanagari word of eight letters is 24 bytes and, on gpt2, up
// to 24 tokens), so they missed the PieceCache every time they came back and were BPE'd again:
// on UDHR's 39 scripts crayon-hf ran at 0.42x fastokens on repeated text, whose caches keep
// pieces of any length. (On new text 16% of such pieces repeat within a document; callgrind
// still gave gpt2's engine 6% fewer estimated cycles with this cache.)
//
// Exactness: a hit needs the same engine tag, the same length and the same bytes (memcmp), so it
// returns exactly what the engine returned for these bytes; encoding is a pure function of the
// vocabulary and the bytes. A hash collision only costs a probe.
//
// Memory: kSlots * 24 bytes of slots and a kArenaBytes arena of keys and ids (608 KiB in all) per
// thread (each thread's PieceCache holds one), shared by every engine the thread uses, allocated
// at its first long piece. When the arena or three quarters of the slots are used up, the whole
// cache is emptied at once (no per-entry eviction): memory stays bounded whatever the input, and
// text that stops repeating itself pays one clearing per 512 KiB of new pieces.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/xxhash64.h"

namespace crayon {

class LongPieceCache {
 public:
  static constexpr size_t kMaxLen = 256;             // longest piece kept
  static constexpr size_t kMaxIds = 256;             // most ids kept per piece
  static constexpr size_t kSlots = size_t{1} << 12;  // 96 KiB of slots
  static constexpr size_t kProbes = 4;
  static constexpr size_t kArenaBytes = size_t{512} << 10;

  static uint64_t hash(uint64_t tag, const uint8_t* s, size_t n) { return xxhash64(s, n, tag) | 1; }

  // Appends the cached ids of s[0, n) for engine `tag` (h = hash(tag, s, n)) to out and returns
  // true, or returns false.
  template <class Out>
  bool find(uint64_t tag, uint64_t h, const uint8_t* s, size_t n, Out& out) const {
    if (slots_ == nullptr) return false;
    for (size_t i = 0; i < kProbes; ++i) {
      const Slot& slot = slots_[(h + i) & (kSlots - 1)];
      if (slot.hash == 0) return false;
      if (!holds(slot, tag, h, s, n)) continue;
      const uint32_t* ids = arena_.get() + (slot.at + padded(n)) / sizeof(uint32_t);
      out.insert(out.end(), ids, ids + slot.n);
      return true;
    }
    return false;
  }

  // Remembers ids[0, m) for s[0, n) (ignored unless 1 <= m <= kMaxIds and n <= kMaxLen, and when
  // the piece is kept already: a piece of many ids whose PieceCache mark was evicted since comes
  // back here after its BPE).
  void put(uint64_t tag, uint64_t h, const uint8_t* s, size_t n, const uint32_t* ids, size_t m) {
    if (m == 0 || m > kMaxIds || n > kMaxLen) return;
    if (slots_ == nullptr) {
      slots_.reset(new Slot[kSlots]());
      arena_.reset(new uint32_t[kArenaBytes / sizeof(uint32_t)]);
    }
    const size_t need = padded(n) + m * sizeof(uint32_t);
    if (used_ + need > kArenaBytes || 4 * (filled_ + 1) > 3 * kSlots) clear();
    for (size_t i = 0; i < kProbes; ++i) {
      Slot& slot = slots_[(h + i) & (kSlots - 1)];
      if (slot.hash != 0) {
        if (holds(slot, tag, h, s, n)) return;
        continue;
      }
      std::memcpy(bytes() + used_, s, n);
      std::memcpy(bytes() + used_ + padded(n), ids, m * sizeof(uint32_t));
      slot = Slot{tag, h, static_cast<uint32_t>(used_), static_cast<uint16_t>(n), static_cast<uint16_t>(m)};
      used_ += need;
      ++filled_;
      return;
    }
    // kProbes slots in a row taken: this piece is not kept (the next clearing makes room).
  }

  // The number of pieces kept (for tests).
  size_t size() const { return filled_; }

 private:
  struct Slot {
    uint64_t tag;
    uint64_t hash;  // 0: empty (hash() is odd)
    uint32_t at;    // the key's first byte in the arena (a multiple of 4); its ids follow at padded(len)
    uint16_t len;
    uint16_t n;
  };
  static_assert(sizeof(Slot) == 24, "three words per slot");

  static size_t padded(size_t n) { return (n + 3) & ~size_t{3}; }
  // Whether `slot` keeps s[0, n) for engine `tag` (h = hash(tag, s, n)).
  bool holds(const Slot& slot, uint64_t tag, uint64_t h, const uint8_t* s, size_t n) const {
    return slot.hash == h && slot.tag == tag && slot.len == n && std::memcmp(bytes() + slot.at, s, n) == 0;
  }
  // The arena as bytes, for the keys (ids are read as the words they are).
  uint8_t* bytes() const { return reinterpret_cast<uint8_t*>(arena_.get()); }

  void clear() {
    std::fill(slots_.get(), slots_.get() + kSlots, Slot{});
    used_ = 0;
    filled_ = 0;
  }

  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<uint32_t[]> arena_;  // keys, each padded to 4 bytes, followed by their ids
  size_t used_ = 0;
  size_t filled_ = 0;
};

}  // namespace crayon
