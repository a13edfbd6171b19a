// Differential test: bpe_encode_backtrack (and bpe_encode_small and encode_small_pairs on pieces
// they take) against the
// reference bpe_encode_heap on real
// tiktoken vocabularies, plus the split tables against the definition they encode.
//
//   build: g++ -O2 -std=c++17 -I native native/core/double_array.cc native/models/bpe.cc
//              native/models/bpe_backtrack.cc tests/native/test_bpe_backtrack.cc -o /tmp/tbb
//   run:   /tmp/tbb [--quick] [--seed N] [SHARED_DIR]     (SHARED_DIR defaults to ../shared)
//
// SHARED_DIR/vocab/tiktoken/*.tiktoken are rank files (base64 token, space, rank per line);
// SHARED_DIR/corpora/*.txt and *.jsonl are texts. For every vocabulary it checks:
//   * the split tables: validate_bpe_splits accepts them, and a token is usable exactly when
//     bpe_encode_heap(its bytes) == [itself];
//   * bpe_pair_is_valid(a, b) == (heap(bytes(a) + bytes(b)) == [a, b]) on random and on
//     adjacent-in-real-text pairs;
//   * backtrack == heap on: every token's bytes; every space-split piece of every corpus; slices
//     of the corpora up to 10 KB (BPE of arbitrary byte strings must match too); random bytes;
//     random UTF-8; long runs (100 KB of one byte, of a repeated multi-byte character, digits).
// --quick samples (about 1/16 of the corpus pieces, fewer slices and random strings) to keep
// a run under a minute on two cores; --tiny samples far less and skips timing, for sanitizer
// builds. --no-slow drops the slow-pair table (to show it is needed: llama3 then mismatches).
// Exit status 0 iff everything matched.
//
// Full mode takes about 45 s on two cores and, at the time of writing, reports no mismatch for
// r50k, cl100k, o200k and llama3 (38 MB of corpus pieces each, plus slices and random inputs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "models/bpe.h"
#include "models/bpe_backtrack.h"
#include "core/double_array.h"
#include "base64.h"

using namespace crayon;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

std::vector<std::string> list_dir(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
        names.push_back(n);
      }
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string b64_decode(const std::string& s) {
  std::string out;
  crayon_test::decode_base64(s, &out);
  return out;
}

// A vocabulary with everything the encoders read, owning its storage.
struct Vocab {
  std::string name;
  std::vector<std::string> by_id;  // empty string: no token has this id
  DoubleArrayData trie;
  std::vector<uint32_t> offsets;
  std::string blob;
  BpeTables t;
  BpeSplits splits;
  std::vector<PairEntry> pairs;
  BacktrackTables bt;
};

bool load_vocab(const std::string& path, Vocab& v) {
  std::string text;
  if (!read_file(path, &text)) return false;
  std::istringstream in(text);
  std::string line;
  std::vector<std::pair<std::string, uint32_t>> entries;
  uint32_t max_rank = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) return false;
    const uint32_t rank = static_cast<uint32_t>(std::stoul(line.substr(sp + 1)));
    entries.emplace_back(b64_decode(line.substr(0, sp)), rank);
    max_rank = std::max(max_rank, rank);
  }
  v.by_id.assign(max_rank + 1, std::string());
  for (auto& [bytes, rank] : entries) v.by_id[rank] = bytes;
  std::vector<std::pair<std::string_view, int32_t>> keys;
  for (uint32_t id = 0; id <= max_rank; ++id) {
    if (!v.by_id[id].empty()) keys.emplace_back(v.by_id[id], static_cast<int32_t>(id));
  }
  v.trie = build_double_array(keys);
  v.offsets.assign(1, 0);
  for (const std::string& b : v.by_id) {
    v.blob += b;
    v.offsets.push_back(static_cast<uint32_t>(v.blob.size()));
  }
  v.t.trie = DoubleArrayView(v.trie);
  v.t.token_offsets = v.offsets.data();
  v.t.token_bytes = reinterpret_cast<const uint8_t*>(v.blob.data());
  v.t.token_bytes_size = v.blob.size();
  v.t.n_ids = max_rank + 1;
  fill_byte_ranks(v.t);
  return true;
}

struct Checker {
  const Vocab& v;
  uint64_t cases = 0, bytes = 0, mismatches = 0, errors_matched = 0, small_cases = 0;
  std::vector<uint32_t> a, b, small;
  BacktrackScratch scratch;
  piece::PieceTables pt;
  std::vector<uint32_t> byte_pairs;

  explicit Checker(const Vocab& vocab)
      : v(vocab), pt(make_piece_tables(vocab.t, &vocab.bt)), byte_pairs(build_byte_pairs(pt)) {}

  void check(const uint8_t* p, size_t n, const char* what) {
    if (n == 0) return;
    ++cases;
    bytes += n;
    a.clear();
    b.clear();
    int err_a = -1, err_b = -1;
    try {
      bpe_encode_heap(v.t, p, n, a);
    } catch (const BpeError& e) {
      err_a = e.byte();
    }
    try {
      bpe_encode_backtrack(v.t, v.bt, p, n, b, scratch);
    } catch (const BpeError& e) {
      err_b = e.byte();
    }
    if (n <= kSmallPiece && err_a == err_b) {
      // The short-piece encoder too: same ids, same error.
      small.clear();
      int err_s = -1;
      try {
        bpe_encode_small(v.t, p, n, small);
      } catch (const BpeError& e) {
        err_s = e.byte();
      }
      if (err_s != err_a || (err_a < 0 && small != a)) {
        ++mismatches;
        std::printf("  MISMATCH [%s] %s: bpe_encode_small differs from the heap on %zu bytes\n", v.name.c_str(), what, n);
      }
      // And the pair-table loop (encode_small_pairs): a byte without a token is its only refusal.
      uint32_t ids[kSmallPiece];
      const int32_t got = encode_small_pairs(pt, byte_pairs.data(), p, static_cast<uint32_t>(n), ids);
      const bool same = got < 0 ? err_a >= 0 : err_a < 0 && std::vector<uint32_t>(ids, ids + got) == a;
      if (!same) {
        ++mismatches;
        std::printf("  MISMATCH [%s] %s: encode_small_pairs differs from the heap on %zu bytes\n", v.name.c_str(), what, n);
      }
      ++small_cases;
    }
    if (err_a >= 0 || err_b >= 0) {
      if (err_a == err_b) {
        ++errors_matched;
        return;
      }
    } else if (a == b) {
      return;
    }
    if (++mismatches <= 3) {
      size_t d = 0;
      while (d < a.size() && d < b.size() && a[d] == b[d]) ++d;
      const size_t from = d > 2 ? d - 2 : 0;
      std::printf("  MISMATCH [%s] %s, %zu bytes, first difference at token %zu:", v.name.c_str(), what, n, d);
      for (size_t i = 0; i < std::min<size_t>(n, 24); ++i) std::printf(" %02x", p[i]);
      std::printf("\n    heap     :");
      for (size_t i = from; i < std::min<size_t>(a.size(), from + 8); ++i) std::printf(" %u", a[i]);
      std::printf(" (err %d)\n    backtrack:", err_a);
      for (size_t i = from; i < std::min<size_t>(b.size(), from + 8); ++i) std::printf(" %u", b[i]);
      std::printf(" (err %d)\n", err_b);
    }
  }
  void check(const std::string& s, const char* what) {
    check(reinterpret_cast<const uint8_t*>(s.data()), s.size(), what);
  }
};

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Pieces as a whitespace pre-tokenizer would roughly make them: each space starts a new piece.
template <class F>
void for_each_space_piece(const std::string& text, F&& f) {
  size_t start = 0;
  for (size_t i = 1; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ') {
      f(start, i - start);
      start = i;
    }
  }
}

struct Options {
  bool quick = false;
  bool tiny = false;     // --tiny (with --quick): a far smaller sample, no timing; for sanitizer builds
  bool no_slow = false;  // --no-slow: drop the slow-pair table, to show that it is needed
  uint64_t seed = 12345;
  std::string shared = "../shared";
};

bool run_vocab(const Options& opt, const std::string& path, const std::vector<std::string>& corpora,
               const std::vector<std::string>& corpus_names) {
  Vocab v;
  v.name = path.substr(path.find_last_of('/') + 1);
  auto t0 = Clock::now();
  if (!load_vocab(path, v)) {
    std::printf("cannot read %s\n", path.c_str());
    return false;
  }
  const double t_load = seconds_since(t0);

  t0 = Clock::now();
  v.splits = compute_bpe_splits(v.t);
  const double t_splits = seconds_since(t0);
  t0 = Clock::now();
  v.pairs = build_pair_table(v.splits);
  const double t_pairs = seconds_since(t0);
  v.bt.split_left = v.splits.left.data();
  v.bt.split_right = v.splits.right.data();
  v.bt.slow = v.splits.slow.empty() || opt.no_slow ? nullptr : v.splits.slow.data();
  v.bt.pairs = PairTableView(v.pairs);

  std::printf("== %s: %u ids, load+trie %.2fs\n", v.name.c_str(), v.t.n_ids, t_load);
  std::printf("  splits: %.3fs, %zu bytes; pair table: %.3fs, %zu entries, %zu bytes\n", t_splits,
              2 * v.splits.left.size() * sizeof(uint32_t), t_pairs, v.pairs.size(),
              v.pairs.size() * sizeof(PairEntry));
  std::printf("  usable %u, unreachable %u, order violations %u (first %d), slow-pair tokens %u\n",
              v.splits.n_usable, v.splits.n_unreachable, v.splits.n_order_violations,
              v.splits.first_violation == BpeSplits::kNoSplit ? -1 : static_cast<int>(v.splits.first_violation),
              v.splits.n_slow);
  bool ok = true;
  // Where precondition P fails the engine uses bpe_encode_heap; the comparisons still run, to
  // show that the flag is needed, but their mismatches are expected there.
  const bool strict = !opt.no_slow;
  uint64_t expected_mismatches = 0;
  if (!validate_bpe_splits(v.t, v.bt.split_left, v.bt.split_right)) {
    std::printf("  FAIL validate_bpe_splits rejects computed tables\n");
    ok = false;
  }

  // Unreachable tokens, listed briefly; and the usable flag against the definition.
  {
    uint64_t disagree = 0;
    int shown = 0;
    std::vector<uint32_t> out;
    for (uint32_t id = 0; id < v.t.n_ids; ++id) {
      const std::string& s = v.by_id[id];
      if (s.empty()) continue;
      out.clear();
      bpe_encode_heap(v.t, reinterpret_cast<const uint8_t*>(s.data()), s.size(), out);
      const bool reach = out.size() == 1 && out[0] == id;
      const bool usable = v.splits.left[id] != BpeSplits::kNoSplit;
      if (reach != usable) ++disagree;
      if (!reach && shown < 4) {
        ++shown;
        std::printf("  unreachable id %u (%zu bytes) ->", id, s.size());
        for (uint32_t x : out) std::printf(" %u", x);
        std::printf("\n");
      }
    }
    if (disagree) {
      std::printf("  FAIL usable flag disagrees with heap on %llu tokens\n", static_cast<unsigned long long>(disagree));
      ok = false;
    }
  }

  std::mt19937_64 rng(opt.seed);
  // Pair validity against its definition.
  {
    std::vector<uint32_t> usable;
    for (uint32_t id = 0; id < v.t.n_ids; ++id) {
      if (v.splits.left[id] != BpeSplits::kNoSplit) usable.push_back(id);
    }
    uint64_t n = 0, wrong = 0, invalid = 0;
    std::vector<uint32_t> out;
    auto test_pair = [&](uint32_t x, uint32_t y) {
      const std::string s = v.by_id[x] + v.by_id[y];
      out.clear();
      bpe_encode_heap(v.t, reinterpret_cast<const uint8_t*>(s.data()), s.size(), out);
      const bool truth = out.size() == 2 && out[0] == x && out[1] == y;
      const bool got = bpe_pair_is_valid(v.t, v.bt, x, y);
      ++n;
      invalid += !truth;
      if (truth != got && ++wrong <= 5) {
        std::printf("  FAIL pair (%u, %u): valid %d, replay says %d\n", x, y, truth, got);
      }
    };
    const int random_pairs = opt.tiny ? 2000 : opt.quick ? 20000 : 300000;
    for (int i = 0; i < random_pairs; ++i) test_pair(usable[rng() % usable.size()], usable[rng() % usable.size()]);
    // Pairs likely to interact: a token and a token that shares its last/first bytes.
    for (int i = 0; i < random_pairs; ++i) {
      const uint32_t x = usable[rng() % usable.size()];
      const std::string& xs = v.by_id[x];
      const size_t k = 1 + rng() % xs.size();
      std::vector<uint32_t> ys;
      v.t.trie.for_each_prefix(reinterpret_cast<const uint8_t*>(xs.data()) + xs.size() - k, k,
                               [&](size_t, int32_t val) {
                                 if (v.splits.left[val] != BpeSplits::kNoSplit) ys.push_back(val);
                                 return true;
                               });
      if (!ys.empty()) test_pair(x, ys[rng() % ys.size()]);
      // And one whose first bytes continue x's last ones as in a longer token.
      const uint32_t z = usable[rng() % usable.size()];
      const std::string& zs = v.by_id[z];
      if (zs.size() >= 2) {
        const size_t cut = 1 + rng() % (zs.size() - 1);
        const int32_t l = token_rank(v.t, reinterpret_cast<const uint8_t*>(zs.data()), cut);
        const int32_t r = token_rank(v.t, reinterpret_cast<const uint8_t*>(zs.data()) + cut, zs.size() - cut);
        if (l >= 0 && r >= 0 && v.splits.left[l] != BpeSplits::kNoSplit && v.splits.left[r] != BpeSplits::kNoSplit) {
          test_pair(static_cast<uint32_t>(l), static_cast<uint32_t>(r));
        }
      }
    }
    std::printf("  pair replay: %llu pairs (%llu invalid), %llu wrong\n", static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(invalid), static_cast<unsigned long long>(wrong));
    if (wrong && strict) ok = false;
    if (!strict) expected_mismatches += wrong;
  }

  Checker c(v);
  auto report = [&](const char* what, Checker& ck, Clock::time_point start) {
    std::printf("  %-22s %9llu cases (%llu short) %11llu bytes  %llu mismatches  (%.1fs)\n", what,
                static_cast<unsigned long long>(ck.cases), static_cast<unsigned long long>(ck.small_cases),
                static_cast<unsigned long long>(ck.bytes), static_cast<unsigned long long>(ck.mismatches),
                seconds_since(start));
    if (ck.mismatches && strict) ok = false;
    if (!strict) expected_mismatches += ck.mismatches;
    ck.cases = ck.bytes = ck.mismatches = ck.small_cases = 0;
  };

  t0 = Clock::now();
  for (uint32_t id = 0; id < v.t.n_ids; id += opt.tiny ? 7 : 1) c.check(v.by_id[id], "token bytes");
  report("every token", c, t0);

  t0 = Clock::now();
  const size_t stride = opt.tiny ? 509 : opt.quick ? 16 : 1;
  for (size_t f = 0; f < corpora.size(); ++f) {
    size_t k = 0;
    for_each_space_piece(corpora[f], [&](size_t s, size_t n) {
      if (k++ % stride == 0) c.check(reinterpret_cast<const uint8_t*>(corpora[f].data()) + s, n, corpus_names[f].c_str());
    });
  }
  report("corpus space pieces", c, t0);

  t0 = Clock::now();
  const int slices = opt.tiny ? 4 : opt.quick ? 40 : 400;
  for (size_t f = 0; f < corpora.size(); ++f) {
    const std::string& text = corpora[f];
    if (text.empty()) continue;
    for (int i = 0; i < slices; ++i) {
      const size_t len = 1 + rng() % std::min<size_t>(text.size(), i % 4 == 0 ? 10240 : 300);
      const size_t at = rng() % (text.size() - len + 1);
      c.check(reinterpret_cast<const uint8_t*>(text.data()) + at, len, corpus_names[f].c_str());
    }
  }
  report("corpus slices <=10KB", c, t0);

  t0 = Clock::now();
  const int randoms = opt.tiny ? 300 : opt.quick ? 3000 : 30000;
  for (int i = 0; i < randoms; ++i) {
    std::string s;
    const size_t len = 1 + rng() % (i % 10 == 0 ? 2000 : 40);
    // Random bytes, sometimes from a small alphabet so that tokens actually repeat.
    const uint32_t alpha = i % 3 == 0 ? 256 : (i % 3 == 1 ? 4 : 16);
    const uint8_t base = static_cast<uint8_t>(i % 3 == 0 ? 0 : (rng() % 2 ? 'a' : ' '));
    for (size_t j = 0; j < len; ++j) s.push_back(static_cast<char>(base + rng() % alpha));
    c.check(s, "random bytes");
  }
  report("random bytes", c, t0);

  t0 = Clock::now();
  static const uint32_t kRanges[][2] = {{0x20, 0x7F}, {0xA0, 0x250}, {0x370, 0x530}, {0x590, 0x700},
                                        {0x900, 0xE00}, {0x3040, 0x3100}, {0x4E00, 0x9FFF},
                                        {0xAC00, 0xD7A3}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}};
  for (int i = 0; i < randoms; ++i) {
    std::string s;
    const size_t len = 1 + rng() % (i % 10 == 0 ? 500 : 20);
    const auto& r1 = kRanges[rng() % 10];
    const auto& r2 = kRanges[rng() % 10];
    for (size_t j = 0; j < len; ++j) {
      const auto& r = rng() % 2 ? r1 : r2;
      uint32_t cp = r[0] + static_cast<uint32_t>(rng() % (r[1] - r[0]));
      if (cp >= 0xD800 && cp < 0xE000) cp = 0x20;
      append_utf8(s, cp);
    }
    c.check(s, "random utf-8");
  }
  report("random utf-8", c, t0);

  t0 = Clock::now();
  std::vector<std::string> runs;
  const size_t big = opt.tiny ? 20000 : 100000;
  for (const char* unit : {"a", " ", "\n", "0", "é", "中", "🙂", "ab", "  \n", "0123456789", "\xff",
                           "!", "\t", "aa ", "ä", "ﾀﾞ"}) {
    std::string s;
    while (s.size() < big) s += unit;
    runs.push_back(s);
    runs.push_back(s.substr(0, 1000 + rng() % 1000));  // odd lengths too
  }
  {
    std::string digits;
    while (digits.size() < big) digits.push_back(static_cast<char>('0' + rng() % 10));
    runs.push_back(digits);
    // Tokens glued together, the input most likely to need backtracking.
    std::string glued;
    std::vector<uint32_t> usable;
    for (uint32_t id = 0; id < v.t.n_ids; ++id) {
      if (v.splits.left[id] != BpeSplits::kNoSplit && v.by_id[id].size() > 1) usable.push_back(id);
    }
    while (glued.size() < big) glued += v.by_id[usable[rng() % usable.size()]];
    runs.push_back(glued);
  }
  for (const std::string& s : runs) c.check(s, "long run");
  report("long runs", c, t0);

  // Speed on long pieces: the corpora cut into 10 KB pieces (as if pre-tokenization kept them
  // whole) and the space-split pieces, heap against backtrack.
  if (!opt.tiny) {
    std::vector<std::pair<const uint8_t*, size_t>> longp, shortp;
    size_t long_bytes = 0, short_bytes = 0;
    const size_t budget = opt.quick ? (1u << 19) : (16u << 20);  // --quick: a 512 KiB sample
    for (size_t f = 0; f < corpora.size() && long_bytes < budget; ++f) {
      const std::string& text = corpora[f];
      for (size_t at = 0; at + 10240 <= text.size() && long_bytes < budget; at += 10240 * 4) {
        longp.emplace_back(reinterpret_cast<const uint8_t*>(text.data()) + at, 10240);
        long_bytes += 10240;
      }
      for_each_space_piece(text, [&](size_t s, size_t n) {
        if (short_bytes < budget / 4) {
          shortp.emplace_back(reinterpret_cast<const uint8_t*>(text.data()) + s, n);
          short_bytes += n;
        }
      });
    }
    std::vector<uint32_t> out;
    out.reserve(1 << 20);
    BacktrackScratch sc;
    auto time_it = [&](const std::vector<std::pair<const uint8_t*, size_t>>& ps, size_t total, bool heap) {
      const auto s = Clock::now();
      size_t tokens = 0;
      for (const auto& [p, n] : ps) {
        out.clear();
        if (heap) {
          bpe_encode_heap(v.t, p, n, out);
        } else {
          bpe_encode_backtrack(v.t, v.bt, p, n, out, sc);
        }
        tokens += out.size();
      }
      const double sec = seconds_since(s);
      return std::make_pair(total / sec / 1e6, tokens);
    };
    const auto hl = time_it(longp, long_bytes, true);
    const auto bl = time_it(longp, long_bytes, false);
    const auto hs = time_it(shortp, short_bytes, true);
    const auto bs = time_it(shortp, short_bytes, false);
    std::printf("  speed 10KB pieces: heap %.1f MB/s, backtrack %.1f MB/s (x%.2f)\n", hl.first, bl.first,
                bl.first / hl.first);
    std::printf("  speed space pieces: heap %.1f MB/s, backtrack %.1f MB/s (x%.2f)\n", hs.first, bs.first,
                bs.first / hs.first);
    // A long run of one byte is the classic worst case for merge-based encoders.
    std::vector<std::pair<const uint8_t*, size_t>> run1{{reinterpret_cast<const uint8_t*>(runs[0].data()), big}};
    const auto hr = time_it(run1, big, true);
    const auto br = time_it(run1, big, false);
    std::printf("  speed 100KB of 'a': heap %.1f MB/s, backtrack %.1f MB/s\n", hr.first, br.first);
    if (strict && (hl.second != bl.second || hs.second != bs.second)) ok = false;
  }
  if (strict) {
    std::printf("  %s: %s\n", v.name.c_str(), ok ? "OK" : "FAILED");
  } else {
    std::printf("  %s: %s (--no-slow: %llu mismatches, expected where slow-pair tokens exist)\n",
                v.name.c_str(), ok ? "OK" : "FAILED", static_cast<unsigned long long>(expected_mismatches));
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      opt.quick = true;
    } else if (a == "--tiny") {
      opt.tiny = opt.quick = true;
    } else if (a == "--no-slow") {
      opt.no_slow = true;
    } else if (a == "--seed" && i + 1 < argc) {
      opt.seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      opt.shared = a;
    }
  }
  const std::string vocab_dir = opt.shared + "/vocab/tiktoken";
  const std::string corpus_dir = opt.shared + "/corpora";
  const std::vector<std::string> vocabs = list_dir(vocab_dir, ".tiktoken");
  if (vocabs.empty()) {
    std::printf("no .tiktoken files under %s\n", vocab_dir.c_str());
    return 2;
  }
  std::vector<std::string> corpora, names;
  for (const std::string& suffix : {std::string(".txt"), std::string(".jsonl")}) {
    for (const std::string& n : list_dir(corpus_dir, suffix)) {
      std::string text;
      if (read_file(corpus_dir + "/" + n, &text)) {
        corpora.push_back(std::move(text));
        names.push_back(n);
      }
    }
  }
  std::printf("%zu vocabularies, %zu corpora, mode %s, seed %llu\n", vocabs.size(), corpora.size(),
              opt.quick ? "quick" : "full", static_cast<unsigned long long>(opt.seed));
  bool ok = true;
  for (const std::string& v : vocabs) ok = run_vocab(opt, vocab_dir + "/" + v, corpora, names) && ok;
  std::printf("%s\n", ok ? "ALL OK" : "FAILURES");
  return ok ? 0 : 1;
}
