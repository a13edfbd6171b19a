// Every short token of a vocabulary by its bytes: the first sighting of a one-token piece in one
// prefetched probe instead of a trie walk.
//
//   ShortPieceCache key (a, b, len) --mix, no engine tag--> one 64-byte bucket of two slots
//        hit:  the piece is that token
//        miss: the piece is several tokens, a token not indexed, or a token this index left out
//
// Why: on new text the ShortPieceCache answers the pieces a thread has met; what it misses is
// mostly first sightings (o200k_base, a peers.py cell of 40 English documents: 8.6% of pieces,
// 6.0% of them one token), and each paid a whole-piece trie walk: one dependent load per byte,
// cold after another library's turn or any other work (55% of that walk's samples on one load).
// This index holds those tokens in advance, and its bucket is prefetched for the pieces whose
// cache slot missed, a batch of 32 pieces before they are encoded, so the misses overlap.
// fastokens does the same with more memory: on its first encode it fills a per-thread pre-token
// cache with every vocabulary entry of up to 15 bytes (32 MiB and ~300 ms for o200k_base).
// Measured (docs/benchmarks.md, "Short tokens indexed"): peers.py on o200k_base English
// 3.35-3.68x -> 4.22-4.39x tiktoken (0.64-0.72x -> 0.73-0.77x fastokens); an engine alone over a
// whole corpus, within noise. A whole-token index tried in the third session (BTIX: probed after a
// cache miss, prefetched only for the pieces that missed) measured level cold and 5-10% slower
// warm, in a test that ran two engines of one vocabulary in turns.
//
// What is indexed: tokens of 1-16 bytes that start with an ASCII byte (the pieces the short cache
// keys under every pattern; under r50k's it keys short pieces led by other bytes too, which find()
// answers kNotHeld: TiktokenEngine::short_cached) and that BPE reaches (split tables: left != kNoSplit, a
// single byte or a merge). A reachable token is its own BPE, and tiktoken's whole-piece shortcut
// answers it the same, so the index is exact for both faces' semantics; unreachable tokens
// (Llama 3 has 588) are left to the trie walk, as are tokens whose bucket is full (both slots
// taken; 5-8% of them at this load). Each bucket keeps a bit: one of its tokens is not held
// (full, or unreachable). A piece the index does not find in a bucket whose bit is clear is no
// token at all (find() says kNoToken), and its BPE starts without the whole-piece walk, which
// fails deep in the trie for a word of several tokens. (Until the twenty-third session one
// unreachable token anywhere turned kNoToken off for the whole index: Llama 3's pieces of several
// tokens all paid the walk.)
//
// Memory: 2 slots of 32 bytes per bucket, buckets a power of two at least the number of tokens
// indexed (at most half the slots used): 4 MiB for r50k_base, 8 MiB for cl100k_base and Llama 3,
// 16 MiB for o200k_base; one per engine, shared by its threads (read only once built), on
// transparent huge pages where the kernel offers them. Built once per engine, once its cached
// encodes have brought 16 KiB of text (TiktokenEngine::short_tokens_for; a few sentences never
// earn the build back): two passes over the token table and one over the index, 5-8 ms for
// cl100k_base and 9-13 ms for o200k_base in a fresh process (more when the kernel compacts memory
// for the huge pages), about half of it the kernel zeroing the new pages.
//
// Bounds: ids come from the loop over ids < n_ids; token bytes are read through the offsets the
// engine checked at load; a damaged split table can only make a token indexed or not, never a
// read out of range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "models/short_piece_cache.h"

namespace crayon {

struct BpeTables;

class ShortTokenIndex {
 public:
  // The index of t's reachable ASCII-led tokens of 1-16 bytes (split_left: the split table,
  // BpeSplits::left; kinds: each id's kind, `mergeable` the kind of the trie's tokens), or null
  // when t has none.
  static std::unique_ptr<const ShortTokenIndex> build(const BpeTables& t, const uint32_t* split_left,
                                                      const uint8_t* kinds, uint8_t mergeable);
  ~ShortTokenIndex();
  ShortTokenIndex(const ShortTokenIndex&) = delete;
  ShortTokenIndex& operator=(const ShortTokenIndex&) = delete;

  // Starts loading the bucket of a piece's ShortPieceCache key.
  void prefetch(const ShortPieceCache::Key& k) const { __builtin_prefetch(bucket(k)); }

  // The token whose bytes the piece of key `k` is; else kNoToken when the piece is certainly no
  // token of the vocabulary (so no trie walk needs to ask: no token of its bucket was left out,
  // for want of a slot or for being unreachable, so the index holds every mergeable token of its
  // shape, ASCII-led and 1-16 bytes, that could be this piece); else kNotHeld.
  static constexpr int64_t kNoToken = -1;
  static constexpr int64_t kNotHeld = -2;
  int64_t find(const ShortPieceCache::Key& k) const {
    if (!may_hold(k)) return kNotHeld;  // a key of the short cache's wider shape (short_cached)
    const uint32_t b = bucket_of(k);
    const Slot* s = slots_ + 2 * size_t{b};
    if (s[0].holds(k)) return s[0].id;
    if (s[1].holds(k)) return s[1].id;
    return complete_ && !((lacking_[b >> 6] >> (b & 63)) & 1) ? kNoToken : kNotHeld;
  }

  // Whether k has the shape of the tokens indexed: ASCII-led (its first byte is k.a's lowest).
  static bool may_hold(const ShortPieceCache::Key& k) { return (k.a & 0x80) == 0; }

  size_t size() const { return indexed_; }    // tokens held
  size_t left_out() const { return left_out_; }  // tokens whose bucket was full
  size_t unreached() const { return unreached_; }  // tokens of the shape BPE does not reach, not held
  size_t bytes() const { return bytes_; }
  bool complete() const { return complete_; }  // find() can answer kNoToken (see there)

 private:
  struct alignas(32) Slot {
    uint64_t a;
    uint64_t b;
    uint32_t id;
    uint32_t len;  // 0: empty
    bool holds(const ShortPieceCache::Key& k) const { return a == k.a && b == k.b && len == k.len; }
  };
  static_assert(sizeof(Slot) == 32, "two slots per cache line");

  ShortTokenIndex() = default;
  uint32_t bucket_of(const ShortPieceCache::Key& k) const {
    const uint64_t h = (k.a ^ (k.b * 0xC2B2AE3D27D4EB4Full) ^ k.len) * 0x9E3779B97F4A7C15ull;
    return static_cast<uint32_t>(h >> (64 - bucket_bits_));
  }
  const Slot* bucket(const ShortPieceCache::Key& k) const { return slots_ + 2 * size_t{bucket_of(k)}; }
  void mark(uint32_t b) { lacking_[b >> 6] |= uint64_t{1} << (b & 63); }  // bucket b lacks a token

  Slot* slots_ = nullptr;
  unsigned bucket_bits_ = 0;
  bool huge_ = false;
  size_t bytes_ = 0;
  size_t indexed_ = 0;
  size_t left_out_ = 0;
  size_t unreached_ = 0;
  std::vector<uint64_t> lacking_;     // one bit per bucket: a token of its keys is not held
  bool complete_ = false;             // the tokens' kinds were known (else find() never says kNoToken)
};

}  // namespace crayon
