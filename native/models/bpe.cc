#include "models/bpe.h"

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
  constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t start[kSmallPiece + 1];  // part i is piece[start[i], start[i + 1])
  int32_t node[kSmallPiece];        // trie node of part i's bytes
  uint32_t rank[kSmallPiece];       // rank of part i merged with part i + 1, or kNone
  for (size_t i = 0; i < n; ++i) {
    if (t.byte_rank[piece[i]] < 0) throw BpeError(piece[i]);
    start[i] = static_cast<uint32_t>(i);
    node[i] = t.trie.child(DoubleArrayView::kRoot, piece[i]);
  }
  start[n] = static_cast<uint32_t>(n);
  // The node of part i + part i + 1: part i's node walked over part i + 1's bytes.
  auto joined = [&](size_t i) {
    int32_t nd = node[i];
    for (uint32_t k = start[i + 1]; k < start[i + 2] && nd >= 0; ++k) nd = t.trie.child(nd, piece[k]);
    return nd;
  };
  auto rank_of = [&](int32_t nd) {
    const int32_t v = nd >= 0 ? t.trie.value_at(nd) : -1;
    return v >= 0 && static_cast<uint32_t>(v) < t.n_ids ? static_cast<uint32_t>(v) : kNone;
  };
  size_t m = n;
  for (size_t i = 0; i + 1 < m; ++i) rank[i] = rank_of(joined(i));
  while (m > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < m; ++i) {
      if (rank[i] < rank[best]) best = i;
    }
    if (rank[best] == kNone) break;
    node[best] = joined(best);
    // Part best + 1 joins part best: drop its start and node, and the rank of the merged pair.
    for (size_t i = best + 1; i < m; ++i) start[i] = start[i + 1];
    for (size_t i = best + 1; i + 1 < m; ++i) node[i] = node[i + 1];
    for (size_t i = best; i + 2 < m; ++i) rank[i] = rank[i + 1];
    --m;
    if (best > 0) rank[best - 1] = rank_of(joined(best - 1));
    if (best + 1 < m) rank[best] = rank_of(joined(best));
  }
  const size_t first = out.size();
  for (size_t i = 0; i < m; ++i) {
    const uint32_t r = rank_of(node[i]);
    if (r == kNone) {  // only damaged tables: a part that is not a token
      out.resize(first);
      bpe_encode_heap(t, piece, n, out);
      return;
    }
    out.push_back(r);
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
