#include "models/hf_bpe.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <queue>
#include <stdexcept>

#include "models/bpe_backtrack.h"  // pair_slot: the fixed pair hash shared with the pair table
#include "engines/tiktoken_engine.h"
#include "core/thread_scratch.h"
#include "core/utf8.h"

namespace crayon {

std::vector<HfMergeEntry> build_hf_merge_table(const std::vector<HfMerge>& merges) {
  if (merges.size() >= 0x7FFFFFFFu) throw std::length_error("too many merges");
  const uint64_t capacity = std::max<uint64_t>(8, merges.size() + merges.size() / 3 + 1);
  std::vector<HfMergeEntry> table(capacity, HfMergeEntry{0, 0, HfMergeEntry::kEmpty, 0});
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const HfMerge& m = merges[rank];
    uint64_t slot = pair_slot(m.left, m.right, capacity);
    while (table[slot].rank != HfMergeEntry::kEmpty &&
           (table[slot].left != m.left || table[slot].right != m.right)) {
      slot = slot + 1 == capacity ? 0 : slot + 1;
    }
    table[slot] = HfMergeEntry{m.left, m.right, static_cast<uint32_t>(rank), m.merged};
  }
  return table;
}

HfBpeModel::HfBpeModel(DoubleArrayView vocab, const HfMergeEntry* merges, uint64_t merge_capacity,
                       const uint8_t* self_encodes, uint32_t n_ids, HfBpeOptions options,
                       HfSegmentation segmentation)
    : vocab_(vocab),
      merges_(merges),
      merge_capacity_(merge_capacity),
      self_encodes_(self_encodes),
      n_ids_(n_ids),
      options_(std::move(options)) {
  plain_symbols_ = options_.prefix.empty() && options_.suffix.empty();
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    symbol_[0][b] = lookup(byte + options_.suffix);
    symbol_[1][b] = lookup(byte);
    symbol_[2][b] = lookup(options_.prefix + byte);
    symbol_[3][b] = lookup(options_.prefix + byte + options_.suffix);
  }
  if (options_.unk_id >= 0 && static_cast<uint32_t>(options_.unk_id) >= n_ids_) options_.unk_id = -1;
  all_bytes_ = true;
  for (int b = 0; b < 256; ++b) {
    static const char* kHex = "0123456789ABCDEF";
    const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    byte_token_[b] = options_.char_level && options_.byte_fallback ? lookup(name) : -1;
    all_bytes_ &= byte_token_[b] >= 0;
  }
  // Segmenting is exact only when no character can be dropped (see the top of hf_bpe.h).
  const bool never_drops = options_.unk_id >= 0 || all_bytes_;
  if (options_.char_level && segmentation.enabled && plain_symbols_ && !options_.ignore_merges && never_drops &&
      lookup("\xE2\x96\x81") >= 0) {
    seg_ = segmentation;
    for (int c = 0; c < 128; ++c) {
      ascii_cut_[c] = symbol_[1][c] >= 0 && !std::binary_search(seg_.glue, seg_.glue + seg_.n_glue, uint32_t(c));
    }
  }
}

void HfBpeModel::prepare() {
  if (fast_ != nullptr && n_ranks_ > 0) {
    // The longest tail of ranks whose ids follow them one for one. Every entry is an id < n_ids
    // (checked before this runs), so an id computed from the step is one of them.
    const uint32_t last = n_ranks_ - 1;
    const uint32_t step = rank_to_id_[last] - last;
    uint32_t from = last;
    while (from > 0 && rank_to_id_[from - 1] == from - 1 + step) --from;
    rank_step_from_ = from;
    rank_step_ = step;
  }
  if (seg_.enabled) {
    // Tokens some merge uses (as either side); an ASCII character whose one symbol is none of them
    // never merges with anything. An unknown one without byte fallback would become unk, whose
    // fusion with its neighbours a cut would change: those stay uncut.
    std::vector<bool> merged(n_ids_, false);
    for (uint64_t i = 0; i < merge_capacity_; ++i) {
      const HfMergeEntry& e = merges_[i];
      if (e.rank == HfMergeEntry::kEmpty) continue;
      if (e.left < n_ids_) merged[e.left] = true;
      if (e.right < n_ids_) merged[e.right] = true;
    }
    for (int c = 0; c < 128; ++c) {
      const int32_t symbol = symbol_[1][c] >= 0 ? symbol_[1][c] : byte_token_[c];
      ascii_inert_[c] = symbol >= 0 && !merged[static_cast<uint32_t>(symbol)];
    }
  }
}

void HfBpeModel::set_fast_path(const TiktokenEngine* engine, const uint32_t* rank_to_id, uint32_t n_ranks,
                               bool spells_all) {
  fast_ = engine;
  fast_spells_all_ = spells_all;
  rank_to_id_ = rank_to_id;
  n_ranks_ = n_ranks;
  fast_needs_check_ = false;
  for (int b = 0; b < 256; ++b) {
    // Plain symbols: no prefix, no suffix. A character vocabulary's ranks cover every byte, and
    // a character it lacks shows in the answer instead (kSyntheticRank, see encode_fast).
    byte_missing_[b] = !options_.char_level && symbol_[1][b] < 0;
    fast_needs_check_ |= byte_missing_[b];
  }
}

int32_t HfBpeModel::lookup(const std::string& key) const {
  if (vocab_.size() == 0) return -1;
  const int32_t v = vocab_.find(reinterpret_cast<const uint8_t*>(key.data()), key.size());
  return (v >= 0 && static_cast<uint32_t>(v) < n_ids_) ? v : -1;
}

const HfMergeEntry* HfBpeModel::find_merge(uint32_t left, uint32_t right) const {
  if (merge_capacity_ == 0) return nullptr;
  uint64_t slot = pair_slot(left, right, merge_capacity_);
  for (uint64_t probes = 0; probes < merge_capacity_; ++probes) {
    const HfMergeEntry& e = merges_[slot];
    if (e.rank == HfMergeEntry::kEmpty) return nullptr;
    if (e.left == left && e.right == right) return e.merged < n_ids_ ? &e : nullptr;
    slot = slot + 1 == merge_capacity_ ? 0 : slot + 1;
  }
  return nullptr;
}

bool HfBpeModel::may_end_word(const uint8_t* c, size_t n) const {
  if (n == 1) return c[0] < 0x80 && ascii_cut_[c[0]];
  const utf8::Decoded d = utf8::decode(c, c + n);
  if (d.cp == utf8::kInvalid || d.len != n) return false;
  const int32_t id = vocab_.find(c, n);
  return id >= 0 && static_cast<uint32_t>(id) < n_ids_ &&
         !std::binary_search(seg_.glue, seg_.glue + seg_.n_glue, d.cp);
}

bool HfBpeModel::cut_before(const uint8_t* piece, size_t pos) const {
  size_t k = pos - 1;
  while (k > 0 && (piece[k] & 0xC0) == 0x80) --k;
  return may_end_word(piece + k, pos - k);
}

void HfBpeModel::encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  if (n == 0) return;
  if (!seg_.enabled) {
    encode_cached(piece, n, out);
    return;
  }
  // Words of a sentence: cut before every U+2581 (E2 96 81) that nothing merges across, and on
  // both sides of every inert character.
  size_t start = 0;
  auto emit = [&](size_t end) {
    const size_t first = out.size();
    encode_cached(piece + start, end - start, out);
    for (size_t i = first; i < out.size(); ++i) {
      out[i].start += static_cast<uint32_t>(start);
      out[i].end += static_cast<uint32_t>(start);
    }
    start = end;
  };
  bool after_inert = false;  // the previous character is inert
  for (size_t pos = 0; pos < n;) {
    const uint8_t b = piece[pos];
    const bool here_inert = inert(b);
    if (pos > start && (here_inert || after_inert ||
                        (b == 0xE2 && pos + 3 <= n && piece[pos + 1] == 0x96 && piece[pos + 2] == 0x81 &&
                         cut_before(piece, pos)))) {
      emit(pos);
    }
    after_inert = here_inert;
    pos += b < 0x80 ? 1 : std::max<size_t>(1, utf8::decode(piece + pos, piece + n).len);
  }
  emit(n);
}

void HfBpeModel::encode_cached(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  if (n == 0) return;
  auto uncached = [this](const uint8_t* p, size_t k, std::vector<HfToken>& o) { encode_word_uncached(p, k, o); };
  // The backtracking encoder is faster than a cache probe (measured); the cache serves the merge
  // loop and the whole-token lookups in front of it.
  if (fast_ != nullptr) {
    uncached(piece, n, out);
  } else {
    cache_.encode(piece, n, out, uncached);
  }
}

void HfBpeModel::encode_word_uncached(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  // (With the fast path the tiktoken engine makes the whole-token check itself.)
  if (lookup_before_fast() || (plain_symbols_ && self_encodes_ != nullptr && fast_ == nullptr)) {
    const int32_t id = vocab_.find(piece, n);
    if (id >= 0 && static_cast<uint32_t>(id) < n_ids_ &&
        (options_.ignore_merges ||
         (plain_symbols_ && self_encodes_ != nullptr && (self_encodes_[id >> 3] >> (id & 7)) & 1))) {
      out.push_back(HfToken{static_cast<uint32_t>(id), 0, static_cast<uint32_t>(n)});
      return;
    }
  }
  bool fast = fast_ != nullptr;
  if (fast && fast_needs_check_) {
    for (size_t i = 0; i < n && fast; ++i) fast = !byte_missing_[piece[i]];
  }
  if (fast && encode_fast(piece, n, out)) return;
  encode_word_merging(piece, n, out);
}

// The symbols of a word during merging: a doubly linked list over the initial positions.
struct Symbols {
  std::vector<uint32_t> id;
  std::vector<uint32_t> len;    // bytes of the characters this symbol stands for
  std::vector<uint32_t> units;  // the same characters' length in the byte-level string
  std::vector<int32_t> prev;
  std::vector<int32_t> next;

  void clear() { id.clear(); len.clear(); units.clear(); prev.clear(); next.clear(); }
  void add(uint32_t token, uint32_t len_bytes, uint32_t len_units) {
    const int32_t i = static_cast<int32_t>(id.size());
    id.push_back(token);
    len.push_back(len_bytes);
    units.push_back(len_units);
    prev.push_back(i - 1);
    next.push_back(-1);
    if (i > 0) next[i - 1] = i;
  }
  size_t size() const { return id.size(); }
};

// encode_fast's working memory (see core/thread_scratch.h).
struct FastScratch {
  std::vector<uint32_t> ranks;
  Symbols run;
};

namespace {

// UTF-8 length of the byte-level stand-in for byte b: printable ASCII stands for itself.
uint32_t stand_in_units(uint8_t b) { return (b >= 0x21 && b <= 0x7E) ? 1 : 2; }

struct HeapItem {
  uint32_t rank;
  int32_t pos;
  uint32_t merged;
  bool operator>(const HeapItem& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

// Below this many symbols a rescan per merge is cheaper than a heap (measured: 24 beat 12 and 48 on
// Chinese and English with the merge memo below).
constexpr size_t kScanLimit = 24;

}  // namespace

// Bytes to symbols, with tokenizers' unk handling: a run of unknown bytes becomes one pending unk
// that is flushed before the next known symbol (fused into one when fuse_unk).
bool HfBpeModel::byte_symbols(const uint8_t* piece, size_t n, Symbols& sym) const {
  bool dropped = false;
  bool unk_pending = false;
  uint32_t unk_len = 0, unk_units = 0;
  for (size_t i = 0; i < n; ++i) {
    const int which = n == 1 ? 0 : (i == 0 ? 1 : (i + 1 == n ? 3 : 2));
    const int32_t id = symbol_[which][piece[i]];
    const uint32_t units = stand_in_units(piece[i]);
    if (id >= 0) {
      if (unk_pending) {
        sym.add(static_cast<uint32_t>(options_.unk_id), unk_len, unk_units);
        unk_pending = false;
      }
      sym.add(static_cast<uint32_t>(id), 1, units);
    } else if (options_.unk_id >= 0) {
      if (unk_pending && options_.fuse_unk) {
        unk_len += 1;
        unk_units += units;
      } else {
        if (unk_pending) sym.add(static_cast<uint32_t>(options_.unk_id), unk_len, unk_units);
        unk_pending = true;
        unk_len = 1;
        unk_units = units;
      }
    } else {
      dropped = true;
    }
  }
  if (unk_pending) sym.add(static_cast<uint32_t>(options_.unk_id), unk_len, unk_units);
  return dropped;
}

// Characters to symbols, as tokenizers' BPE::merge_word: a known character (with its prefix and
// suffix) is one symbol; an unknown one becomes its <0xXX> byte tokens when byte_fallback has all
// of them (without flushing a pending unk: tokenizers adds them first), else joins the pending
// unk as in byte_symbols. Invalid UTF-8 (never in tokenizers' input) walks one byte at a time.
bool HfBpeModel::char_symbols(const uint8_t* piece, size_t n, Symbols& sym) const {
  bool dropped = false;
  bool unk_pending = false;
  uint32_t unk_len = 0;
  thread_local std::string tl_key;
  std::string& key = tl_key;
  for (size_t i = 0; i < n;) {
    const uint32_t len = piece[i] < 0x80 ? 1 : utf8::decode(piece + i, piece + n).len;
    int32_t id;
    const uint8_t* kp = piece + i;
    size_t kn = len;
    if (plain_symbols_) {
      id = len == 1 ? symbol_[1][piece[i]] : vocab_.find(piece + i, len);
      if (id >= 0 && static_cast<uint32_t>(id) >= n_ids_) id = -1;
    } else {
      key.clear();
      if (i > 0) key += options_.prefix;
      key.append(reinterpret_cast<const char*>(piece + i), len);
      if (i + len == n) key += options_.suffix;
      id = lookup(key);
      kp = reinterpret_cast<const uint8_t*>(key.data());
      kn = key.size();
    }
    i += len;
    if (id >= 0) {
      if (unk_pending) {
        sym.add(static_cast<uint32_t>(options_.unk_id), unk_len, unk_len);
        unk_pending = false;
      }
      sym.add(static_cast<uint32_t>(id), len, len);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (size_t k = 0; k < kn && all; ++k) all = byte_token_[kp[k]] >= 0;
      if (all) {
        for (size_t k = 0; k < kn; ++k) sym.add(static_cast<uint32_t>(byte_token_[kp[k]]), 1, 1);
        continue;
      }
    }
    if (options_.unk_id >= 0) {
      if (unk_pending && options_.fuse_unk) {
        unk_len += len;
      } else {
        if (unk_pending) sym.add(static_cast<uint32_t>(options_.unk_id), unk_len, unk_len);
        unk_pending = true;
        unk_len = len;
      }
    } else {
      dropped = true;
    }
  }
  if (unk_pending) sym.add(static_cast<uint32_t>(options_.unk_id), unk_len, unk_len);
  return dropped;
}

namespace {

// A per-thread memo of merge-table lookups, (left, right) -> (rank, merged) or none, in front of
// find_merge. The table is megabytes (Llama 3's 280k merges: 6 MiB) and every probe of the merge
// loop is a likely cache miss, while the pairs a thread meets repeat heavily (the bytes of
// common CJK characters, frequent word parts). Measured on new text: llama3_1 Chinese 6 -> 9.5
// MiB/s, mistral Chinese 28 -> 50, mistral English 17 -> 25 (2^11 to 2^17 entries tried).
// Exact: an entry holds what find_merge returned for that pair of that model (its tag, unique for
// the process's lifetime, is part of the key), and the tables behind it are read-only.
// Memory: 2^kBits * 24 bytes per thread (768 KiB), allocated on a thread's first merge loop.
struct MergeMemo {
  struct Entry {
    uint64_t pair = 0;
    uint64_t owner = 0;  // 0: empty
    uint32_t rank = 0;   // HfMergeEntry::kEmpty: the pair does not merge
    uint32_t merged = 0;
  };
  static constexpr unsigned kBits = 15;
  std::unique_ptr<Entry[]> entries{new Entry[size_t{1} << kBits]()};
};

// A pair's merge as the loop needs it: rank (kEmpty: none) and the merged id, held by value so
// that scanning for the lowest rank reads a small array, not entries all over the merge table.
struct PairMerge {
  uint32_t rank = HfMergeEntry::kEmpty;
  uint32_t merged = 0;
};

}  // namespace

bool HfBpeModel::encode_fast(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  FastScratch& scratch = thread_scratch<FastScratch>();
  std::vector<uint32_t>& ranks = scratch.ranks;
  ranks.clear();
  fast_->encode_piece(piece, n, ranks);
  const size_t first = out.size();
  auto give_up = [&] {
    out.resize(first);
    return false;
  };
  uint32_t start = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const uint32_t r = ranks[i];
    const uint32_t len = r < n_ranks_ ? fast_->token_length(r) : 0;
    if (len == 0 || len > n - start) return give_up();  // only a damaged file gets here
    if (rank_to_id_[r] != kSyntheticRank) {
      out.push_back(HfToken{rank_to_id_[r], start, start + len});
      start += len;
      continue;
    }
    // Characters the vocabulary lacks (build_fast_path): nothing merges with their <0xXX>
    // tokens or unk, so they are exactly char_symbols' symbols. A character dropped instead
    // (no unk, no complete byte fallback) shifts every later offset of the word: the merge loop
    // takes the whole word then.
    const uint32_t from = start;
    for (; i < ranks.size() && ranks[i] < n_ranks_ && rank_to_id_[ranks[i]] == kSyntheticRank; ++i) {
      const uint32_t k = fast_->token_length(ranks[i]);
      if (k == 0 || k > n - start) return give_up();
      start += k;
    }
    --i;
    Symbols& run = scratch.run;
    run.clear();
    if (char_symbols(piece + from, start - from, run)) return give_up();
    uint32_t at = from;
    for (size_t k = 0; k < run.size(); ++k) {
      out.push_back(HfToken{run.id[k], at, at + run.len[k]});
      at += run.len[k];
    }
  }
  if (start != n) return give_up();
  return true;
}

void HfBpeModel::encode_word_ids(const uint8_t* word, size_t n, std::vector<uint32_t>& ids) const {
  if (n == 0) return;
  const size_t first = ids.size();
  if (fast_ != nullptr && all_bytes_ && plain_symbols_ && !lookup_before_fast()) {
    fast_->encode_piece(word, n, ids);
    size_t i = first;
    for (; i < ids.size(); ++i) {
      const uint32_t r = ids[i];
      if (r >= n_ranks_) break;  // only a damaged file gets here: encode_one_word decides
      const uint32_t id = id_of_rank(r);
      if (id == kSyntheticRank) break;
      ids[i] = id;
    }
    if (i == ids.size()) return;
    // A character the vocabulary lacks (rare): char_symbols gives each of its bytes' <0xXX>
    // tokens (all_bytes_), and its synthetic ranks spell those bytes in order.
    FastScratch& scratch = thread_scratch<FastScratch>();
    std::vector<uint32_t>& tail = scratch.ranks;
    tail.assign(ids.begin() + static_cast<std::ptrdiff_t>(i), ids.end());
    ids.resize(i);
    auto expand = [&] {
      for (const uint32_t r : tail) {
        if (r >= n_ranks_) return false;
        if (id_of_rank(r) != kSyntheticRank) {
          ids.push_back(id_of_rank(r));
          continue;
        }
        std::string_view bytes;
        if (!fast_->token_bytes(r, &bytes) || bytes.empty()) return false;
        for (const char b : bytes) ids.push_back(static_cast<uint32_t>(byte_token_[static_cast<uint8_t>(b)]));
      }
      return true;
    };
    if (expand()) return;
    ids.resize(first);
  }
  thread_local std::vector<HfToken> tl_tokens;
  std::vector<HfToken>& tokens = tl_tokens;
  tokens.clear();
  encode_one_word(word, n, tokens);
  for (const HfToken& t : tokens) {
    if (t.end > t.start && t.end <= n) ids.push_back(t.id);  // (a damaged model's empty tokens: as emit_rewritten)
  }
}

void HfBpeModel::encode_word_merging(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  Symbols& sym = thread_scratch<Symbols>();  // (see core/thread_scratch.h)
  sym.clear();
  MergeMemo::Entry* const memo = thread_scratch<MergeMemo>().entries.get();
  const uint64_t owner = cache_.owner();
  auto merge_of = [&](uint32_t left, uint32_t right) {
    const uint64_t pair = uint64_t{left} << 32 | right;
    MergeMemo::Entry& e = memo[((pair * 0x9E3779B97F4A7C15ull) ^ owner) >> (64 - MergeMemo::kBits)];
    if (e.pair != pair || e.owner != owner) {
      const HfMergeEntry* m = find_merge(left, right);
      e = MergeMemo::Entry{pair, owner, m != nullptr ? m->rank : HfMergeEntry::kEmpty, m != nullptr ? m->merged : 0};
    }
    return PairMerge{e.rank, e.merged};
  };

  const bool dropped = options_.char_level ? char_symbols(piece, n, sym) : byte_symbols(piece, n, sym);
  if (sym.size() == 0) return;

  auto merge_at = [&](int32_t pos, uint32_t merged) {
    const int32_t nx = sym.next[pos];
    sym.id[pos] = merged;
    sym.len[pos] += sym.len[nx];
    sym.units[pos] += sym.units[nx];
    sym.next[pos] = sym.next[nx];
    if (sym.next[nx] >= 0) sym.prev[sym.next[nx]] = pos;
    sym.id[nx] = HfMergeEntry::kEmpty;  // removed
  };

  if (sym.size() <= kScanLimit) {
    // Rescan: the lowest-rank mergeable pair, leftmost on ties, until none is left. The merge of
    // each adjacent pair is looked up once and only the two pairs next to a merge are refreshed.
    thread_local std::vector<PairMerge> pair;
    std::vector<PairMerge>& pr = pair;
    pr.assign(sym.size(), PairMerge{});
    for (size_t i = 0; i + 1 < sym.size(); ++i) pr[i] = merge_of(sym.id[i], sym.id[i + 1]);
    for (;;) {
      int32_t best = -1;
      uint32_t best_rank = HfMergeEntry::kEmpty;
      for (int32_t i = 0; i >= 0; i = sym.next[i]) {
        if (pr[i].rank < best_rank) {
          best = i;
          best_rank = pr[i].rank;
        }
      }
      if (best < 0) break;
      merge_at(best, pr[best].merged);
      const int32_t p = sym.prev[best], nx = sym.next[best];
      if (p >= 0) pr[p] = merge_of(sym.id[p], sym.id[best]);
      pr[best] = nx >= 0 ? merge_of(sym.id[best], sym.id[nx]) : PairMerge{};
    }
  } else {
    std::priority_queue<HeapItem, std::vector<HeapItem>, std::greater<HeapItem>> heap;
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) {
      const PairMerge m = merge_of(sym.id[i], sym.id[i + 1]);
      if (m.rank != HfMergeEntry::kEmpty) heap.push({m.rank, i, m.merged});
    }
    while (!heap.empty()) {
      const HeapItem top = heap.top();
      heap.pop();
      if (sym.id[top.pos] == HfMergeEntry::kEmpty || sym.next[top.pos] < 0) continue;
      // Stale when the pair at this position has changed since the entry was pushed.
      const PairMerge m = merge_of(sym.id[top.pos], sym.id[sym.next[top.pos]]);
      if (m.rank == HfMergeEntry::kEmpty || m.merged != top.merged || m.rank != top.rank) continue;
      merge_at(top.pos, top.merged);
      if (sym.prev[top.pos] >= 0) {
        const int32_t p = sym.prev[top.pos];
        const PairMerge pm = merge_of(sym.id[p], sym.id[top.pos]);
        if (pm.rank != HfMergeEntry::kEmpty) heap.push({pm.rank, p, pm.merged});
      }
      if (sym.next[top.pos] >= 0) {
        const PairMerge nm = merge_of(sym.id[top.pos], sym.id[sym.next[top.pos]]);
        if (nm.rank != HfMergeEntry::kEmpty) heap.push({nm.rank, top.pos, nm.merged});
      }
    }
  }

  if (!dropped || options_.char_level) {
    // Running sums of the symbols' lengths, as tokenizers' Word::add places them (for character
    // vocabularies also after a dropped character: everything after it shifts left).
    uint32_t offset = 0;
    for (int32_t i = 0; i >= 0; i = sym.next[i]) {
      out.push_back(HfToken{sym.id[i], offset, offset + sym.len[i]});
      offset += sym.len[i];
    }
    return;
  }
  // Some bytes had no symbol (and there is no unk token). tokenizers then still places tokens by
  // running sums of their characters' lengths in the byte-level *string* (where a stand-in
  // character is 1 or 2 bytes of UTF-8), so everything after a dropped byte shifts left; the
  // offsets then go through the string's alignment, one stand-in per original byte. Reproduce
  // that: sum lengths in those units, then map each end back to the byte whose stand-in holds it.
  thread_local std::vector<uint32_t> tl_unit_start;
  std::vector<uint32_t>& unit_start = tl_unit_start;  // stand-in of byte k starts at unit_start[k]
  unit_start.resize(n + 1);
  unit_start[0] = 0;
  for (size_t k = 0; k < n; ++k) unit_start[k + 1] = unit_start[k] + stand_in_units(piece[k]);
  auto byte_at = [&](uint32_t unit) {  // the byte whose stand-in contains `unit`
    return static_cast<uint32_t>(std::upper_bound(unit_start.begin(), unit_start.end(), unit) - unit_start.begin() - 1);
  };
  uint32_t offset = 0;
  for (int32_t i = 0; i >= 0; i = sym.next[i]) {
    const uint32_t units = sym.units[i];
    out.push_back(HfToken{sym.id[i], byte_at(offset), byte_at(offset + units - 1) + 1});
    offset += units;
  }
}

std::vector<uint32_t> compute_glue(const std::vector<HfMerge>& merges, const std::vector<std::string>& token_bytes,
                                   bool* ok) {
  std::vector<uint32_t> glue;
  *ok = true;
  static constexpr char kMark[] = "\xE2\x96\x81";  // U+2581
  for (const HfMerge& m : merges) {
    if (m.left >= token_bytes.size() || m.right >= token_bytes.size()) continue;
    const std::string& right = token_bytes[m.right];
    if (right.compare(0, 3, kMark) != 0) continue;
    const std::string& left = token_bytes[m.left];
    size_t k = left.size();
    if (k == 0) {
      *ok = false;
      return {};
    }
    do --k; while (k > 0 && (static_cast<uint8_t>(left[k]) & 0xC0) == 0x80);
    const auto* p = reinterpret_cast<const uint8_t*>(left.data());
    const utf8::Decoded d = utf8::decode(p + k, p + left.size());
    if (d.cp == utf8::kInvalid || k + d.len != left.size()) {
      *ok = false;
      return {};
    }
    glue.push_back(d.cp);
  }
  std::sort(glue.begin(), glue.end());
  glue.erase(std::unique(glue.begin(), glue.end()), glue.end());
  return glue;
}

std::vector<uint8_t> compute_self_encodes(const HfBpeModel& model,
                                          const std::vector<std::string>& token_bytes) {
  std::vector<uint8_t> bits((model.n_ids() + 7) / 8, 0);
  std::vector<HfToken> out;
  for (uint32_t id = 0; id < model.n_ids() && id < token_bytes.size(); ++id) {
    const std::string& b = token_bytes[id];
    if (b.empty()) continue;
    out.clear();
    model.encode_word_merging(reinterpret_cast<const uint8_t*>(b.data()), b.size(), out);
    if (out.size() == 1 && out[0].id == id) bits[id >> 3] |= static_cast<uint8_t>(1u << (id & 7));
  }
  return bits;
}

}  // namespace crayon
