// A short byte string as three machine words and a hash: the key of the per-thread PieceCache.
//
//   bytes s[0, n) --overlapping loads inside [s, s + n)--> w[0..2] --mix--> hash
//
// For n <= 24 every byte of s lands at a fixed place of w for that n, so (n, w) identifies s;
// longer strings keep their first 16 and last 8 bytes in w (callers compare the rest). The loads
// never read outside the string, and there is no memcpy into a zeroed buffer (whose store-to-load
// forwarding stall cost more than the rest of a cache probe).
//
// No cartridge section is laid out by this hash today. A whole-token table keyed by it (TKHS) was
// built and measured, and not kept (docs/benchmarks.md, "Cold caches"); a section that did use it
// would make the hash part of the format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace crayon {

struct ByteKey {
  uint64_t w[3];
  uint64_t hash;
  uint32_t len;
};

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Key of s[0, n), n >= 1 (n < 2^32).
inline ByteKey make_byte_key(const uint8_t* s, size_t n) {
  ByteKey k{{0, 0, 0}, 0, static_cast<uint32_t>(n)};
  if (n >= 8) {
    k.w[0] = load_u64(s);
    if (n > 16) {
      k.w[1] = load_u64(s + 8);
      k.w[2] = load_u64(s + n - 8);
    } else if (n > 8) {
      k.w[1] = load_u64(s + n - 8);
    }
  } else if (n >= 4) {
    k.w[0] = load_u32(s) | uint64_t{load_u32(s + n - 4)} << 32;
  } else {
    k.w[0] = s[0] | uint64_t{s[n >> 1]} << 8 | uint64_t{s[n - 1]} << 16;
  }
  uint64_t h = (k.w[0] ^ (uint64_t{k.len} << 56)) * 0x9E3779B97F4A7C15ull;
  h = (h ^ (h >> 29) ^ k.w[1]) * 0xff51afd7ed558ccdull;
  h = (h ^ (h >> 32) ^ k.w[2]) * 0xc4ceb9fe1a85ec53ull;
  k.hash = h ^ (h >> 31);
  return k;
}

}  // namespace crayon
