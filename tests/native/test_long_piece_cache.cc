// models/long_piece_cache.h: a hit returns exactly the ids put for the same engine tag and bytes,
// whatever collides, fills up or is cleared; nothing is kept past its limits.
#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "models/long_piece_cache.h"

namespace {

using native_test::check;

using crayon::LongPieceCache;
using Key = std::pair<uint64_t, std::string>;

const uint8_t* bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

}  // namespace

int main() {
  LongPieceCache cache;
  std::mt19937_64 rng(12345);
  std::map<Key, std::vector<uint32_t>> truth;  // what was put last for each (tag, bytes)
  std::vector<Key> keys;

  // A miss on an empty cache, before anything is allocated.
  {
    std::vector<uint32_t> out;
    const std::string s(40, 'x');
    check(!cache.find(1, LongPieceCache::hash(1, bytes(s), s.size()), bytes(s), s.size(), out) && out.empty(),
          "an empty cache misses");
  }

  // Many more pieces than the arena holds (several clearings), from two engine tags sharing
  // bytes, some with one shared hash (forced collisions): every find is a miss or the truth.
  size_t hits = 0, finds = 0;
  for (int round = 0; round < 200000; ++round) {
    const bool fresh = keys.empty() || rng() % 3 != 0;
    Key key;
    if (fresh) {
      const size_t n = 1 + rng() % LongPieceCache::kMaxLen;
      std::string s(n, '\0');
      for (char& c : s) c = static_cast<char>(rng() % 4);  // few letters: many shared prefixes
      key = {1 + rng() % 2, s};
    } else {
      key = keys[keys.size() - 1 - rng() % std::min<size_t>(keys.size(), 300)];  // a recent one
    }
    const bool collide = key.second.size() % 5 == 0;
    const uint64_t h = collide ? 0x1234567 : LongPieceCache::hash(key.first, bytes(key.second), key.second.size());
    std::vector<uint32_t> out = {7};  // found ids are appended after what is there
    ++finds;
    if (cache.find(key.first, h, bytes(key.second), key.second.size(), out)) {
      ++hits;
      auto it = truth.find(key);
      check(it != truth.end(), "a hit for bytes never put");
      if (it != truth.end()) {
        std::vector<uint32_t> want = {7};
        want.insert(want.end(), it->second.begin(), it->second.end());
        check(out == want, "a hit returns exactly the ids put");
      }
      continue;
    }
    check(out.size() == 1, "a miss appends nothing");
    // Mostly a few ids (as a word has), now and then the most a slot takes (the arena fills).
    std::vector<uint32_t> ids(rng() % 50 == 0 ? LongPieceCache::kMaxIds : 1 + rng() % 16);
    for (uint32_t& id : ids) id = static_cast<uint32_t>(rng());
    cache.put(key.first, h, bytes(key.second), key.second.size(), ids.data(), ids.size());
    truth[key] = ids;
    if (fresh) keys.push_back(key);
  }
  check(hits > finds / 10, "repeated pieces hit");

  // Limits: a piece past kMaxLen bytes, or with no ids or more than kMaxIds, is not kept.
  {
    const std::string longer(LongPieceCache::kMaxLen + 1, 'a'), fine(30, 'b');
    const std::vector<uint32_t> many(LongPieceCache::kMaxIds + 1, 3), some(5, 4);
    const uint64_t hl = LongPieceCache::hash(9, bytes(longer), longer.size());
    const uint64_t hf = LongPieceCache::hash(9, bytes(fine), fine.size());
    cache.put(9, hl, bytes(longer), longer.size(), some.data(), some.size());
    cache.put(9, hf, bytes(fine), fine.size(), many.data(), many.size());
    cache.put(9, hf, bytes(fine), fine.size(), some.data(), 0);
    std::vector<uint32_t> out;
    check(!cache.find(9, hl, bytes(longer), longer.size(), out), "a piece past kMaxLen is not kept");
    check(!cache.find(9, hf, bytes(fine), fine.size(), out), "more than kMaxIds ids, or none, are not kept");
    cache.put(9, hf, bytes(fine), fine.size(), some.data(), some.size());
    check(cache.find(9, hf, bytes(fine), fine.size(), out) && out == some, "a piece within the limits is kept");
    out.clear();
    check(!cache.find(10, hf, bytes(fine), fine.size(), out), "another engine tag misses");
  }

  // A piece kept already is not kept twice (the engine offers it again after its PieceCache mark
  // is evicted); another piece of the same hash still is.
  {
    LongPieceCache fresh;
    const std::string a(40, 'c'), b(40, 'd');
    const std::vector<uint32_t> ids = {7, 8, 9};
    const uint64_t h = LongPieceCache::hash(3, bytes(a), a.size());
    fresh.put(3, h, bytes(a), a.size(), ids.data(), ids.size());
    fresh.put(3, h, bytes(a), a.size(), ids.data(), ids.size());
    check(fresh.size() == 1, "a piece put twice is kept once");
    fresh.put(3, h, bytes(b), b.size(), ids.data(), 2);  // a forced collision: b under a's hash
    std::vector<uint32_t> out;
    check(fresh.size() == 2 && fresh.find(3, h, bytes(b), b.size(), out) && out == std::vector<uint32_t>{7, 8},
          "a colliding piece is kept beside the first");
  }

  std::printf("%zu finds, %zu hits, %d failures\n", finds, hits, native_test::failures);
  return native_test::exit_code();
}
