#include "models/unigram.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

namespace crayon {

namespace {

constexpr uint32_t kUnreached = 0xFFFFFFFFu;

// The best path found so far that ends at one byte position of the piece.
struct Best {
  double score;
  uint32_t start;  // where its last node starts; kUnreached until some node ends here
  uint32_t id;     // that node's id (unk_id for an unknown character)
};

// Bytes of the character led by `lead` (1 for a stray continuation byte, as a scanner must move).
size_t char_len(uint8_t lead) { return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

}  // namespace

UnigramModel::UnigramModel(DoubleArrayView vocab, const double* scores, uint32_t n_ids, UnigramOptions options)
    : vocab_(vocab), scores_(scores), n_ids_(n_ids), options_(options) {
  if (options_.unk_id < -1 || (options_.unk_id >= 0 && static_cast<uint32_t>(options_.unk_id) >= n_ids_)) {
    throw std::invalid_argument("Unigram: unk_id is not a vocabulary id");
  }
  if (n_ids_ > 0 && scores_ == nullptr) throw std::invalid_argument("Unigram: no scores");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_id_[b] = lookup(reinterpret_cast<const uint8_t*>(name), 6);
  }
}

void UnigramModel::prepare() {
  // As tokenizers: start at +inf, take every strictly smaller score, in id order.
  min_score_ = std::numeric_limits<double>::infinity();
  for (uint32_t id = 0; id < n_ids_; ++id) {
    if (scores_[id] < min_score_) min_score_ = scores_[id];
  }
  unk_score_ = min_score_ - 10.0;
}

int64_t UnigramModel::lookup(const uint8_t* s, size_t n) const {
  if (vocab_.size() == 0) return -1;
  const int32_t v = vocab_.find(s, n);
  return v >= 0 && static_cast<uint32_t>(v) < n_ids_ ? v : -1;
}

void UnigramModel::emit_unknown(const uint8_t* piece, uint32_t start, uint32_t end,
                                std::vector<HfToken>& out) const {
  const int64_t id = lookup(piece + start, end - start);
  if (id >= 0) {  // the run spells a token (or is one token whose id is unk_id)
    out.push_back({static_cast<uint32_t>(id), start, end});
    return;
  }
  if (options_.byte_fallback) {
    bool all = true;
    for (uint32_t i = start; i < end && all; ++i) all = byte_id_[piece[i]] >= 0;
    if (all) {
      for (uint32_t i = start; i < end; ++i) {
        out.push_back({static_cast<uint32_t>(byte_id_[piece[i]]), start, end});
      }
      return;
    }
  }
  if (options_.unk_id < 0) throw UnigramMissingUnk();
  out.push_back({static_cast<uint32_t>(options_.unk_id), start, end});
}

void UnigramModel::encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  // Results with a byte-fallback run (repeated offsets) are not kept.
  cache_.encode(piece, n, out, [this](const uint8_t* p, size_t k, std::vector<HfToken>& o) { encode_word_uncached(p, k, o); });
}

void UnigramModel::encode_word_uncached(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  if (n == 0) return;
  // Viterbi: best[e] is the best path over piece[0, e); see the header for the order of offers.
  thread_local std::vector<Best> tl_best;
  std::vector<Best>& best = tl_best;
  if (best.size() < n + 1) best.resize(n + 1);
  std::fill(best.begin(), best.begin() + static_cast<std::ptrdiff_t>(n + 1), Best{0.0, kUnreached, 0});
  const bool have_trie = vocab_.size() != 0;
  for (size_t s = 0; s < n;) {
    const size_t len = std::min(char_len(piece[s]), n - s);
    const double here = best[s].score;
    bool single = false;
    int32_t node = have_trie ? DoubleArrayView::kRoot : -1;
    for (size_t i = s; i < n && node >= 0; ++i) {
      node = vocab_.child(node, piece[i]);
      if (node < 0) break;
      const uint32_t id = static_cast<uint32_t>(vocab_.value_at(node));  // -1 wraps past n_ids
      if (id >= n_ids_) continue;
      const double offer = scores_[id] + here;
      Best& t = best[i + 1];
      if (t.start == kUnreached || offer > t.score) t = Best{offer, static_cast<uint32_t>(s), id};
      single |= i + 1 - s == len;
    }
    if (!single) {
      Best& t = best[s + len];
      const double offer = unk_score_ + here;
      if (t.start == kUnreached || offer > t.score) {
        if (options_.unk_id < 0) throw UnigramMissingUnk();
        t = Best{offer, static_cast<uint32_t>(s), static_cast<uint32_t>(options_.unk_id)};
      }
    }
    s += len;
  }

  // Back-trace: the ends of the path's nodes, back to front. Every character end is reached (by
  // its own token or by unk), so the path reaches 0.
  thread_local std::vector<uint32_t> tl_ends;
  std::vector<uint32_t>& ends = tl_ends;
  ends.clear();
  for (size_t e = n; e > 0; e = best[e].start) {
    if (best[e].start >= e) throw std::logic_error("Unigram: broken Viterbi path");
    ends.push_back(static_cast<uint32_t>(e));
  }

  // Front to back: nodes as they are, maximal runs of unk-id nodes fused and looked up again.
  const uint32_t unk = static_cast<uint32_t>(options_.unk_id);  // 0xFFFFFFFF (no id) when -1
  uint32_t start = 0;
  for (size_t k = ends.size(); k > 0;) {
    uint32_t end = ends[--k];
    const uint32_t id = best[end].id;
    if (id != unk) {
      out.push_back({id, start, end});
    } else {
      while (k > 0 && best[ends[k - 1]].id == unk) end = ends[--k];
      emit_unknown(piece, start, end, out);
    }
    start = end;
  }
}

void UnigramModel::encode_word_reference(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  if (n == 0) return;
  struct Node {
    double score = 0.0;
    bool reached = false;
    size_t start = 0;
    int64_t id = 0;
  };
  std::vector<Node> best(n + 1);
  size_t s = 0;
  while (s < n) {
    const double here = best[s].score;
    bool single = false;
    const size_t mblen = std::min(char_len(piece[s]), n - s);
    for (size_t len = 1; s + len <= n; ++len) {  // the common-prefix search, shortest first
      const int64_t id = lookup(piece + s, len);
      if (id < 0) continue;
      Node& t = best[s + len];
      const double offer = scores_[id] + here;
      if (!t.reached || offer > t.score) t = Node{offer, true, s, id};
      if (len == mblen) single = true;
    }
    if (!single) {
      Node& t = best[s + mblen];
      const double offer = unk_score_ + here;
      if (!t.reached || offer > t.score) {
        if (options_.unk_id < 0) throw UnigramMissingUnk();
        t = Node{offer, true, s, options_.unk_id};
      }
    }
    s += mblen;
  }
  // Strings, back to front, unk-id nodes gathered and concatenated.
  std::vector<std::pair<size_t, size_t>> results;  // [start, end) of each string
  std::vector<std::pair<size_t, size_t>> pending;
  for (size_t e = n; e > 0;) {
    const Node& node = best[e];
    if (options_.unk_id >= 0 && node.id == options_.unk_id) {
      pending.emplace_back(node.start, e);
    } else {
      if (!pending.empty()) {
        results.emplace_back(pending.back().first, pending.front().second);
        pending.clear();
      }
      results.emplace_back(node.start, e);
    }
    e = node.start;
  }
  if (!pending.empty()) results.emplace_back(pending.back().first, pending.front().second);
  std::reverse(results.begin(), results.end());
  // Model::tokenize: each string looked up as a whole.
  size_t offset = 0;
  for (const auto& r : results) {
    const size_t len = r.second - r.first;
    const auto a = static_cast<uint32_t>(offset), b = static_cast<uint32_t>(offset + len);
    const int64_t id = lookup(piece + r.first, len);
    offset += len;
    if (id >= 0) {
      out.push_back({static_cast<uint32_t>(id), a, b});
      continue;
    }
    if (options_.byte_fallback) {
      std::vector<HfToken> bytes;
      for (size_t i = r.first; i < r.second; ++i) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", piece[i]);
        const int64_t byte = lookup(reinterpret_cast<const uint8_t*>(name), 6);
        if (byte < 0) break;
        bytes.push_back({static_cast<uint32_t>(byte), a, b});
      }
      if (bytes.size() == len) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (options_.unk_id < 0) throw UnigramMissingUnk();
    out.push_back({static_cast<uint32_t>(options_.unk_id), a, b});
  }
}

}  // namespace crayon
