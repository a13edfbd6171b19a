// Standalone test for the double-array trie (no framework: a CHECK macro and exit status).
//
//   g++ -O2 -std=c++17 -I native native/core/double_array.cc tests/native/test_double_array.cc
//       -o /tmp/tda && /tmp/tda [VOCAB.tiktoken ...]
//
// The oracle is std::map<std::string, int32_t> (std::string orders bytes as unsigned, like the
// trie). Every built trie is also decoded back into its key set straight from the three arrays
// and checked against the documented layout invariants. Each .tiktoken file named on the command
// line (lines of "base64(token) rank") is built, checked and timed; timings are printed, never
// asserted. Run it under -fsanitize=address,undefined too: the hostile-view test relies on the
// sanitizer to catch any read out of range.
#include "core/double_array.h"
#include "base64.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using crayon::build_double_array;
using crayon::DoubleArrayData;
using crayon::DoubleArrayView;

namespace {

int g_failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      if (++g_failures <= 20) {                                                \
        std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      }                                                                        \
    }                                                                          \
  } while (0)

using KeyMap = std::map<std::string, int32_t, std::less<>>;  // std::less<>: find(string_view)


const uint8_t* bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

DoubleArrayData build(const KeyMap& m) {
  std::vector<std::pair<std::string_view, int32_t>> keys;
  keys.reserve(m.size());
  for (const auto& [k, v] : m) keys.emplace_back(k, v);
  return build_double_array(keys);
}

// ---- The slow twin: decode the arrays back into (key, value) pairs and check the layout. ----

// Returns the number of trie nodes (root included).
size_t check_structure(const DoubleArrayData& d, const KeyMap& expected) {
  const size_t n = d.base.size();
  CHECK(n >= 1);
  CHECK(d.check.size() == n && d.value.size() == n && d.units.size() == n);
  if (n == 0 || d.check.size() != n || d.value.size() != n || d.units.size() != n) return 0;
  for (size_t t = 0; t < n; ++t) {  // the interleaved units views read are the same arrays
    CHECK(d.units[t].base == d.base[t] && d.units[t].check == d.check[t]);
  }
  CHECK(n <= static_cast<size_t>(std::numeric_limits<int32_t>::max()));
  CHECK(d.check[0] == -1);
  CHECK(d.value[0] == -1);  // keys are non-empty

  // children[p] = slots whose check names p; each must sit at base[p] + c for a byte c.
  std::vector<std::vector<int32_t>> children(n);
  size_t used = 1;
  for (size_t t = 1; t < n; ++t) {
    const int32_t p = d.check[t];
    if (p == -1) {
      CHECK(d.base[t] == 0);
      CHECK(d.value[t] == -1);
      continue;
    }
    ++used;
    CHECK(p >= 0 && static_cast<size_t>(p) < n);
    if (p < 0 || static_cast<size_t>(p) >= n) continue;
    const int64_t label = static_cast<int64_t>(t) - d.base[p];
    CHECK(label >= 0 && label <= 255);  // otherwise the slot is an orphan no lookup can reach
    children[p].push_back(static_cast<int32_t>(t));
  }
  CHECK(d.check[n - 1] != -1 || n == 1);  // trimmed: the last slot is used

  // Decode every key by walking the children lists from the root, depth first; `key` holds the
  // bytes on the path to the node being visited (one shared string: keys may be very long).
  KeyMap decoded;
  size_t reached = 0;
  std::string key;
  std::vector<std::pair<int32_t, size_t>> stack{{0, 0}};  // (node, depth)
  while (!stack.empty()) {
    const auto [s, depth] = stack.back();
    stack.pop_back();
    ++reached;
    key.resize(depth);
    if (s != 0) key.back() = static_cast<char>(s - d.base[d.check[s]]);
    CHECK(d.base[s] >= 0 && static_cast<size_t>(d.base[s]) < n);
    if (children[s].empty()) CHECK(d.base[s] == 0);
    if (d.value[s] >= 0) decoded.emplace(key, d.value[s]);
    else CHECK(d.value[s] == -1);
    if (s != 0 && d.value[s] < 0) CHECK(!children[s].empty());  // no dead-end branches
    for (int32_t t : children[s]) stack.emplace_back(t, depth + 1);
  }
  CHECK(reached == used);  // every used slot is reachable from the root (and no cycles)
  CHECK(decoded == expected);
  return used;
}

// ---- Fast path vs the std::map oracle. ----

bool has_key_with_prefix(const KeyMap& m, const std::string& p) {
  auto it = m.lower_bound(p);
  return it != m.end() && it->first.compare(0, p.size(), p) == 0;
}

// The distinct key lengths, ascending: the prefix oracle only looks those up (a key of 100k bytes
// would otherwise cost 100k map lookups per query).
std::vector<size_t> key_lengths(const KeyMap& m) {
  std::vector<size_t> lens;
  for (const auto& kv : m) lens.push_back(kv.first.size());
  std::sort(lens.begin(), lens.end());
  lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
  return lens;
}

void check_query(const DoubleArrayView& v, const KeyMap& m, const std::vector<size_t>& lens,
                 const std::string& q) {
  const uint8_t* s = bytes(q);
  const size_t n = q.size();

  auto it = m.find(q);
  CHECK(v.find(s, n) == (it == m.end() ? -1 : it->second));

  const int32_t node = v.walk(DoubleArrayView::kRoot, s, n);
  CHECK((node >= 0) == (n == 0 || has_key_with_prefix(m, q)));
  if (node >= 0) {
    CHECK(static_cast<uint32_t>(node) < v.size());
    CHECK(v.value_at(node) == (it == m.end() ? -1 : it->second));
  }
  // Walking in two steps reaches the same node.
  const size_t cut = n / 2;
  const int32_t mid = v.walk(DoubleArrayView::kRoot, s, cut);
  CHECK((mid < 0 ? -1 : v.walk(mid, s + cut, n - cut)) == node);

  std::vector<std::pair<size_t, int32_t>> want;
  for (size_t len : lens) {
    if (len > n) break;
    auto p = m.find(std::string_view(q).substr(0, len));
    if (p != m.end()) want.emplace_back(len, p->second);
  }
  std::vector<std::pair<size_t, int32_t>> got;
  v.for_each_prefix(s, n, [&](size_t len, int32_t val) {
    got.emplace_back(len, val);
    return true;
  });
  CHECK(got == want);

  // Stops as soon as the callback says so.
  size_t calls = 0;
  v.for_each_prefix(s, n, [&](size_t, int32_t) { return ++calls < 2; });
  CHECK(calls == std::min<size_t>(2, want.size()));

  int32_t val = -12345;
  const size_t len = v.longest_prefix(s, n, &val);
  if (want.empty()) {
    CHECK(len == 0);
    CHECK(val == -12345);  // untouched when no key matches
  } else {
    CHECK(len == want.back().first);
    CHECK(val == want.back().second);
  }
}

std::string random_string(std::mt19937_64& rng, size_t len, int alphabet) {
  std::string s(len, '\0');
  for (char& c : s) c = static_cast<char>(rng() % alphabet);
  if (alphabet < 256 && rng() % 2) {  // shift small alphabets around so both ends of 0..255 occur
    const int shift = static_cast<int>(rng() % (257 - alphabet));
    for (char& c : s) c = static_cast<char>(static_cast<uint8_t>(c) + shift);
  }
  return s;
}

// Builds m, checks the layout, then queries every key, every key's prefixes and extensions, and
// random strings. Also checks that the input order does not change the result.
void check_keys(const KeyMap& m, std::mt19937_64& rng, const char* name) {
  const DoubleArrayData d = build(m);
  const size_t nodes = check_structure(d, m);
  (void)nodes;
  const DoubleArrayView v(d);
  CHECK(v.size() == d.base.size());

  std::vector<std::string> queries{std::string(), std::string(1, '\0'), std::string(1, '\xff')};
  for (const auto& [k, val] : m) {
    queries.push_back(k);
    queries.push_back(k.substr(0, rng() % k.size()));
    queries.push_back(k + static_cast<char>(rng() % 256));
    queries.push_back(k + k);
  }
  for (int i = 0; i < 200; ++i) queries.push_back(random_string(rng, rng() % 12, 256));
  const std::vector<size_t> lens = key_lengths(m);
  for (const auto& q : queries) check_query(v, m, lens, q);

  // Same keys, shuffled input: identical arrays.
  std::vector<std::pair<std::string_view, int32_t>> shuffled(m.begin(), m.end());
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const DoubleArrayData d2 = build_double_array(shuffled);
  CHECK(d2.base == d.base && d2.check == d.check && d2.value == d.value);

  if (g_failures) std::fprintf(stderr, "  ... in key set '%s' (%zu keys)\n", name, m.size());
}

void test_random_sets() {
  std::mt19937_64 rng(12345);
  const int alphabets[] = {1, 2, 4, 26, 256};
  for (int round = 0; round < 200; ++round) {
    const int alphabet = alphabets[round % 5];
    const size_t max_len = 1 + rng() % 40;
    const size_t count = 1 + rng() % (round < 180 ? 300 : 5000);
    KeyMap m;
    for (size_t i = 0; i < count; ++i) {
      std::string k = random_string(rng, 1 + rng() % max_len, alphabet);
      const int32_t val = rng() % 7 == 0 ? std::numeric_limits<int32_t>::max() - static_cast<int32_t>(i)
                                         : static_cast<int32_t>(rng() % 1000000);
      m.emplace(std::move(k), val);
    }
    check_keys(m, rng, "random");
  }
}

void test_edge_sets() {
  std::mt19937_64 rng(7);
  KeyMap m;

  // Every single byte, then every byte below 0x00 and 0xFF.
  for (int c = 0; c < 256; ++c) m.emplace(std::string(1, static_cast<char>(c)), c);
  check_keys(m, rng, "all single bytes");
  for (int c = 0; c < 256; ++c) {
    m.emplace(std::string(1, '\0') + static_cast<char>(c), 1000 + c);
    m.emplace(std::string(1, '\xff') + static_cast<char>(c), 2000 + c);
  }
  check_keys(m, rng, "all single bytes + 0x00/0xFF pairs");

  // Only the extreme bytes.
  m = {{std::string(1, '\0'), 0},        {std::string(2, '\0'), 1},
       {std::string(1, '\xff'), 2},      {std::string(3, '\xff'), 3},
       {std::string("\0\xff", 2), 4},    {std::string("\xff\0", 2), 5}};
  check_keys(m, rng, "0x00/0xFF");

  // A single key whose only byte is 0x00: its slot is base[0] + 0, which must not be the root.
  m = {{std::string(1, '\0'), 7}};
  check_keys(m, rng, "one 0x00 key");
  m = {{std::string(1, '\xff'), 7}};
  check_keys(m, rng, "one 0xFF key");

  // Prefix chains.
  m.clear();
  for (int i = 1; i <= 300; ++i) m.emplace(std::string(i, 'a'), i);
  for (int i = 1; i <= 300; i += 3) m.emplace(std::string(i, '\xff'), 1000 + i);
  check_keys(m, rng, "prefix chains");

  // Long keys: one very long (no recursion allowed), several sharing long prefixes.
  m.clear();
  m.emplace(random_string(rng, 100000, 256), 1);
  std::string stem = random_string(rng, 5000, 256);
  for (int i = 0; i < 10; ++i) m.emplace(stem.substr(0, 4000 + 100 * i) + static_cast<char>(i), 10 + i);
  m.emplace(stem, 99);
  check_keys(m, rng, "long keys");

  // Dense fan-out: every two-byte key over 64 byte values (many fully branching nodes).
  m.clear();
  for (int a = 0; a < 64; ++a)
    for (int b = 0; b < 64; ++b)
      m.emplace(std::string{static_cast<char>(a * 4), static_cast<char>(255 - b)}, a * 64 + b);
  check_keys(m, rng, "dense");

  // No keys at all: just a root.
  m.clear();
  const DoubleArrayData d = build(m);
  check_structure(d, m);
  CHECK(d.base.size() == 1);
  const DoubleArrayView v(d);
  check_query(v, m, {}, "");
  check_query(v, m, {}, "abc");
}

template <class F>
bool throws_invalid_argument(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

void test_errors() {
  using Keys = std::vector<std::pair<std::string_view, int32_t>>;
  CHECK(throws_invalid_argument([] { build_double_array(Keys{{"a", 1}, {"", 2}}); }));
  CHECK(throws_invalid_argument([] { build_double_array(Keys{{"ab", 1}, {"b", 2}, {"ab", 3}}); }));
  CHECK(throws_invalid_argument([] { build_double_array(Keys{{"a", 1}, {"b", -1}}); }));
  CHECK(throws_invalid_argument(
      [] { build_double_array(Keys{{"a", std::numeric_limits<int32_t>::min()}}); }));
  // Distinct keys that differ only past an embedded 0x00 are not duplicates.
  CHECK(!throws_invalid_argument([] {
    build_double_array(Keys{{std::string_view("a\0b", 3), 1}, {std::string_view("a\0c", 3), 2}});
  }));
}

// ---- Hostile views: garbage arrays must give answers, never out-of-range reads. ----

void hostile_queries(const DoubleArrayView& v, std::mt19937_64& rng) {
  for (int q = 0; q < 50; ++q) {
    const std::string s = random_string(rng, rng() % 20, q % 2 ? 256 : 4);
    const uint8_t* p = bytes(s);
    volatile int64_t sink = 0;
    sink = sink + v.find(p, s.size());
    sink = sink + v.walk(DoubleArrayView::kRoot, p, s.size());
    v.for_each_prefix(p, s.size(), [&](size_t len, int32_t val) {
      sink = sink + static_cast<int64_t>(len) + val;
      return true;
    });
    int32_t val = 0;
    sink = sink + static_cast<int64_t>(v.longest_prefix(p, s.size(), &val));
    const int32_t from = static_cast<int32_t>(rng() % v.size());  // any valid node index
    const int32_t node = v.walk(from, p, s.size());
    CHECK(node < 0 || static_cast<uint32_t>(node) < v.size());
    if (node >= 0) sink = sink + v.value_at(node);
  }
}

void test_hostile_views() {
  std::mt19937_64 rng(99);
  const int32_t kMin = std::numeric_limits<int32_t>::min(), kMax = std::numeric_limits<int32_t>::max();
  for (int round = 0; round < 5000; ++round) {
    const size_t n = 1 + rng() % 300;
    // Exactly sized heap arrays, so AddressSanitizer flags even a one-past-the-end read.
    std::vector<crayon::DoubleArrayUnit> units(n);
    std::vector<int32_t> values(n);
    auto garbage = [&]() -> int32_t {
      switch (rng() % 6) {
        case 0: return static_cast<int32_t>(rng());
        case 1: return kMin + static_cast<int32_t>(rng() % 300);
        case 2: return kMax - static_cast<int32_t>(rng() % 300);
        case 3: return -1;
        default: return static_cast<int32_t>(rng() % (n + 4)) - 2;
      }
    };
    for (size_t i = 0; i < n; ++i) {
      units[i].base = garbage();
      units[i].check = rng() % 3 ? static_cast<int32_t>(rng() % n) : garbage();
      values[i] = garbage();
    }
    hostile_queries(DoubleArrayView(units.data(), values.data(), static_cast<uint32_t>(n)), rng);
  }

  // A real trie with a few entries corrupted.
  KeyMap m;
  for (int i = 0; i < 500; ++i) m.emplace(random_string(rng, 1 + rng() % 8, 8), i);
  const DoubleArrayData good = build(m);
  for (int round = 0; round < 500; ++round) {
    DoubleArrayData d = good;
    const size_t n = d.base.size();
    for (int k = 0; k < 1 + round % 8; ++k) {
      const size_t i = rng() % n;
      switch (rng() % 3) {
        case 0: d.base[i] = static_cast<int32_t>(rng()); break;
        case 1: d.check[i] = static_cast<int32_t>(rng() % (n + 2)) - 1; break;
        default: d.base[i] = static_cast<int32_t>(n) - static_cast<int32_t>(rng() % 256); break;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      d.units[i] = crayon::DoubleArrayUnit{d.base[i], d.check[i]};
    }
    hostile_queries(DoubleArrayView(d), rng);
  }
}

// ---- Real vocabularies: correctness and timing. ----

void time_vocab(const char* path) {
  std::ifstream f(path);
  if (!f) {
    std::printf("vocab %s: not readable, skipped\n", path);
    return;
  }
  KeyMap m;
  size_t key_bytes = 0;
  std::string line, token;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    CHECK(sp != std::string::npos);
    if (sp == std::string::npos) return;
    CHECK(crayon_test::decode_base64(line.substr(0, sp), &token));
    key_bytes += token.size();
    m.emplace(token, static_cast<int32_t>(std::stol(line.substr(sp + 1))));
  }
  std::vector<std::pair<std::string_view, int32_t>> keys(m.begin(), m.end());
  std::mt19937_64 rng(1);
  std::shuffle(keys.begin(), keys.end(), rng);  // the builder must not rely on input order

  double best_ms = 1e30;
  DoubleArrayData d;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    d = build_double_array(keys);
    const auto t1 = std::chrono::steady_clock::now();
    best_ms = std::min(best_ms, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  const size_t nodes = check_structure(d, m);
  const DoubleArrayView v(d);
  for (const auto& [k, val] : m) CHECK(v.find(bytes(k), k.size()) == val);
  std::printf("vocab %s: %zu keys, %zu key bytes; build %.1f ms (best of 5); %zu nodes, %zu slots, "
              "fill %.3f\n",
              path, m.size(), key_bytes, best_ms, nodes, d.base.size(),
              static_cast<double>(nodes) / static_cast<double>(d.base.size()));
}

}  // namespace

int main(int argc, char** argv) {
  test_errors();
  test_edge_sets();
  test_random_sets();
  test_hostile_views();
  for (int i = 1; i < argc; ++i) time_vocab(argv[i]);
  if (g_failures) {
    std::fprintf(stderr, "FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("double_array: all checks passed\n");
  return 0;
}
