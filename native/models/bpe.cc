#include "models/bpe.h"

#include "models/bpe_backtrack.h"  // make_piece_tables

#include <algorithm>
#include <limits>
#include <queue>

namespace crayon {

void fill_byte_ranks(BpeTables& t) {
  for (int b = 0; b < 256; ++b) {
    const uint8_t c = static_cast<uint8_t>(b);
    t.byte_rank[b] = token_rank(t, &c, 1);
  }
}

int32_t token_rank(const BpeTables& t, const uint8_t* s, size_t n) {
  const int32_t r = t.trie.find(s, n);
  return (r >= 0 && static_cast<uint32_t>(r) < t.n_ids) ? r : -1;
}

void bpe_encode_small(const BpeTables& t, const uint8_t* piece, size_t n, std::vector<uint32_t>& out) {
  const piece::PieceTables pt = make_piece_tables(t, nullptr);
  uint32_t ids[piece::kSmallPiece];
  const int32_t got = n <= piece::kSmallPiece ? piece::encode_small(pt, piece, static_cast<uint32_t>(n), ids)
                                              : piece::kUseReference;
  if (got < 0) {
    bpe_encode_heap(t, piece, n, out);  // a byte without a token (BpeError), or damaged tables
  } else {
    out.insert(out.end(), ids, ids + got);
  }
}

namespace {

// One part of the piece during merging: a byte range [start, end) that is currently one token.
// Parts form a doubly linked list by index; `end` doubles as the start of the next part.
struct Part {
  uint32_t start;
  uint32_t end;
  int32_t prev;
  int32_t next;
  uint32_t rank;  // rank of the token this part currently is
};

struct Candidate {
  uint32_t rank;   // rank of the merged token
  uint32_t start;  // byte offset of the left part: identifies the pair and orders ties leftmost
  int32_t left;    // index of the left part
  uint32_t right_end;  // end of the right part when this candidate was made (staleness check)
  bool operator>(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : start > o.start;
  }
};

}  // namespace

void bpe_encode_heap(const BpeTables& t, const uint8_t* piece, size_t n, std::vector<uint32_t>& out) {
  if (n == 0) return;  // nothing to encode (the loop below needs a first part)
  if (n == 1) {
    const int32_t r = t.byte_rank[piece[0]];
    if (r < 0) throw BpeError(piece[0]);
    out.push_back(static_cast<uint32_t>(r));
    return;
  }
  std::vector<Part> parts(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t r = t.byte_rank[piece[i]];
    if (r < 0) throw BpeError(piece[i]);
    parts[i] = Part{static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1), static_cast<int32_t>(i) - 1,
                    i + 1 < n ? static_cast<int32_t>(i + 1) : -1, static_cast<uint32_t>(r)};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push_pair = [&](int32_t left) {
    const Part& a = parts[left];
    if (a.next < 0) return;
    const Part& b = parts[a.next];
    const int32_t r = token_rank(t, piece + a.start, b.end - a.start);
    if (r >= 0) heap.push(Candidate{static_cast<uint32_t>(r), a.start, left, b.end});
  };
  for (size_t i = 0; i + 1 < n; ++i) push_pair(static_cast<int32_t>(i));

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Part& a = parts[c.left];
    // Stale when the left part was merged away (its start moved into another part), or either
    // side grew since the candidate was made.
    if (a.start != c.start || a.next < 0 || parts[a.next].end != c.right_end || a.end == a.start) continue;
    Part& b = parts[a.next];
    // Merge b into a.
    a.end = b.end;
    a.rank = c.rank;
    a.next = b.next;
    if (b.next >= 0) parts[b.next].prev = c.left;
    b.start = b.end = 0;  // dead
    b.next = -1;
    if (a.prev >= 0) push_pair(a.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = parts[i].next) out.push_back(parts[i].rank);
}

}  // namespace crayon
