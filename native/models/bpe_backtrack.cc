// The backtracking BPE encoder; the reasoning is in bpe_backtrack.h.
//
// Performance notes:
// * Candidates at a position come from one trie walk that collects every usable prefix token
//   (shortest first) and is then tried longest first. rust-gems keeps a "next shorter prefix"
//   table per token instead; the walk costs the same as the longest-match search it replaces,
//   and it saves a cartridge section.
// * The pair replay (bpe_pair_is_valid) makes one pair-table probe per state, at most about
//   two per byte of the shorter token, usually one or two in all: most adjacent pairs have no
//   merge across the boundary at all.
// * Pairs involving a "slow" token (llama3 has 107 of 128k) are decided by re-encoding the two
//   tokens with bpe_encode_heap: exact without a general replay, and rare in real text (llama3
//   encodes as fast as cl100k in the test). A replay that tracks every merge of both trees
//   would avoid it, at the cost of storing whole merge orders; not worth it at that rate.
// * Split computation runs a quadratic merge loop on each token's bytes, written out here rather
//   than calling bpe_encode_heap, because it must also report the *last* merge. Tokens are short
//   (longest real token: a few hundred bytes), and the whole table builds in a fraction of a
//   second. The test checks its reachability verdict against bpe_encode_heap token by token.
#include "models/bpe_backtrack.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "core/thread_scratch.h"

namespace crayon {

namespace {

constexpr uint32_t kNo = BpeSplits::kNoSplit;

// Bytes of id `id`, or false when token_offsets do not describe a range inside token_bytes.
bool token_span(const BpeTables& t, uint32_t id, const uint8_t** p, uint32_t* len) {
  const uint32_t a = t.token_offsets[id];
  const uint32_t b = t.token_offsets[id + 1];
  if (a > b || b > t.token_bytes_size) return false;
  *p = t.token_bytes + a;
  *len = b - a;
  return true;
}

// Working arrays of split_one, reused across tokens.
struct MergeState {
  std::vector<uint32_t> start;  // start offset of each part, then len
  std::vector<uint32_t> id;     // token of each part
  std::vector<int64_t> pair;    // rank of part k merged with part k + 1, or kNone
};
constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

// Runs BPE (lowest rank, leftmost on ties: bpe_encode_heap's rule) on s[0, len), len >= 2.
// Returns true when it ends in a single part, with that final merge in *l, *r; false when it
// ends in two or more parts (or a byte has no token).
bool split_one(const BpeTables& t, const uint8_t* s, uint32_t len, MergeState& m, uint32_t* l, uint32_t* r) {
  m.start.clear();
  m.id.clear();
  for (uint32_t i = 0; i < len; ++i) {
    const int32_t br = t.byte_rank[s[i]];
    if (br < 0) return false;
    m.start.push_back(i);
    m.id.push_back(static_cast<uint32_t>(br));
  }
  m.start.push_back(len);
  auto pair_rank = [&](size_t k) -> int64_t {
    const int32_t rank = token_rank(t, s + m.start[k], m.start[k + 2] - m.start[k]);
    return rank < 0 ? kNone : rank;
  };
  m.pair.clear();
  for (size_t k = 0; k + 1 < len; ++k) m.pair.push_back(pair_rank(k));
  while (m.id.size() > 1) {
    const size_t best = static_cast<size_t>(std::min_element(m.pair.begin(), m.pair.end()) - m.pair.begin());
    if (m.pair[best] == kNone) return false;  // min_element returns the leftmost minimum
    *l = m.id[best];
    *r = m.id[best + 1];
    m.id[best] = static_cast<uint32_t>(m.pair[best]);
    m.id.erase(m.id.begin() + best + 1);
    m.start.erase(m.start.begin() + best + 1);
    m.pair.erase(m.pair.begin() + best);
    // Only the pairs touching the merged part changed.
    if (best > 0) m.pair[best - 1] = pair_rank(best - 1);
    if (best < m.pair.size()) m.pair[best] = pair_rank(best);
  }
  return true;
}

}  // namespace

BpeSplits compute_bpe_splits(const BpeTables& t) {
  BpeSplits s;
  s.left.assign(t.n_ids, kNo);
  s.right.assign(t.n_ids, kNo);
  MergeState m;
  for (uint32_t id = 0; id < t.n_ids; ++id) {
    const uint8_t* p;
    uint32_t len;
    if (!token_span(t, id, &p, &len) || len == 0) continue;
    if (token_rank(t, p, len) != static_cast<int32_t>(id)) continue;  // not a mergeable token
    if (len == 1) {
      s.left[id] = s.right[id] = id;
      ++s.n_usable;
      continue;
    }
    uint32_t l = kNo, r = kNo;
    if (!split_one(t, p, len, m, &l, &r)) {
      ++s.n_unreachable;
      continue;
    }
    s.left[id] = l;
    s.right[id] = r;
    ++s.n_usable;
  }
  // Precondition P: children of a merge are bytes or have smaller ids. The children were
  // produced by the merge loop, so they are usable, and their split entries are final now.
  // A token breaking P, or with such a token in its merge tree, is marked `slow`: its isolated
  // run does not merge in rank order, so pairs involving it are checked by re-encoding. Children
  // are shorter than their parent, so visiting ids by byte length settles children first.
  std::vector<uint32_t> by_len;
  for (uint32_t id = 0; id < t.n_ids; ++id) {
    if (s.left[id] != kNo && s.left[id] != id) by_len.push_back(id);
  }
  auto len_of = [&](uint32_t id) { return t.token_offsets[id + 1] - t.token_offsets[id]; };
  std::stable_sort(by_len.begin(), by_len.end(), [&](uint32_t a, uint32_t b) { return len_of(a) < len_of(b); });
  std::vector<uint8_t> slow(t.n_ids, 0);
  for (const uint32_t id : by_len) {
    const uint32_t l = s.left[id], r = s.right[id];
    const bool l_ok = s.left[l] == l || l < id;
    const bool r_ok = s.left[r] == r || r < id;
    if (!l_ok || !r_ok) {
      if (s.n_order_violations++ == 0 || id < s.first_violation) s.first_violation = id;
    }
    slow[id] = !l_ok || !r_ok || slow[l] || slow[r];
    s.n_slow += slow[id];
  }
  if (s.n_slow > 0) s.slow = std::move(slow);
  return s;
}

bool validate_bpe_splits(const BpeTables& t, const uint32_t* left, const uint32_t* right) {
  if (left == nullptr || right == nullptr) return false;
  for (uint32_t id = 0; id < t.n_ids; ++id) {
    const uint32_t l = left[id], r = right[id];
    const uint8_t* p;
    uint32_t len;
    if (!token_span(t, id, &p, &len)) return false;
    if (l == kNo && r == kNo) continue;
    if (l == id && r == id) {
      if (len != 1) return false;
      continue;
    }
    if (l >= t.n_ids || r >= t.n_ids) return false;
    if (left[l] == kNo || left[r] == kNo) return false;  // children must be usable
    const uint8_t* lp;
    const uint8_t* rp;
    uint32_t ll, rl;
    if (!token_span(t, l, &lp, &ll) || !token_span(t, r, &rp, &rl)) return false;
    if (ll == 0 || rl == 0 || uint64_t{ll} + rl != len) return false;
  }
  return true;
}

std::vector<PairEntry> build_pair_table(const BpeSplits& s) {
  const uint32_t n = static_cast<uint32_t>(s.left.size());
  uint64_t count = 0;
  for (uint32_t id = 0; id < n; ++id) count += s.left[id] != kNo && s.left[id] != id;
  // Load factor 3/4, and always one empty slot so a probe for a missing pair stops.
  const uint64_t cap = count + count / 3 + 1;
  std::vector<PairEntry> table(cap, PairEntry{kNo, kNo, kNo});
  for (uint32_t id = 0; id < n; ++id) {
    const uint32_t l = s.left[id];
    if (l == kNo || l == id) continue;
    const uint32_t r = s.right[id];
    for (uint64_t i = pair_slot(l, r, cap);; i = i + 1 == cap ? 0 : i + 1) {
      if (table[i].left == l && table[i].right == r) break;  // cannot happen for a real vocabulary
      if (table[i].value == kNo) {
        table[i] = PairEntry{l, r, id};
        break;
      }
    }
  }
  return table;
}

std::vector<uint64_t> build_pair_bloom(const BpeSplits& s) {
  const uint32_t n = static_cast<uint32_t>(s.left.size());
  uint64_t count = 0;
  for (uint32_t id = 0; id < n; ++id) count += s.left[id] != kNo && s.left[id] != id;
  uint64_t words = 1;
  while (words * 64 < count * 10) words <<= 1;
  std::vector<uint64_t> bloom(words, 0);
  const uint64_t mask = words * 64 - 1;
  for (uint32_t id = 0; id < n; ++id) {
    const uint32_t l = s.left[id];
    if (l == kNo || l == id) continue;
    const uint64_t h = pair_hash(pair_key(l, s.right[id]));
    bloom[piece::pair_bloom_word(h, mask)] |= piece::pair_bloom_bits(h);
  }
  return bloom;
}

bool validate_pair_table(uint32_t capacity) { return capacity <= 0x7FFFFFFFu; }

namespace {

// The definition itself: BPE(bytes(a) + bytes(b)) == [a, b].
bool pair_valid_by_encoding(const BpeTables& t, uint32_t a, uint32_t b) {
  thread_local std::vector<uint8_t> buf;
  thread_local std::vector<uint32_t> out;
  const uint8_t* pa;
  const uint8_t* pb;
  uint32_t la, lb;
  if (!token_span(t, a, &pa, &la) || !token_span(t, b, &pb, &lb) || la == 0 || lb == 0) return false;
  buf.assign(pa, pa + la);
  buf.insert(buf.end(), pb, pb + lb);
  out.clear();
  try {
    bpe_encode_heap(t, buf.data(), buf.size(), out);
  } catch (const BpeError&) {
    return false;
  }
  return out.size() == 2 && out[0] == a && out[1] == b;
}

}  // namespace

piece::PieceTables make_piece_tables(const BpeTables& t, const BacktrackTables* bt) {
  piece::PieceTables pt;
  pt.trie_units = reinterpret_cast<const int32_t*>(t.trie.units());
  pt.trie_values = t.trie.values();
  pt.trie_size = t.trie.size();
  pt.n_ids = t.n_ids;
  pt.token_offsets = t.token_offsets;
  for (int b = 0; b < 256; ++b) pt.byte_rank[b] = t.byte_rank[b];
  if (bt != nullptr && bt->split_left != nullptr && bt->split_right != nullptr) {
    pt.split_left = bt->split_left;
    pt.split_right = bt->split_right;
    pt.slow = bt->slow;
    pt.pairs = bt->pairs.entries();
    pt.pair_capacity = bt->pairs.capacity();
    pt.bloom = bt->pairs.bloom();
    pt.bloom_mask = bt->pairs.bloom_mask();
  }
  return pt;
}

namespace {

// The CPU's pair check for piece::encode_backtrack. The check is a pure function of the
// vocabulary and the pair, and real text repeats pairs (suffixes, common stems), so a small
// per-thread memo saves most of the spine walks; pairs of slow tokens are decided by encoding.
struct CpuPairCheck {
  const BpeTables& t;
  const piece::PieceTables& pt;
  uint64_t owner;  // 0: no memo
  BacktrackScratch& sc;

  bool decide(uint32_t a, uint32_t b) const {
    if (piece::pair_is_slow(pt, a, b)) return pair_valid_by_encoding(t, a, b);
    return piece::pair_valid_by_spines(pt, a, b);
  }
  int operator()(uint32_t a, uint32_t b) {
    if (owner == 0 || a >= BacktrackScratch::kMemoIdLimit || b >= BacktrackScratch::kMemoIdLimit) return decide(a, b);
    if (tag == 0) {
      if (sc.memo.empty()) sc.memo.resize(BacktrackScratch::kMemoSize);
      tag = sc.memo_tags.tag_of(owner, [&] { std::fill(sc.memo.begin(), sc.memo.end(), uint64_t{0}); });
    }
    // Bits 0-19 a, 20-39 b, 40-55 the tag, 56 the answer.
    constexpr uint64_t kKey = (uint64_t{1} << 56) - 1;
    const uint64_t key = uint64_t{a} | uint64_t{b} << 20 | uint64_t{tag} << 40;
    uint64_t& m = sc.memo[pair_hash(key) & (BacktrackScratch::kMemoSize - 1)];
    if ((m & kKey) == key) return static_cast<int>(m >> 56);
    const bool valid = decide(a, b);
    m = key | uint64_t{valid} << 56;
    return valid;
  }
  uint16_t tag = 0;  // the tables' tag in sc.memo_tags, looked up at the first memoized pair
};

// piece::encode_* through a caller-sized slice of `out`: n slots, shrunk to what was written, or
// bpe_encode_heap when the piece encoder leaves the piece to the reference.
template <class Encode>
void append_or_reference(const BpeTables& t, const uint8_t* piece, size_t n, std::vector<uint32_t>& out,
                         Encode&& encode) {
  const size_t first = out.size();
  int32_t got = piece::kUseReference;
  if (n <= 0xFFFFFFFFu) {
    out.resize(first + n);
    got = encode(static_cast<uint32_t>(n), out.data() + first);
  }
  if (got < 0) {
    out.resize(first);
    bpe_encode_heap(t, piece, n, out);
  } else {
    out.resize(first + static_cast<size_t>(got));
  }
}

}  // namespace

bool bpe_pair_is_valid(const BpeTables& t, const BacktrackTables& bt, uint32_t a, uint32_t b) {
  if (a >= t.n_ids || b >= t.n_ids) return false;
  const piece::PieceTables pt = make_piece_tables(t, &bt);
  if (pt.split_left == nullptr) return false;
  thread_local BacktrackScratch unused;
  return CpuPairCheck{t, pt, 0, unused}.decide(a, b);
}

uint64_t new_memo_owner() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void bpe_encode_backtrack(const BpeTables& t, const BacktrackTables& bt, const uint8_t* piece, size_t n,
                          std::vector<uint32_t>& out, BacktrackScratch& sc) {
  const piece::PieceTables pt = make_piece_tables(t, &bt);
  CpuPairCheck check{t, pt, bt.memo_owner, sc};
  append_or_reference(t, piece, n, out, [&](uint32_t len, uint32_t* dst) {
    sc.dead_end_free.resize(piece::dead_end_words(len));
    return piece::encode_backtrack(pt, piece, len, dst, sc.dead_end_free.data(), check);
  });
}

std::vector<uint32_t> build_byte_pairs(const piece::PieceTables& pt) {
  std::vector<uint32_t> pairs;
  if (pt.pairs == nullptr || pt.pair_capacity == 0) return pairs;
  pairs.assign(256 * 256, piece::kNoSplit);
  for (int a = 0; a < 256; ++a) {
    if (pt.byte_rank[a] < 0) continue;
    for (int b = 0; b < 256; ++b) {
      if (pt.byte_rank[b] < 0) continue;
      const uint32_t ra = static_cast<uint32_t>(pt.byte_rank[a]), rb = static_cast<uint32_t>(pt.byte_rank[b]);
      const uint32_t c = piece::pair_find(pt, ra, rb);
      pairs[static_cast<size_t>(a) * 256 + static_cast<size_t>(b)] = c < pt.n_ids ? c : piece::kNoSplit;
    }
  }
  return pairs;
}

int32_t encode_small_pairs(const piece::PieceTables& pt, const uint32_t* byte_pairs, const uint8_t* piece, uint32_t n,
                           uint32_t* out) {
  using piece::kNoSplit;
  if (n == 0 || n > piece::kSmallPiece) return piece::kUseReference;
  uint32_t id[piece::kSmallPiece];      // part i's token
  uint32_t merged[piece::kSmallPiece];  // the token parts i and i + 1 merge into, or kNoSplit
  for (uint32_t i = 0; i < n; ++i) {
    const int32_t r = pt.byte_rank[piece[i]];
    if (r < 0) return piece::kUseReference;
    id[i] = static_cast<uint32_t>(r);
  }
  for (uint32_t i = 0; i + 1 < n; ++i) merged[i] = byte_pairs[uint32_t{piece[i]} << 8 | piece[i + 1]];
  // A pair's merge, or kNoSplit. A merge into an id out of range (only a damaged table gives
  // one) counts as none: the ids may then be wrong, never out of range.
  auto pair = [&](uint32_t a, uint32_t b) {
    const uint32_t c = piece::pair_find(pt, a, b);
    return c < pt.n_ids ? c : kNoSplit;
  };
  uint32_t m = n;
  while (m > 1) {
    const uint32_t best = piece::least_position(merged, m - 1);
    const uint32_t c = merged[best];
    if (c == kNoSplit) break;
    id[best] = c;
    for (uint32_t i = best + 1; i + 1 < m; ++i) id[i] = id[i + 1];
    for (uint32_t i = best; i + 2 < m; ++i) merged[i] = merged[i + 1];
    --m;
    if (best > 0) merged[best - 1] = pair(id[best - 1], c);
    if (best + 1 < m) merged[best] = pair(c, id[best + 1]);
  }
  std::memcpy(out, id, m * sizeof(uint32_t));
  return static_cast<int32_t>(m);
}

void bpe_encode_multi(const BpeTables& t, const piece::PieceTables& pt, uint64_t memo_owner, const uint8_t* piece,
                      size_t n, std::vector<uint32_t>& out, const uint32_t* byte_pairs) {
  if (byte_pairs != nullptr && n <= piece::kSmallPiece && piece::is_mostly_ascii(piece, n)) {
    return append_or_reference(t, piece, n, out, [&](uint32_t len, uint32_t* dst) {
      return encode_small_pairs(pt, byte_pairs, piece, len, dst);
    });
  }
  BacktrackScratch& sc = thread_scratch<BacktrackScratch>();
  CpuPairCheck check{t, pt, memo_owner, sc};
  append_or_reference(t, piece, n, out, [&](uint32_t len, uint32_t* dst) {
    if (sc.dead_end_free.size() < piece::dead_end_words(len)) sc.dead_end_free.resize(piece::dead_end_words(len));
    return piece::encode_multi(pt, piece, len, dst, sc.dead_end_free.data(), check);
  });
}

}  // namespace crayon
