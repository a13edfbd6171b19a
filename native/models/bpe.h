// Byte-pair encoding of one pre-token with tiktoken's semantics.
//
//   piece bytes --whole piece in vocab?--> [id]
//               --otherwise--> merge loop: repeatedly merge the adjacent pair whose concatenation
//                               has the lowest rank (leftmost pair on ties) until no pair merges
//
// A token's id is its rank, so "merge priority" and "id" are the same number here.
//
// Three encoders produce identical output (the last two live in models/piece_encoder.h, shared with
// the CUDA batch engine; the functions here wrap them for tests):
//  * bpe_encode_heap — the reference: a linked list of parts and a min-heap of candidate pairs
//    keyed by (rank, position), with stale entries skipped. O(n log n) in the piece length, so a
//    100,000-byte piece is fine. It is the oracle every faster encoder is tested against, and the
//    fallback for vocabularies where a faster encoder's preconditions do not hold.
//  * bpe_encode_backtrack (bpe_backtrack.h, when present) — linear time, see there.
//  * bpe_encode_small — tiktoken's own quadratic loop, for pieces of at most kSmallPiece bytes:
//    the ranks of adjacent parts, lowest merged first (leftmost on ties), each part keeping its
//    trie node so the rank of a merged pair is a walk over the right part's bytes only. On the
//    multi-token pieces of new text it is 2-5x faster than backtracking up to 8 bytes and ~2x up
//    to 12 (English), where backtracking's fixed costs and cold pair tables dominate; longer
//    pieces (Chinese runs) are faster with backtracking.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/double_array.h"
#include "models/piece_encoder.h"

namespace crayon {

struct BpeTables {
  DoubleArrayView trie;              // mergeable token bytes -> rank (== id)
  const uint32_t* token_offsets = nullptr;  // n_ids + 1 entries; bytes of id i are
  const uint8_t* token_bytes = nullptr;     //   token_bytes[token_offsets[i], token_offsets[i+1])
  uint32_t n_ids = 0;                // every rank the trie yields must be < n_ids (checked on use)
  uint64_t token_bytes_size = 0;
  int32_t byte_rank[256];            // rank of each single byte, -1 when the byte is not a token

  // Split tables for the backtracking encoder; null when the cartridge has none.
  const uint32_t* split_left = nullptr;
  const uint32_t* split_right = nullptr;
};

class BpeError : public std::exception {
 public:
  explicit BpeError(uint8_t byte) : byte_(byte) {}
  uint8_t byte() const { return byte_; }
  const char* what() const noexcept override { return "byte has no token in this vocabulary"; }

 private:
  uint8_t byte_;
};

// Fills byte_rank from the trie. Call after setting `trie`.
void fill_byte_ranks(BpeTables& t);

// The rank of bytes s[0, n) as one token, or -1. Checks the rank against n_ids.
int32_t token_rank(const BpeTables& t, const uint8_t* s, size_t n);

// Appends the BPE encoding of piece[0, n) to out (n >= 1). Throws BpeError if a byte of the piece
// has no token.
void bpe_encode_heap(const BpeTables& t, const uint8_t* piece, size_t n, std::vector<uint32_t>& out);

// The longest piece bpe_encode_small takes.
constexpr size_t kSmallPiece = piece::kSmallPiece;

// Appends the BPE encoding of piece[0, n) to out, 1 <= n <= kSmallPiece; identical to
// bpe_encode_heap (same BpeError). Damaged tables (a part without a token) fall back to the heap.
void bpe_encode_small(const BpeTables& t, const uint8_t* piece, size_t n, std::vector<uint32_t>& out);

}  // namespace crayon
