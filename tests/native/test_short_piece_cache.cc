// models/short_piece_cache.h: a probe returns exactly the ids last put for the same engine tag and
// bytes, or misses; a run (more than kMaxIds ids whose tail repeats one id) is given back whole by
// the probes with room for it (find, holds_or_run) and missed by holds(), whose callers have
// room for kMaxIds ids only; what put() cannot keep is not kept.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "models/short_piece_cache.h"

namespace {

using crayon::ShortPieceCache;
using native_test::check;
using Key = std::pair<uint16_t, std::string>;

// make_key reads 16 bytes at the piece: a padded copy, with noise after the piece (masked off).
ShortPieceCache::Key key_of(const std::string& s, uint16_t tag, std::mt19937_64& rng) {
  uint8_t buf[32];
  for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
  std::memcpy(buf, s.data(), s.size());
  return ShortPieceCache::make_key(buf, s.size(), tag);
}

bool is_run(const std::vector<uint32_t>& ids) {
  if (ids.size() <= ShortPieceCache::kMaxIds) return false;
  for (size_t i = ShortPieceCache::kMaxIds; i < ids.size(); ++i) {
    if (ids[i] != ids[ShortPieceCache::kMaxIds - 1]) return false;
  }
  return true;
}

bool keepable(const std::vector<uint32_t>& ids) {
  return !ids.empty() && (ids.size() <= ShortPieceCache::kMaxIds || (ids.size() <= ShortPieceCache::kMaxRunIds && is_run(ids)));
}

}  // namespace

int main() {
  auto cache = std::make_unique<ShortPieceCache>();
  std::mt19937_64 rng(2026);
  const uint16_t tags[2] = {cache->tag_of(101), cache->tag_of(202)};
  check(tags[0] != tags[1], "two engines, two tags");
  std::map<Key, std::vector<uint32_t>> truth;  // the last keepable ids put for each (tag, bytes)
  std::vector<Key> keys;
  size_t hits = 0, run_hits = 0;
  for (int round = 0; round < 300000; ++round) {
    Key key;
    if (keys.empty() || rng() % 3 != 0) {
      std::string s(1 + rng() % ShortPieceCache::kMaxLen, '\0');
      for (char& c : s) c = " \n\ta"[rng() % 4];  // few bytes: many keys share prefixes and lengths
      key = {tags[rng() % 2], s};
    } else {
      key = keys[keys.size() - 1 - rng() % std::min<size_t>(keys.size(), 500)];
    }
    const ShortPieceCache::Key k = key_of(key.second, key.first, rng);
    auto it = truth.find(key);
    // Every probe agrees with the others and, on a hit, with the truth.
    std::vector<uint32_t> found = {7};  // found ids are appended after what is there
    const bool hit = cache->find(key.first, k, found);
    check(hit == cache->holds_or_run(key.first, k), "find and holds_or_run agree");
    if (hit) {
      ++hits;
      check(it != truth.end(), "a hit for bytes never kept");
      if (it == truth.end()) continue;
      check(found.size() == it->second.size() + 1 && found[0] == 7 &&
                std::equal(it->second.begin(), it->second.end(), found.begin() + 1),
            "find gives the ids put");
      uint32_t w[ShortPieceCache::kMaxRunIds];
      const size_t n = cache->copy_held_or_run(k, w);
      check(n == it->second.size() && std::equal(w, w + n, it->second.begin()), "copy_held_or_run gives the ids put");
      const bool run = it->second.size() > ShortPieceCache::kMaxIds;
      run_hits += run;
      check(cache->holds(key.first, k) == !run, "holds() misses runs alone");
      if (!run) {
        uint32_t few[ShortPieceCache::kMaxIds];
        check(cache->copy_held(k, few) == n && std::equal(few, few + n, w), "copy_held gives the ids put");
      }
    } else {
      check(!cache->holds(key.first, k), "holds() never hits where find misses");
    }
    // Offer new ids: few, runs of every length, near-runs, too many.
    std::vector<uint32_t> ids(1 + rng() % (ShortPieceCache::kMaxRunIds + 2));
    for (uint32_t& id : ids) id = static_cast<uint32_t>(rng() % 5);
    if (ids.size() > ShortPieceCache::kMaxIds && rng() % 4 != 0) {
      for (size_t i = ShortPieceCache::kMaxIds; i < ids.size(); ++i) ids[i] = ids[ShortPieceCache::kMaxIds - 1];
      if (rng() % 5 == 0) ids[ids.size() - 1 - rng() % (ids.size() - ShortPieceCache::kMaxIds)] += 1;  // one off
    }
    cache->put(key.first, k, ids.data(), ids.size());
    if (keepable(ids)) {
      truth[key] = ids;
      if (it == truth.end()) keys.push_back(key);
    }
    // A slot holds one key: a keepable put evicts whatever shared the slot (stale truth entries
    // are harmless: a later probe of them may only miss, which is checked above as allowed).
    if (keepable(ids)) {
      std::vector<uint32_t> again;
      check(cache->find(key.first, k, again) && again == ids, "a keepable put is found at once, as put");
    }
  }
  check(hits > 10000 && run_hits > 1000, "the rounds hit, runs too");
  std::printf("%zu hits, %zu of runs\n", hits, run_hits);
  return native_test::exit_code();
}
