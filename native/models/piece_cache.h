// A per-thread cache from pre-token bytes to their ids, in front of a BPE encoder.
//
//   piece (<= 24 bytes) --make_byte_key--> one slot of kSlots (direct mapped, per thread, per engine tag)
//        hit:  the ids come back (one cache line read, the key compared in full)
//        miss: the caller encodes the piece and offers the ids back (kept when <= 7 of them;
//              for more, the slot only says so, and the LongPieceCache keeps the ids)
//
// Why: pieces of several tokens are 8% of the pieces of English text but most of the encoder's
// time (backtracking costs ~20x a whole-token lookup), and 61% of them (English; code: 81%)
// repeat a piece the thread has already encoded. Single-token pieces do not use the cache: their
// whole-token lookup is as cheap as a probe (measured: caching them too made encoding slower).

// Exactness: a hit requires the same engine tag (unique for the process lifetime, never reused),
// the same length and the same bytes (the key is stored zero-padded and compared as three words),
// so a hit returns exactly what the encoder returned for these bytes: the encoders are pure
// functions of (vocabulary, bytes). Nothing is ever approximated; a collision only evicts.
//
// Memory: kSlots * 64 bytes per thread (256 KiB), shared by every engine the thread uses; it is
// allocated on a thread's first encode and lives until the thread exits (the LongPieceCache with
// it, allocated at the thread's first long piece). No growth with input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "core/append_ids.h"
#include "core/byte_key.h"
#include "core/thread_scratch.h"
#include "models/long_piece_cache.h"

namespace crayon {

class PieceCache {
 public:
  static constexpr size_t kMaxLen = 24;  // longest piece kept
  static constexpr size_t kMaxIds = 7;   // most ids kept per piece
  static constexpr size_t kSlots = size_t{1} << 12;  // 256 KiB: measured against 2^10 and 2^14

  using Key = ByteKey;
  static Key make_key(const uint8_t* s, size_t n) { return make_byte_key(s, n); }

  // The calling thread's cache (construct one directly only in tests).
  static PieceCache& local() { return thread_scratch<PieceCache>(); }
  PieceCache() : slots_(new Slot[kSlots]()) {}

  enum Found { kMiss, kHit, kManyIds };

  // Appends the cached ids of `k` for engine `tag` to out and returns kHit; kManyIds when the
  // piece was met with more than kMaxIds ids (put_many_ids; out is left alone); else kMiss.
  template <class Out>
  Found find(uint64_t tag, const Key& k, Out& out) {
    const Slot& s = slot(tag, k);
    if (s.tag != tag || s.len != k.len || s.w[0] != k.w[0] || s.w[1] != k.w[1] || s.w[2] != k.w[2]) return kMiss;
    if (s.n == 0) return kManyIds;
    append_few_ids(out, s.ids, s.n);
    return kHit;
  }

  // Starts loading the slot of `k` for engine `tag` (callers that know their next pieces).
  void prefetch(uint64_t tag, const Key& k) const { __builtin_prefetch(&slots_[(k.hash ^ tag) & (kSlots - 1)]); }

  // Remembers ids[0, n) for `k` (ignored when n is 0 or more than kMaxIds).
  void put(uint64_t tag, const Key& k, const uint32_t* ids, size_t n) {
    if (n == 0 || n > kMaxIds) return;
    Slot& s = claim(tag, k);
    s.n = static_cast<uint8_t>(n);
    std::memcpy(s.ids, ids, n * sizeof(uint32_t));
  }

  // Remembers that `k` has more than kMaxIds ids (find() then says kManyIds).
  void put_many_ids(uint64_t tag, const Key& k) { claim(tag, k).n = 0; }

  // The thread's LongPieceCache, for the pieces this cache does not hold (one thread-local lookup
  // reaches both).
  LongPieceCache& longs() { return longs_; }

 private:
  struct alignas(64) Slot {
    uint64_t tag;  // 0: empty (engine tags are never 0)
    uint64_t w[3];
    uint8_t len;
    uint8_t n;  // 0: more than kMaxIds ids (the LongPieceCache's)
    uint32_t ids[kMaxIds];
  };
  static_assert(sizeof(Slot) == 64, "one cache line per slot");

  Slot& slot(uint64_t tag, const Key& k) { return slots_[(k.hash ^ tag) & (kSlots - 1)]; }
  Slot& claim(uint64_t tag, const Key& k) {
    Slot& s = slot(tag, k);
    s.tag = tag;
    s.w[0] = k.w[0];
    s.w[1] = k.w[1];
    s.w[2] = k.w[2];
    s.len = static_cast<uint8_t>(k.len);
    return s;
  }

  std::unique_ptr<Slot[]> slots_;
  LongPieceCache longs_;
};

}  // namespace crayon
