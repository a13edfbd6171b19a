#include "train/bpe_trainer.h"

#include <algorithm>
#include <climits>
#include <queue>
#include <stdexcept>

#include "core/parallel.h"
#include "text/regex.h"
#include "text/split.h"
#include "core/utf8.h"

namespace crayon {

// ---------------------------------------------------------------------------------------------
// Byte-level alphabet (GPT-2's bytes_to_unicode): printable Latin-1 bytes map to themselves,
// the other 68 bytes to U+0100.. in byte order.
uint32_t byte_level_char(uint8_t b) {
  static const auto table = [] {
    std::vector<uint32_t> t(256, 0);
    auto printable = [](int c) { return (c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF); };
    uint32_t next = 256;
    for (int c = 0; c < 256; ++c) t[c] = printable(c) ? static_cast<uint32_t>(c) : next++;
    return t;
  }();
  return table[b];
}

std::string byte_level_string(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  char buf[4];
  for (unsigned char b : raw) out.append(buf, utf8::encode(byte_level_char(b), buf));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Word counting.

WordCounter::WordCounter(const std::string& pattern) : re_(std::make_unique<Regex>(pattern)) {}
WordCounter::~WordCounter() = default;

void WordCounter::count_into(std::string_view seq, Map& map) const {
  if (seq.empty()) return;
  thread_local std::vector<MatchSpan> matches;
  thread_local Pieces pieces;
  thread_local std::string key;
  matches.clear();
  pieces.clear();
  find_matches(*re_, seq, matches);
  split_pieces_by(matches, SplitBehavior::kIsolated, false, pieces);
  for (const auto& [b, e] : pieces) {
    key.assign(seq.data() + b, e - b);
    ++map[key];
  }
}

void WordCounter::merge_maps(std::vector<Map>& maps) {
  for (auto& m : maps) {
    if (counts_.empty() && m.size() > counts_.size()) {
      counts_.swap(m);
      continue;
    }
    for (auto& [k, v] : m) counts_[k] += v;
    Map().swap(m);
  }
}

void WordCounter::add_sequences(const std::vector<std::string_view>& seqs, size_t threads) {
  const size_t hw = threads == 0 ? hardware_threads() : threads;
  const size_t parts = std::max<size_t>(1, std::min(seqs.size(), hw));
  std::vector<Map> maps(parts);
  parallel_for(parts, parts, [&](size_t p) {
    const size_t lo = seqs.size() * p / parts, hi = seqs.size() * (p + 1) / parts;
    for (size_t i = lo; i < hi; ++i) count_into(seqs[i], maps[p]);
  });
  merge_maps(maps);
}

void WordCounter::add_lines(std::string_view text, size_t threads) {
  const size_t hw = threads == 0 ? hardware_threads() : threads;
  // Cut the text into `parts` ranges at line ends; every line lies in exactly one range.
  const size_t parts = std::max<size_t>(1, std::min(hw, text.size() / (64 * 1024) + 1));
  std::vector<size_t> cuts{0};
  for (size_t p = 1; p < parts; ++p) {
    size_t at = std::max(cuts.back(), text.size() * p / parts);
    const size_t nl = text.find('\n', at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    cuts.push_back(at);
  }
  cuts.push_back(text.size());
  std::vector<Map> maps(parts);
  parallel_for(parts, parts, [&](size_t p) {
    size_t pos = cuts[p];
    const size_t end = cuts[p + 1];
    while (pos < end) {
      const size_t nl = text.find('\n', pos);
      const size_t line_end = (nl == std::string_view::npos || nl >= end) ? end : nl + 1;
      count_into(text.substr(pos, line_end - pos), maps[p]);
      pos = line_end;
    }
  });
  merge_maps(maps);
}

// ---------------------------------------------------------------------------------------------
// Training.

namespace {

using Pair = uint64_t;  // (left << 32) | right: integer order equals tokenizers' tuple order
inline Pair make_pair_key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

// Open addressing (linear probing, power-of-two table) from a pair to a value: the merge loop does
// a few lookups per changed neighbour, and std::unordered_map's node per entry made them the
// largest cost. Keys are never removed; clear() forgets only the slots used since the last clear.
template <class V>
class PairMap {
 public:
  static constexpr Pair kEmpty = ~Pair{0};  // (2^32-1, 2^32-1): ids never get that large
  explicit PairMap(size_t capacity = 16) { rehash(std::max<size_t>(16, capacity * 2)); }
  V& operator[](Pair key) {
    size_t i = slot(key);
    if (keys_[i] == kEmpty) {
      if ((size_ + 1) * 2 > keys_.size()) {
        rehash(keys_.size() * 2);
        i = slot(key);
      }
      keys_[i] = key;
      used_.push_back(i);
      ++size_;
    }
    return vals_[i];
  }
  size_t size() const { return size_; }
  // Calls fn(key, value&) for each entry, in insertion order.
  template <class F>
  void for_each(F&& fn) {
    for (size_t i : used_) fn(keys_[i], vals_[i]);
  }
  void clear() {
    for (size_t i : used_) {
      keys_[i] = kEmpty;
      vals_[i] = V();
    }
    used_.clear();
    size_ = 0;
  }

 private:
  size_t slot(Pair key) const {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    size_t i = static_cast<size_t>(h >> 20) & (keys_.size() - 1);
    while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & (keys_.size() - 1);
    return i;
  }
  void rehash(size_t n) {
    size_t cap = 16;
    while (cap < n) cap *= 2;
    std::vector<Pair> old_keys(cap, kEmpty);
    std::vector<V> old_vals(cap);
    old_keys.swap(keys_);
    old_vals.swap(vals_);
    std::vector<size_t> old_used;
    old_used.swap(used_);
    for (size_t j : old_used) {
      const size_t i = slot(old_keys[j]);
      keys_[i] = old_keys[j];
      vals_[i] = std::move(old_vals[j]);
      used_.push_back(i);
    }
  }
  std::vector<Pair> keys_;
  std::vector<V> vals_;
  std::vector<size_t> used_;
  size_t size_ = 0;
};

// Every word's symbols in one array (words only shrink, so merging compacts in place): a word
// visit touches its span and its symbols, not a separately allocated vector per word.
struct Span {
  uint64_t start;
  uint32_t size;
};

struct Entry {
  uint64_t count;
  Pair pair;
  uint32_t pos;  // index into the pos-set pool
};
// std::priority_queue pops the greatest: higher count, then the smaller pair.
struct EntryLess {
  bool operator()(const Entry& a, const Entry& b) const {
    if (a.count != b.count) return a.count < b.count;
    return a.pair > b.pair;
  }
};

struct Change {
  Pair pair;
  int32_t delta;
};
struct WordChange {
  Pair pair;
  int32_t delta;
  uint32_t word;
};
// Below this many words a merge runs on the calling thread (a pool round trip costs more).
constexpr size_t kParallelWords = 4096;

// tokenizers' Word::merge: left to right, non-overlapping; the deltas of neighbour pairs.
// `lens` (chars per symbol) is null when max_token_length is unset: every sum is then below it.
void merge_word(uint32_t* ids, uint32_t* lens, uint32_t& size, uint32_t c1, uint32_t c2, uint32_t replacement,
                size_t max_length, std::vector<Change>& changes) {
  const size_t n = size;
  size_t i = 0;
  while (i + 1 < n && !(ids[i] == c1 && ids[i + 1] == c2)) ++i;  // most visited words: no match
  if (i + 1 >= n) return;
  size_t out = i;  // compacted prefix length
  while (i < n) {
    if (ids[i] == c1 && i + 1 < n && ids[i + 1] == c2) {
      const size_t new_len = lens ? size_t{lens[i]} + lens[i + 1] : 0;
      if (out > 0) {
        changes.push_back({make_pair_key(ids[out - 1], c1), -1});
        if (!lens || lens[out - 1] + new_len < max_length)
          changes.push_back({make_pair_key(ids[out - 1], replacement), 1});
      }
      const uint32_t right = i + 2 < n ? ids[i + 2] : 0;
      if (i + 2 < n) {
        changes.push_back({make_pair_key(c2, right), -1});
        if (!lens || lens[i + 2] + new_len < max_length) changes.push_back({make_pair_key(replacement, right), 1});
      }
      ids[out] = replacement;
      if (lens) lens[out] = static_cast<uint32_t>(new_len);
      ++out;
      i += 2;
    } else {
      ids[out] = ids[i];
      if (lens) lens[out] = lens[i];
      ++out;
      ++i;
    }
  }
  size = static_cast<uint32_t>(out);
}

std::vector<uint32_t> decode_chars(const std::string& s) {
  std::vector<uint32_t> cps;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const auto d = utf8::decode(p, end);
    if (d.cp == utf8::kInvalid) throw std::invalid_argument("train_bpe: a word is not valid UTF-8");
    cps.push_back(d.cp);
    p += d.len;
  }
  return cps;
}

std::string encode_char(uint32_t cp) {
  char buf[4];
  return std::string(buf, utf8::encode(cp, buf));
}

}  // namespace

BpeTrainResult train_bpe(const std::vector<std::pair<std::string, uint64_t>>& word_counts, const BpeTrainerConfig& cfg,
                         const std::function<void(size_t)>& progress) {
  std::unordered_map<std::string, uint32_t> w2id;
  std::vector<std::string> id2w;
  auto add_token = [&](const std::string& s) -> uint32_t {
    auto it = w2id.find(s);
    if (it != w2id.end()) return it->second;
    const auto id = static_cast<uint32_t>(id2w.size());
    id2w.push_back(s);
    w2id.emplace(s, id);
    return id;
  };

  // 1. Special tokens first, in the given order (duplicates once).
  for (const auto& s : cfg.special_tokens) add_token(s);

  // 2. Alphabet: chars seen, weighted by word counts; the initial alphabet always counts as
  // seen most often. limit_alphabet drops the least frequent (ties: by code point, highest
  // first dropped last... tokenizers' unstable sort leaves ties unspecified), then ids go out
  // in code point order.
  std::vector<std::vector<uint32_t>> chars(word_counts.size());
  std::unordered_map<uint32_t, uint64_t> alphabet;
  for (size_t i = 0; i < word_counts.size(); ++i) {
    chars[i] = decode_chars(word_counts[i].first);
    for (uint32_t c : chars[i]) alphabet[c] += word_counts[i].second;
  }
  for (uint32_t c : cfg.initial_alphabet) alphabet[c] = UINT64_MAX;
  std::vector<std::pair<uint32_t, uint64_t>> kept(alphabet.begin(), alphabet.end());
  if (cfg.limit_alphabet != SIZE_MAX && kept.size() > cfg.limit_alphabet) {
    const size_t to_remove = kept.size() - cfg.limit_alphabet;
    std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second < b.second : a.first < b.first;
    });
    kept.erase(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(to_remove));
  }
  std::sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [c, n] : kept) add_token(encode_char(c));

  // 3. Words as symbol ids; chars outside the alphabet are dropped (as tokenizers does).
  // The symbol of a char depends only on (char, first?, last?): cache it (-1: not in the alphabet).
  // The cache sees the same answers as a fresh lookup: strings added here carry a non-empty prefix
  // or suffix, so they never equal a single char's string, and an empty one adds nothing new.
  const bool track_lens = cfg.max_token_length != SIZE_MAX;
  std::vector<Span> spans(word_counts.size());
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts(word_counts.size());
  std::unordered_map<uint64_t, int64_t> symbol_of;
  for (size_t i = 0; i < word_counts.size(); ++i) {
    counts[i] = word_counts[i].second;
    const auto& cs = chars[i];
    spans[i].start = symbols.size();
    for (size_t k = 0; k < cs.size(); ++k) {
      const bool first = k == 0, last = k + 1 == cs.size();
      const uint64_t key = (static_cast<uint64_t>(cs[k]) << 2) | (cfg.has_prefix && !first ? 2u : 0u) |
                           (cfg.has_suffix && last ? 1u : 0u);
      auto it = symbol_of.find(key);
      if (it == symbol_of.end()) {
        std::string s = encode_char(cs[k]);
        int64_t id = -1;
        if (w2id.count(s)) {
          if (!first && cfg.has_prefix) s = cfg.continuing_subword_prefix + s;
          if (last && cfg.has_suffix) s += cfg.end_of_word_suffix;
          id = add_token(s);
        }
        it = symbol_of.emplace(key, id).first;
      }
      if (it->second >= 0) symbols.push_back(static_cast<uint32_t>(it->second));
    }
    spans[i].size = static_cast<uint32_t>(symbols.size() - spans[i].start);
    std::vector<uint32_t>().swap(chars[i]);
  }
  std::vector<uint32_t> lens(track_lens ? symbols.size() : 0, 1);

  // 4. Pair counts and, per pair, the words containing it.
  PairMap<int64_t> pair_counts(1 << 16);
  PairMap<std::vector<uint32_t>> where(1 << 16);
  for (size_t i = 0; i < spans.size(); ++i) {
    const uint32_t* ids = symbols.data() + spans[i].start;
    for (size_t k = 0; k + 1 < spans[i].size; ++k) {
      const Pair p = make_pair_key(ids[k], ids[k + 1]);
      pair_counts[p] += static_cast<int64_t>(counts[i]);
      auto& v = where[p];
      if (v.empty() || v.back() != i) v.push_back(static_cast<uint32_t>(i));
    }
  }
  std::vector<std::vector<uint32_t>> pool;  // pos sets of live heap entries
  std::vector<uint32_t> free_slots;
  auto store_pos = [&](std::vector<uint32_t>&& v) -> uint32_t {
    if (!free_slots.empty()) {
      const uint32_t s = free_slots.back();
      free_slots.pop_back();
      pool[s] = std::move(v);
      return s;
    }
    pool.push_back(std::move(v));
    return static_cast<uint32_t>(pool.size() - 1);
  };
  std::priority_queue<Entry, std::vector<Entry>, EntryLess> queue;
  auto flush_where = [&] {
    where.for_each([&](Pair p, std::vector<uint32_t>& v) {
      const int64_t c = pair_counts[p];
      if (c > 0) queue.push({static_cast<uint64_t>(c), p, store_pos(std::move(v))});
    });
    where.clear();
  };
  flush_where();

  // 5. Merges.
  BpeTrainResult result;
  std::vector<Pair> merges;
  std::vector<std::vector<WordChange>> part_changes;
  const size_t hw = hardware_threads();
  const size_t max_len = cfg.max_token_length;
  size_t last_report = 0;
  while (w2id.size() < cfg.vocab_size && !queue.empty()) {
    Entry top = queue.top();
    queue.pop();
    // tokenizers compares the current count as u64 (a negative count wraps around).
    const uint64_t current = static_cast<uint64_t>(pair_counts[top.pair]);
    if (top.count != current) {
      top.count = current;
      queue.push(top);
      continue;
    }
    if (top.count < 1 || cfg.min_frequency > top.count) break;

    const uint32_t a = static_cast<uint32_t>(top.pair >> 32), b = static_cast<uint32_t>(top.pair);
    std::string_view part_b = id2w[b];
    if (cfg.has_prefix && part_b.substr(0, cfg.continuing_subword_prefix.size()) == cfg.continuing_subword_prefix)
      part_b.remove_prefix(cfg.continuing_subword_prefix.size());
    std::string new_token = id2w[a];
    new_token.append(part_b);
    const uint32_t new_id = add_token(new_token);
    merges.push_back(top.pair);

    std::vector<uint32_t> pos = std::move(pool[top.pos]);
    free_slots.push_back(top.pos);
    // Merge the words of this entry: in parallel when there are many (each word is touched by
    // one thread only), recording each word's deltas; then apply them in order on this thread.
    // Prefetching a few words ahead hides most of the latency of these scattered visits.
    const size_t parts = pos.size() >= kParallelWords ? std::min(hw, pos.size() / (kParallelWords / 2)) : 1;
    if (part_changes.size() < parts) part_changes.resize(parts);
    auto merge_range = [&](size_t part) {
      auto& out = part_changes[part];
      out.clear();
      const size_t lo = pos.size() * part / parts, hi = pos.size() * (part + 1) / parts;
      std::vector<Change> local;
      for (size_t k = lo; k < hi; ++k) {
        if (k + 16 < hi) __builtin_prefetch(&spans[pos[k + 16]]);
        if (k + 8 < hi) __builtin_prefetch(symbols.data() + spans[pos[k + 8]].start);
        const uint32_t iw = pos[k];
        local.clear();
        merge_word(symbols.data() + spans[iw].start, track_lens ? lens.data() + spans[iw].start : nullptr,
                   spans[iw].size, a, b, new_id, max_len, local);
        for (const auto& ch : local) out.push_back({ch.pair, ch.delta, iw});
      }
    };
    if (parts > 1) {
      parallel_for(parts, parts, merge_range);
    } else {
      merge_range(0);
    }
    for (size_t part = 0; part < parts; ++part) {
      for (const auto& ch : part_changes[part]) {
        pair_counts[ch.pair] += ch.delta * static_cast<int64_t>(counts[ch.word]);
        if (ch.delta > 0) {
          auto& v = where[ch.pair];
          if (v.empty() || v.back() != ch.word) v.push_back(ch.word);
        }
      }
    }
    flush_where();
    if (progress && merges.size() - last_report >= 256) {
      last_report = merges.size();
      progress(w2id.size());
    }
  }
  if (progress) progress(w2id.size());

  // A pair merged more than once is saved once, at its last rank (tokenizers collects the
  // merges into a map keyed by pair, later ranks overwriting earlier ones, then sorts by rank).
  result.merge_steps = merges.size();
  std::unordered_map<Pair, size_t> last;
  for (size_t r = 0; r < merges.size(); ++r) last[merges[r]] = r;
  for (size_t r = 0; r < merges.size(); ++r)
    if (last[merges[r]] == r)
      result.merges.emplace_back(static_cast<uint32_t>(merges[r] >> 32), static_cast<uint32_t>(merges[r]));
  result.vocab = std::move(id2w);
  return result;
}

}  // namespace crayon
