// The per-piece BPE encoder, one implementation for the CPU engine and the CUDA batch engine.
//
//   piece bytes --whole piece a token? (one trie walk)--> [id]
//               --<= 8 bytes, or <= 24 ASCII--> encode_small: tiktoken's quadratic merge loop
//               --longer--> encode_backtrack: greedy longest prefix, backtracking on invalid pairs
//               --anything these cannot decide--> kUseReference: the caller runs bpe_encode_heap
//
// Everything here is a __host__ __device__ function over a plain struct of pointers (PieceTables):
// no STL, exceptions, thread_local, recursion or allocation. The caller owns all memory: `out`
// has room for n ids (a piece of n bytes never has more than n tokens) and `dead_end_free` for
// dead_end_words(n) words. The CPU engine (models/bpe.cc, models/bpe_backtrack.cc) calls these
// functions with vectors it keeps per thread; the CUDA module (native/cuda/) calls the very same
// functions from one GPU thread per piece. So there is one encoder, not two that could drift.
//
// Exactness and the reasoning behind backtracking: models/bpe_backtrack.h. What differs by caller
// is only the pair check's *policy* (PairCheck, below): the CPU memoizes pairs per thread and
// decides pairs of "slow" tokens by re-encoding them; the GPU memoizes nothing and returns
// kUseReference for a slow pair, so that piece goes back to the CPU.
//
// Hostile tables: every index read is checked (trie slots against the trie size, ids against
// n_ids, pair slots against the capacity), backtracking pops only what was pushed and gives up
// after a bounded number of steps, so damaged tables give kUseReference or wrong ids, never an
// out-of-range read or an endless loop (the cartridge checksum catches accidental damage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define CRAYON_HD __host__ __device__ __forceinline__
#else
#define CRAYON_HD inline
#endif

namespace crayon {

// A pair table entry (see models/bpe_backtrack.h): (left id, right id) -> the token they form.
struct PairEntry {
  uint32_t left;
  uint32_t right;
  uint32_t value;
};
static_assert(sizeof(PairEntry) == 12, "PairEntry is stored in cartridges as 12 bytes");

CRAYON_HD uint64_t pair_key(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }

// A fixed mixing function (part of the stored format: changing it invalidates cartridges).
CRAYON_HD uint64_t pair_hash(uint64_t key) {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  return key;
}

// The home slot of (a, b): the hash's high 32 bits scaled onto [0, capacity) (no power-of-two
// capacity needed, so the table stays small).
CRAYON_HD uint64_t pair_slot(uint32_t a, uint32_t b, uint64_t capacity) {
  return ((pair_hash(pair_key(a, b)) >> 32) * capacity) >> 32;
}

namespace piece {

constexpr uint32_t kNoSplit = 0xFFFFFFFFu;
// Returned instead of a count: this piece is for bpe_encode_heap (a byte without a token, a pair
// this caller cannot decide, tables without split sections, or damaged tables).
constexpr int32_t kUseReference = -1;
// encode_small's longest piece.
constexpr uint32_t kSmallPiece = 24;

// Borrowed views of one vocabulary's tables (cartridge sections, or their copies on a GPU).
struct PieceTables {
  const int32_t* trie_units = nullptr;  // double-array units as {base, check} pairs (core/double_array.h)
  const int32_t* trie_values = nullptr;
  uint32_t trie_size = 0;               // >= 1
  uint32_t n_ids = 0;
  const uint32_t* token_offsets = nullptr;  // n_ids + 1, sorted (checked before first use)
  const uint32_t* split_left = nullptr;     // n_ids each; null: no backtracking tables
  const uint32_t* split_right = nullptr;
  const uint8_t* slow = nullptr;            // n_ids, or null when no token is slow
  const PairEntry* pairs = nullptr;
  uint32_t pair_capacity = 0;
  const uint64_t* bloom = nullptr;          // null, or bloom_mask + 1 bits (a power of two)
  uint64_t bloom_mask = 0;
  int32_t byte_rank[256];                   // each single byte's token, -1 when it has none
};

CRAYON_HD size_t dead_end_words(size_t n) { return (n >> 6) + 1; }

// The child of trie node `node` on byte c, or -1.
CRAYON_HD int32_t trie_child(const PieceTables& t, int32_t node, uint8_t c) {
  const int64_t s = static_cast<int64_t>(t.trie_units[2 * static_cast<int64_t>(node)]) + c;
  if (s < 0 || s >= t.trie_size || t.trie_units[2 * s + 1] != node) return -1;
  return static_cast<int32_t>(s);
}

// The id ending at trie node `node` when it is a token id (< n_ids), else -1.
CRAYON_HD int32_t trie_id(const PieceTables& t, int32_t node) {
  if (node < 0) return -1;
  const int32_t v = t.trie_values[node];
  return v >= 0 && static_cast<uint32_t>(v) < t.n_ids ? v : -1;
}

// The id of bytes s[0, n) as one token, or -1.
CRAYON_HD int32_t whole_token(const PieceTables& t, const uint8_t* s, size_t n) {
  int32_t node = 0;
  for (size_t i = 0; i < n && node >= 0; ++i) node = trie_child(t, node, s[i]);
  return trie_id(t, node);
}

CRAYON_HD bool is_ascii(const uint8_t* s, size_t n) {
  uint8_t any = 0;
  for (size_t i = 0; i < n; ++i) any |= s[i];
  return any < 0x80;
}

// Whether s[0, n) is ASCII but for at most two bytes: a Latin word with one accented letter, which
// merges like an ASCII one (many short tokens, rare spines), not like a run of CJK or Cyrillic.
// (Measured, 39 scripts, new text: o200k_base -2.8% cycles. Allowing three bytes also sends
// SentencePiece words, "\xe2\x96\x81" + ASCII, to the loop: level on Mistral, whose small
// vocabulary keeps its spines in cache.)
CRAYON_HD bool is_mostly_ascii(const uint8_t* s, size_t n) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  uint32_t high = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    high += static_cast<uint32_t>((((w >> 7) & kOnes) * kOnes) >> 56);  // the 8 top bits, summed
  }
  for (; i < n; ++i) high += s[i] >> 7;
  return high <= 2;
}

// The Bloom filter of the pair table (cartridge section BPB1, build_pair_bloom): a pair's two
// bits lie in one 64-bit word, so a lookup reads one word (one cache line) where a filter with
// independent bit positions read two. The word: bits 12 and up of h = pair_hash(pair); the bits:
// h's low 6 bits and the 6 above them (pair_slot takes h's high half). `bloom_mask` + 1 is the
// filter's size in bits (64 x a power of two).
CRAYON_HD uint64_t pair_bloom_word(uint64_t h, uint64_t bloom_mask) { return (h >> 12) & (bloom_mask >> 6); }
CRAYON_HD uint64_t pair_bloom_bits(uint64_t h) { return (uint64_t{1} << (h & 63)) | (uint64_t{1} << ((h >> 6) & 63)); }

// The token (a, b) merge into, or kNoSplit, from a pair table of `cap` entries with an optional
// Bloom filter in front (bloom_mask + 1 bits; see build_pair_bloom). Probes at most `cap` slots,
// so it stops even on a damaged table with no empty slot.
CRAYON_HD uint32_t pair_find(const PairEntry* pairs, uint32_t cap, const uint64_t* bloom, uint64_t bloom_mask,
                             uint32_t a, uint32_t b) {
  if (cap == 0) return kNoSplit;
  if (bloom != nullptr) {
    const uint64_t h = pair_hash(pair_key(a, b));
    const uint64_t bits = pair_bloom_bits(h);
    if ((bloom[pair_bloom_word(h, bloom_mask)] & bits) != bits) return kNoSplit;
  }
  uint32_t i = static_cast<uint32_t>(pair_slot(a, b, cap));
  for (uint32_t probes = 0; probes < cap; ++probes) {
    const PairEntry& e = pairs[i];
    if (e.left == a && e.right == b) return e.value;
    if (e.value == kNoSplit) break;
    i = i + 1 == cap ? 0 : i + 1;
  }
  return kNoSplit;
}

CRAYON_HD uint32_t pair_find(const PieceTables& t, uint32_t a, uint32_t b) {
  return pair_find(t.pairs, t.pair_capacity, t.bloom, t.bloom_mask, a, b);
}

// Whether (a, b) can be adjacent in a BPE output, by replaying the two tokens' merge spines
// (models/bpe_backtrack.h, (3)). Neither token may be slow. Both ids must be < n_ids.
CRAYON_HD bool pair_valid_by_spines(const PieceTables& t, uint32_t a, uint32_t b) {
  uint64_t limit = ~uint64_t{0};
  // Each undo shortens a or b by a byte at least; the cap only matters for damaged tables.
  for (int steps = 0; steps < (1 << 16); ++steps) {
    const uint32_t c = pair_find(t, a, b);
    if (c != kNoSplit && c < limit) return false;
    const uint32_t ar = t.split_right[a];
    const uint32_t bl = t.split_left[b];
    const bool a_leaf = ar == a;
    const bool b_leaf = bl == b;
    if (a_leaf && b_leaf) return true;
    if (!a_leaf && (b_leaf || a > b)) {
      // a's merge is later; on a tie of ranks it goes first, so crossing only for c < a.
      limit = a;
      a = ar;
      if (a >= t.n_ids) return false;
    } else {
      // b's merge is later; a crossing pair starts left of it and wins ties: c <= b.
      limit = uint64_t{b} + 1;
      b = bl;
      if (b >= t.n_ids) return false;
    }
  }
  return false;
}

CRAYON_HD bool pair_is_slow(const PieceTables& t, uint32_t a, uint32_t b) {
  return t.slow != nullptr && (t.slow[a] | t.slow[b]) != 0;
}

// The pair check with no memo, for callers that cannot re-encode: a slow pair aborts the piece.
struct SpinePairCheck {
  const PieceTables& t;
  CRAYON_HD int operator()(uint32_t a, uint32_t b) const {
    if (pair_is_slow(t, a, b)) return kUseReference;
    return pair_valid_by_spines(t, a, b) ? 1 : 0;
  }
};

// The position of the least of v[0, count) (1 <= count <= kSmallPiece), the leftmost on ties: the
// least of (value << 8 | position), a minimum without a branch per element. (As a compare and
// branch, the merge loops below mispredicted on a fifth of their pairs.)
CRAYON_HD uint32_t least_position(const uint32_t* v, uint32_t count) {
  uint64_t least = uint64_t{v[0]} << 8;
  for (uint32_t i = 1; i < count; ++i) {
    const uint64_t key = uint64_t{v[i]} << 8 | i;
    least = key < least ? key : least;
  }
  return static_cast<uint32_t>(least & 0xFF);
}
static_assert(kSmallPiece < 256, "least_position keeps positions in 8 bits");

// tiktoken's quadratic merge loop for 1 <= n <= kSmallPiece, from the m initial parts
// piece[starts[i], starts[i + 1]) (starts[0] == 0, ascending, starts[m] == n; each part a token):
// the ranks of adjacent parts, lowest merged first (leftmost on ties), each part keeping its trie
// node so the rank of a merged pair is a walk over the right part's bytes only. Returns the number
// of ids written, or kUseReference. From single bytes this is BPE itself (encode_small); from
// larger parts only where the caller has shown that no merge crosses into a part before it is
// whole and that no merge between whole parts is ranked before one that completes a part
// (SafeCuts::whole_characters).
CRAYON_HD int32_t encode_small_from(const PieceTables& t, const uint8_t* piece, uint32_t n, const uint32_t* starts,
                                    uint32_t m, uint32_t* out) {
  constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t start[kSmallPiece + 1];  // part i is piece[start[i], start[i + 1])
  int32_t node[kSmallPiece];        // trie node of part i's bytes
  uint32_t rank[kSmallPiece];       // id of part i merged with part i + 1, or kNone
  if (n == 0 || n > kSmallPiece || m == 0 || m > n || starts[0] != 0 || starts[m] != n) return kUseReference;
  for (uint32_t i = 0; i < m; ++i) {
    if (starts[i + 1] <= starts[i]) return kUseReference;
    start[i] = starts[i];
    int32_t nd = 0;
    for (uint32_t k = starts[i]; k < starts[i + 1] && nd >= 0; ++k) nd = trie_child(t, nd, piece[k]);
    if (nd < 0) return kUseReference;  // a byte without a token, or a part that is not one
    node[i] = nd;
  }
  start[m] = n;
  // The node of part i + part i + 1: part i's node walked over part i + 1's bytes.
  auto joined = [&](uint32_t i) {
    int32_t nd = node[i];
    for (uint32_t k = start[i + 1]; k < start[i + 2] && nd >= 0; ++k) nd = trie_child(t, nd, piece[k]);
    return nd;
  };
  auto rank_of = [&](int32_t nd) {
    const int32_t v = trie_id(t, nd);
    return v >= 0 ? static_cast<uint32_t>(v) : kNone;
  };
  for (uint32_t i = 0; i + 1 < m; ++i) rank[i] = rank_of(joined(i));
  while (m > 1) {
    const uint32_t best = least_position(rank, m - 1);
    if (rank[best] == kNone) break;
    node[best] = joined(best);
    // Part best + 1 joins part best: drop its start and node, and the rank of the merged pair.
    for (uint32_t i = best + 1; i < m; ++i) start[i] = start[i + 1];
    for (uint32_t i = best + 1; i + 1 < m; ++i) node[i] = node[i + 1];
    for (uint32_t i = best; i + 2 < m; ++i) rank[i] = rank[i + 1];
    --m;
    if (best > 0) rank[best - 1] = rank_of(joined(best - 1));
    if (best + 1 < m) rank[best] = rank_of(joined(best));
  }
  for (uint32_t i = 0; i < m; ++i) {
    const uint32_t r = rank_of(node[i]);
    if (r == kNone) return kUseReference;  // only damaged tables: a part that is not a token
    out[i] = r;
  }
  return static_cast<int32_t>(m);
}

// BPE of 1 <= n <= kSmallPiece bytes by the loop above, from single bytes.
CRAYON_HD int32_t encode_small(const PieceTables& t, const uint8_t* piece, uint32_t n, uint32_t* out) {
  uint32_t starts[kSmallPiece + 1];
  if (n == 0 || n > kSmallPiece) return kUseReference;
  for (uint32_t i = 0; i < n; ++i) {
    if (t.byte_rank[piece[i]] < 0) return kUseReference;
    starts[i] = i;
  }
  starts[n] = n;
  return encode_small_from(t, piece, n, starts, n, out);
}

// Linear-time exact BPE by backtracking (models/bpe_backtrack.h, (4)), for n >= 1. `check(a, b)`
// returns 1 when the pair is valid, 0 when not, or a negative status that aborts the piece.
// Needs the split tables (kUseReference without them).
template <class PairCheck>
CRAYON_HD int32_t encode_backtrack(const PieceTables& t, const uint8_t* piece, uint32_t n, uint32_t* out,
                                   uint64_t* dead_end_free, PairCheck& check) {
  if (t.split_left == nullptr || t.split_right == nullptr || n == 0) return kUseReference;
  for (uint32_t i = 0; i < n; ++i) {
    if (t.byte_rank[piece[i]] < 0) return kUseReference;
  }
  if (n == 1) {
    out[0] = static_cast<uint32_t>(t.byte_rank[piece[0]]);
    return 1;
  }
  const size_t words = dead_end_words(n);
  for (size_t w = 0; w < words; ++w) dead_end_free[w] = ~uint64_t{0};
  auto free_at = [&](uint32_t p) { return (dead_end_free[p >> 6] >> (p & 63)) & 1; };

  uint32_t count = 0;
  uint32_t pos = 0;
  uint32_t cap = n + 1;  // candidates must be shorter than cap (set when a longer one failed)
  // Each position is entered at most once and each entry walks at most the longest token, so a
  // sound table never comes near this; it bounds the work on damaged ones.
  uint64_t budget = 64 * uint64_t{n} + 4096;
  while (pos < n) {
    if (budget-- == 0) return kUseReference;
    // The longest usable-looking prefix token of piece[pos, ...) shorter than cap.
    const uint32_t limit = n - pos < cap - 1 ? n - pos : cap - 1;
    int32_t node = 0;
    uint32_t best_len = 0;
    uint32_t best_id = 0;
    for (uint32_t i = 0; i < limit; ++i) {
      node = trie_child(t, node, piece[pos + i]);
      if (node < 0) break;
      const int32_t v = trie_id(t, node);
      if (v >= 0) {
        best_len = i + 1;
        best_id = static_cast<uint32_t>(v);
      }
    }
    if (best_len > 0) {
      // Usability and validity are checked only for the candidate tried: the longest one is
      // usually accepted, and each check is a cache miss. A rejected one lowers the cap.
      bool take = free_at(pos + best_len) && t.split_left[best_id] != kNoSplit;
      if (take && count > 0) {
        const int v = check(out[count - 1], best_id);
        if (v < 0) return v;
        take = v != 0;
      }
      if (take) {
        if (count == n) return kUseReference;  // only damaged tables get here
        out[count++] = best_id;
        pos += best_len;
        cap = n + 1;
      } else {
        cap = best_len;
      }
      continue;
    }
    // No candidate left here. With nothing to pop, no valid encoding exists: damaged tables.
    if (count == 0) return kUseReference;
    // The encoding of piece[0, pos) has no valid continuation: remember, and retry the previous
    // position with its next shorter candidate.
    dead_end_free[pos >> 6] &= ~(uint64_t{1} << (pos & 63));
    const uint32_t id = out[--count];
    const uint32_t len = t.token_offsets[id + 1] - t.token_offsets[id];
    if (len == 0 || len > pos) return kUseReference;  // a token length the trie disagrees with
    pos -= len;
    cap = len;
  }
  return static_cast<int32_t>(count);
}

// Whether encode_multi takes the quadratic loop: short pieces, where it beats backtracking.
// Measured per length on the pieces that reach an encoder in real use (first sightings: repeats
// are answered by the caches), cycles per piece, o200k_base:
//   ASCII 13-16 bytes: backtracking 9,100 (English) / 13,200 (code), the loop 1,800 / 2,000;
//   ASCII 21-24 bytes (code): 9,400 against 3,100;
//   Chinese 13-16 bytes: backtracking 1,000, the loop 1,200 (21-24: 1,600 against 2,200).
// A rare English word's greedy candidates are often rejected, and every rejection is a pair
// check along spines of rare tokens, out of cache; Chinese tokens are few and their spines stay
// hot. So ASCII pieces (or nearly: is_mostly_ascii) up to 24 bytes, other scripts up to 8 (past 24
// the loop's n^2 grows).
CRAYON_HD bool prefers_small(const uint8_t* piece, uint32_t n) {
  return n <= 8 || (n <= kSmallPiece && is_mostly_ascii(piece, n));
}

// BPE of a piece that is not a single token: encode_small or encode_backtrack.
template <class PairCheck>
CRAYON_HD int32_t encode_multi(const PieceTables& t, const uint8_t* piece, uint32_t n, uint32_t* out,
                               uint64_t* dead_end_free, PairCheck& check) {
  if (prefers_small(piece, n)) return encode_small(t, piece, n, out);
  return encode_backtrack(t, piece, n, out, dead_end_free, check);
}

// The whole per-piece encoder: one token when the piece is one, else encode_multi.
template <class PairCheck>
CRAYON_HD int32_t encode_piece(const PieceTables& t, const uint8_t* piece, uint32_t n, uint32_t* out,
                               uint64_t* dead_end_free, PairCheck& check) {
  const int32_t whole = whole_token(t, piece, n);
  if (whole >= 0) {
    out[0] = static_cast<uint32_t>(whole);
    return 1;
  }
  return encode_multi(t, piece, n, out, dead_end_free, check);
}

}  // namespace piece
}  // namespace crayon
