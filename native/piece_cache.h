// Piece cache: a small per-thread memo of pieces that needed the BPE merge loop.
//
//   piece not a whole token --hash--> one 64-byte entry --same engine, same bytes?--> ids
//
// About one English or code pre-token in twenty is not a whole token, and those few take most of
// the encoding time; words repeat, so the same ones come back ("Holmes's", "self._parse"). The
// memo is exact (it keeps the piece's bytes and compares them whole) and keyed by the engine's
// unique owner id, so engines sharing a thread never see each other's entries, and a new engine
// starts cold. It is direct-mapped and fixed-size (2048 entries, 128 KiB per thread), so hostile
// text can only make it miss, never grow. Pieces up to 24 bytes with up to 6 ids are kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace crayon {

class PieceCache {
 public:
  static constexpr size_t kMaxBytes = 24;
  static constexpr size_t kMaxIds = 6;
  static constexpr size_t kEntries = 2048;

  // The calling thread's cache.
  static PieceCache& local() {
    thread_local PieceCache cache;
    return cache;
  }

  // Appends the ids cached for piece[0, n) under `owner` and returns true, or returns false.
  bool lookup(uint64_t owner, const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
    if (n > kMaxBytes) return false;
    const Key k(piece, n);
    const Entry& e = entries_[k.slot];
    if (e.owner != owner || e.len != n || std::memcmp(e.bytes, k.bytes, kMaxBytes) != 0) return false;
    out.insert(out.end(), e.ids, e.ids + e.n_ids);
    return true;
  }

  void store(uint64_t owner, const uint8_t* piece, size_t n, const uint32_t* ids, size_t n_ids) {
    if (n > kMaxBytes || n_ids > kMaxIds) return;
    const Key k(piece, n);
    Entry& e = entries_[k.slot];
    e.owner = owner;
    e.len = static_cast<uint8_t>(n);
    e.n_ids = static_cast<uint8_t>(n_ids);
    std::memcpy(e.bytes, k.bytes, kMaxBytes);
    std::memcpy(e.ids, ids, n_ids * sizeof(uint32_t));
  }

 private:
  struct Entry {
    uint64_t owner = 0;  // 0 = empty; engine owner ids start at 1
    uint8_t len = 0;
    uint8_t n_ids = 0;
    uint8_t bytes[kMaxBytes] = {};  // the piece, zero-padded
    uint32_t ids[kMaxIds] = {};
  };
  static_assert(sizeof(Entry) <= 64, "one cache line per entry");

  struct Key {
    uint8_t bytes[kMaxBytes] = {};
    size_t slot;
    Key(const uint8_t* piece, size_t n) {
      std::memcpy(bytes, piece, n);
      uint64_t w[3];
      std::memcpy(w, bytes, sizeof w);
      uint64_t h = (w[0] ^ (uint64_t{n} << 56)) * 0x9E3779B97F4A7C15ull;
      h = (h ^ (h >> 31) ^ w[1]) * 0xBF58476D1CE4E5B9ull;
      h = (h ^ (h >> 29) ^ w[2]) * 0x94D049BB133111EBull;
      slot = static_cast<size_t>(h >> 53) & (kEntries - 1);
    }
  };

  std::unique_ptr<Entry[]> entries_{new Entry[kEntries]};
};

}  // namespace crayon
