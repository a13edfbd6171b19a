// native/core/rank_step.h checked against the plain loop: lengths 0-40 (every SIMD tail), steps
// and rank counts at the edges of the signed and unsigned ranges (the SIMD compare is signed,
// offset by 2^31), and an out-of-range rank at every position. Built twice by
// tests/test_piece_cache.py: as the engine is (SSE2 on x86-64) and with -U__SSE2__ (the plain loop).
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "core/rank_step.h"

namespace {

bool plain(std::vector<uint32_t>& ids, uint32_t step, uint32_t n_ranks) {
  bool ok = true;
  for (uint32_t& r : ids) {
    ok = ok && r < n_ranks;
    r += step;
  }
  return ok;
}

int failures = 0;

void check(const std::vector<uint32_t>& ranks, uint32_t step, uint32_t n_ranks) {
  std::vector<uint32_t> want = ranks, got = ranks;
  const bool want_ok = plain(want, step, n_ranks);
  const bool got_ok = crayon::add_rank_step(got.data(), got.size(), step, n_ranks);
  if (want_ok != got_ok || want != got) {
    if (++failures <= 10) {
      std::printf("mismatch: n=%zu step=%u n_ranks=%u ok=%d/%d\n", ranks.size(), step, n_ranks, got_ok, want_ok);
    }
  }
}

}  // namespace

int main() {
  std::mt19937 rng(7);
  const uint32_t edges[] = {0u, 1u, 2u, 255u, 256u, 151643u, 0x7FFFFFFEu, 0x7FFFFFFFu, 0x80000000u, 0x80000001u,
                            0xFFFFFFFEu, 0xFFFFFFFFu};
  size_t cases = 0;
  for (const uint32_t n_ranks : edges) {
    for (const uint32_t step : {0u, 3u, 0x80000000u, 0xFFFFFFFFu}) {
      for (size_t n = 0; n <= 40; ++n) {
        // In range, then one rank out of range (or at an edge) at each position.
        std::vector<uint32_t> ranks(n);
        for (uint32_t& r : ranks) r = n_ranks == 0 ? 0 : static_cast<uint32_t>(rng() % n_ranks);
        check(ranks, step, n_ranks), ++cases;
        for (size_t at = 0; at < n; ++at) {
          for (const uint32_t bad : edges) {
            std::vector<uint32_t> with = ranks;
            with[at] = bad;
            check(with, step, n_ranks), ++cases;
          }
        }
      }
    }
  }
  std::printf("%zu cases, %d mismatches\n", cases, failures);
  return failures == 0 ? 0 : 1;
}
