// Linear-time exact BPE: the backtracking encoder (after github/rust-gems, crates/bpe).
//
//   build time:  BpeTables --compute_bpe_splits--> BpeSplits {left[], right[], slow[]}
//                                  |                 (u32, u32, u8 arrays of n_ids entries;
//                                  |                  slow[] is empty for most vocabularies)
//                                  +--build_pair_table--> PairEntry[capacity]  (open addressing)
//                                                         all stored as cartridge sections
//   encode time: piece bytes --trie prefixes, longest first; backtrack on invalid pairs--> ids
//
// Why it is exact. Write BPE(s) for bpe_encode_heap's output on bytes s (lowest rank first,
// leftmost on ties; rank == id).
//  (1) Restriction. Once a part covering span S exists, every merge inside S happened in the
//      same order as in BPE(S) alone: the heap always takes the global minimum (rank, start),
//      and restricted to S that is the minimum among S's own pairs. So every token ever formed
//      is formed by the last merge of BPE(its own bytes), its *split*; a token with
//      BPE(bytes) != [token] is *unreachable* and never appears in any output.
//  (2) Pairs. Call (a, b) valid when BPE(bytes(a) + bytes(b)) == [a, b]. By (1), adjacent
//      outputs are valid pairs; conversely a sequence of reachable tokens whose adjacent pairs
//      are all valid is BPE of its bytes (a merge across a boundary in the whole run would
//      happen in that pair's run too). BPE output is unique, so any such sequence is the answer.
//  (3) Pair replay (bpe_pair_is_valid). The run on bytes(a) + bytes(b) is the two tokens' own
//      runs interleaved, until a merge crosses the boundary. Precondition P for a token: each
//      merge in its tree has children that are single bytes or smaller ids. Under P a run
//      merges in increasing rank order, so the boundary state walks down the right spine of a's
//      tree and the left spine of b's, and a crossing merge into c happens iff c is below the
//      merge that ends the state: a (ties go to a's merge, which is further left) or b + 1
//      (ties go to the crossing pair). Only the earliest crossing matters and by (1) it is the
//      split of the token it makes, so a table of splits -> token (the pair table) suffices.
//      Pairs where a or b breaks P somewhere in its tree (BpeSplits::slow) are decided by
//      re-encoding the two tokens' bytes with bpe_encode_heap instead.
//  (4) Search. Greedy longest prefix; on an invalid pair try the next shorter prefix token;
//      when none is left, pop the previous token. The prefix ending at a position has one valid
//      encoding, so a position once found to be a dead end stays one: a bitfield records it and
//      each position is entered at most once. Work is O(n * longest token) trie steps at worst.
//
// Measured (tests/native/test_bpe_backtrack.cc, whole shared corpora, random bytes and UTF-8,
// 100 KB runs, every token): identical to bpe_encode_heap on r50k, cl100k, o200k (P holds for
// every token) and llama3 (81 tokens break P, 107 have such a token in their tree: the slow
// path; without it llama3 mismatches). llama3 also has 588 unreachable tokens.
//
// Bounds: compute_bpe_splits and build_pair_table check their input. bpe_encode_backtrack reads
// the tables only at ids it has checked against n_ids and slots masked by capacity - 1, so
// damaged tables give wrong ids, never out-of-range reads or endless loops; if the search finds
// no valid encoding (only damaged tables can cause that) it falls back to bpe_encode_heap.
// validate_bpe_splits and validate_pair_table let a loader reject damaged tables up front.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/engine_tags.h"

#include "models/bpe.h"
#include "models/piece_encoder.h"

namespace crayon {

// Split tables, indexed by id (n_ids entries each). For each id t exactly one of:
//   left[t] == right[t] == t           t is a single byte (a leaf of every merge tree);
//   left[t] == right[t] == kNoSplit    t is unusable: no mergeable token has this id (absent,
//                                      special, or shadowed in the trie), or it is unreachable;
//   otherwise                          t is reachable, formed by merging left[t] with right[t]
//                                      (both usable ids < n_ids, byte lengths adding up to t's).
struct BpeSplits {
  static constexpr uint32_t kNoSplit = 0xFFFFFFFFu;
  std::vector<uint32_t> left;
  std::vector<uint32_t> right;
  // Per id, 1 when the token's merge tree breaks precondition P (below); empty when no token
  // does. Stored as a third table only when non-empty.
  std::vector<uint8_t> slow;
  uint32_t n_usable = 0;       // ids usable as output tokens (leaves + reachable merges)
  uint32_t n_unreachable = 0;  // mergeable tokens with BPE(bytes) != [token]
  uint32_t n_order_violations = 0;  // reachable tokens whose own merge breaks P
  uint32_t n_slow = 0;              // tokens with such a merge anywhere in their tree
  uint32_t first_violation = kNoSplit;  // smallest violating id, for reports
};

// Computes the split tables for every id below t.n_ids by running BPE on each token's bytes
// (ids whose bytes are not a mergeable token in t.trie come out unusable). O(sum of len^2) over
// tokens; about 0.1 s for 200k tokens.
BpeSplits compute_bpe_splits(const BpeTables& t);

// Checks split tables read from a cartridge: every entry is a leaf (a one-byte token), kNoSplit,
// or a pair of usable ids < n_ids whose byte lengths add up to the token's. O(n_ids).
bool validate_bpe_splits(const BpeTables& t, const uint32_t* left, const uint32_t* right);

// Pair table: (left id, right id) -> the id of the token whose split it is. Stored as a plain
// array (a cartridge section) of `capacity` 12-byte PairEntry (models/piece_encoder.h), at most 3/4
// full; an empty slot has value kNoSplit; linear probing (wrapping) from slot
// pair_slot(left, right, capacity).

// Builds the pair table of the reachable merges in `s`.
std::vector<PairEntry> build_pair_table(const BpeSplits& s);

// A Bloom filter in front of the pair table. Almost every pair the validity check asks about is
// not a merge, and the table is megabytes of random accesses; the filter (about 10 bits per merge,
// two bits from one pair_hash, so a few hundred KiB that stay in L2) answers most of those "no"s
// without touching it. Both bits of a pair lie in one word (piece::pair_bloom_word and
// pair_bloom_bits), so a lookup reads one cache line. False positives only cost the table
// lookup; there are no false negatives.
std::vector<uint64_t> build_pair_bloom(const BpeSplits& s);

class PairTableView {
 public:
  PairTableView() = default;
  PairTableView(const PairEntry* entries, uint32_t capacity) : entries_(entries), capacity_(capacity) {}

  // Puts a filter from build_pair_bloom in front of the table (`words` must be a power of two).
  void set_bloom(const uint64_t* bloom, uint64_t words) {
    bloom_ = words > 0 && (words & (words - 1)) == 0 ? bloom : nullptr;
    bloom_mask_ = words * 64 - 1;
  }
  explicit PairTableView(const std::vector<PairEntry>& v)
      : PairTableView(v.data(), static_cast<uint32_t>(v.size())) {}

  // The merged id for (a, b), or BpeSplits::kNoSplit.
  uint32_t find(uint32_t a, uint32_t b) const {
    return piece::pair_find(entries_, capacity_, bloom_, bloom_mask_, a, b);
  }
  const PairEntry* entries() const { return entries_; }
  const uint64_t* bloom() const { return bloom_; }
  uint64_t bloom_mask() const { return bloom_mask_; }
  uint32_t capacity() const { return capacity_; }

 private:
  const PairEntry* entries_ = nullptr;
  uint32_t capacity_ = 0;
  const uint64_t* bloom_ = nullptr;
  uint64_t bloom_mask_ = 0;
};

// True when capacity fits what PairTableView indexes (any size works; see pair_slot).
bool validate_pair_table(uint32_t capacity);

// Everything the backtracking encoder reads besides BpeTables. Borrowed pointers (e.g. into a
// cartridge mmap). BpeTables::split_left/split_right are not used.
struct BacktrackTables {
  const uint32_t* split_left = nullptr;   // n_ids entries, as BpeSplits::left
  const uint32_t* split_right = nullptr;  // n_ids entries, as BpeSplits::right
  const uint8_t* slow = nullptr;          // n_ids entries as BpeSplits::slow; null when that is empty
  PairTableView pairs;
  // Identifies these tables in per-thread memo caches (see BacktrackScratch). Must be unique for
  // the lifetime of the process (never reused after the tables are freed); 0 disables the memo.
  uint64_t memo_owner = 0;
};

// A fresh value for BacktrackTables::memo_owner.
uint64_t new_memo_owner();

// Per-thread working memory of the CPU encoder. Keep one per thread (e.g. thread_local) so short
// pieces allocate nothing; it only grows, to O(longest piece) bytes.
struct BacktrackScratch {
  // Memo of bpe_pair_is_valid, a pure function of (tables, a, b): direct-mapped, one word per
  // entry holding the pair (ids below 2^20; other pairs are not memoized), the tables' per-thread
  // tag (core/engine_tags.h, from their memo_owner) and the answer, so several vocabularies can
  // share a thread safely. 256 KiB, 2^15 entries: twice the entries of the 24-byte ones it
  // replaced (384 KiB), which held 46% of the pairs of Chinese text seen before (o200k). 2^17
  // entries were faster warm and slower cold (after other work); 2^15 was faster in both.
  static constexpr size_t kMemoSize = size_t{1} << 15;
  static constexpr uint32_t kMemoIdLimit = 1u << 20;
  std::vector<uint64_t> memo;  // 0: empty (tags start at 1)
  EngineTags memo_tags;
  std::vector<uint64_t> dead_end_free;  // piece::dead_end_words(n) words
};

// The encoder's view of BpeTables (+ the backtracking tables when given): what
// models/piece_encoder.h reads, on the CPU or copied to a GPU.
piece::PieceTables make_piece_tables(const BpeTables& t, const BacktrackTables* bt);

// Whether (a, b) can be adjacent in a BPE output: BPE(bytes(a) + bytes(b)) == [a, b]. Both must
// be usable ids < n_ids. Exposed for tests.
bool bpe_pair_is_valid(const BpeTables& t, const BacktrackTables& bt, uint32_t a, uint32_t b);

// Appends the BPE encoding of piece[0, n) to out (n >= 1) with piece::encode_backtrack, identical
// to bpe_encode_heap when the tables came from compute_bpe_splits and build_pair_table for this
// BpeTables (slow set from BpeSplits::slow when that is non-empty). Throws BpeError as
// bpe_encode_heap does (the first byte of the piece that has no token). Falls back to
// bpe_encode_heap when split_left or split_right is null. For tests: it rebuilds the piece tables.
void bpe_encode_backtrack(const BpeTables& t, const BacktrackTables& bt, const uint8_t* piece, size_t n,
                          std::vector<uint32_t>& out, BacktrackScratch& scratch);

// Appends the BPE encoding of a piece that is not one token: piece::encode_multi (the quadratic
// loop for short pieces, backtracking for the rest) with the CPU's pair check (memoized per thread;
// slow pairs decided by re-encoding), and bpe_encode_heap for whatever that leaves undecided
// (pt.split_left null: no backtracking tables). `pt` is make_piece_tables(t, &bt), made once.
// `byte_pairs`: build_byte_pairs(pt), or null; with it, ASCII pieces (or nearly: piece::
// is_mostly_ascii) of up to piece::kSmallPiece bytes merge through the pair table
// (encode_small_pairs) instead of walking the trie (measured:
// qwen2_5 English, new text, +3-5%; Chinese and other scripts, whose short pieces walk two or
// three trie levels, level or slower, so they keep encode_small).
void bpe_encode_multi(const BpeTables& t, const piece::PieceTables& pt, uint64_t memo_owner, const uint8_t* piece,
                      size_t n, std::vector<uint32_t>& out, const uint32_t* byte_pairs = nullptr);

// The token each pair of single bytes merges into (pair_find on their byte tokens), 256 x 256
// entries indexed by first byte * 256 + second, kNoSplit where none; empty without a pair table.
std::vector<uint32_t> build_byte_pairs(const piece::PieceTables& pt);

// BPE of 1 <= n <= piece::kSmallPiece bytes by the quadratic loop over adjacent parts, each pair's
// merge read from the pair table (the first round's from byte_pairs, build_byte_pairs(pt)) where
// encode_small walks the trie over the pair's bytes: one probe per pair (most answered by the
// Bloom filter) instead of a chain of dependent loads that leaves the cache on new text.
// (Prefetching the two pairs a merge renews measured level, with the filter asked first too.)
// Exact by restriction ((1) above): two adjacent parts of a BPE merge into c only as c's split,
// so the splits answer every merge BPE makes, and the lowest such token is tiktoken's choice.
// Writes the ids to out and returns their count, or piece::kUseReference (a byte without a token).
int32_t encode_small_pairs(const piece::PieceTables& pt, const uint32_t* byte_pairs, const uint8_t* piece, uint32_t n,
                           uint32_t* out);

}  // namespace crayon
