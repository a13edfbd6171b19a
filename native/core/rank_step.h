// Ranks made ids by one constant step, in place: the ids-only loops of the tokenizers face, where
// every id is its rank plus the step (HfBpeModel::ids_of_ranks; build_fast_path numbers single
// bytes' ranks by their tokens' ids where those are contiguous).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace crayon {

// ids[i] += step for i < n, and whether every ids[i] was below n_ranks before (false: some were
// not, which only a damaged cartridge gives; the ids are then all stepped anyway). Four at a time
// where SSE2 is (GCC's -O2 leaves the plain loop scalar, ten instructions a token); SSE2 compares
// signed, so both sides are offset by 2^31 for the unsigned test.
inline bool add_rank_step(uint32_t* ids, size_t n, uint32_t step, uint32_t n_ranks) {
  if (n_ranks == 0) {
    for (size_t i = 0; i < n; ++i) ids[i] += step;
    return n == 0;
  }
  uint32_t bad = 0;
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i flip = _mm_set1_epi32(INT32_MIN);
  const __m128i last = _mm_xor_si128(_mm_set1_epi32(static_cast<int32_t>(n_ranks - 1)), flip);
  const __m128i add = _mm_set1_epi32(static_cast<int32_t>(step));
  __m128i over = _mm_setzero_si128();
  for (; i + 4 <= n; i += 4) {
    __m128i* at = reinterpret_cast<__m128i*>(ids + i);
    const __m128i r = _mm_loadu_si128(at);
    over = _mm_or_si128(over, _mm_cmpgt_epi32(_mm_xor_si128(r, flip), last));
    _mm_storeu_si128(at, _mm_add_epi32(r, add));
  }
  bad = static_cast<uint32_t>(_mm_movemask_epi8(over));
#endif
  for (; i < n; ++i) {
    const uint32_t r = ids[i];
    bad |= static_cast<uint32_t>(r >= n_ranks);
    ids[i] = r + step;
  }
  return bad == 0;
}

}  // namespace crayon
