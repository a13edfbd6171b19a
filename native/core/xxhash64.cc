#include "core/xxhash64.h"

#include <algorithm>
#include <cstring>

namespace crayon {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr uint64_t kP3 = 0x165667B19E3779F9ULL;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ULL;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ULL;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// Little-endian loads; memcpy compiles to a single move on every target we build for.
inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t round(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = rotl(acc, 31);
  return acc * kP1;
}

inline uint64_t merge_round(uint64_t acc, uint64_t val) {
  acc ^= round(0, val);
  return acc * kP1 + kP4;
}

// The four accumulators of one XXH64 stream, consumed 32 bytes (a stripe) at a time.
struct Lanes {
  uint64_t v1, v2, v3, v4;
  explicit Lanes(uint64_t seed) : v1(seed + kP1 + kP2), v2(seed + kP2), v3(seed), v4(seed - kP1) {}
  void stripe(const uint8_t* p) {
    v1 = round(v1, load64(p));
    v2 = round(v2, load64(p + 8));
    v3 = round(v3, load64(p + 16));
    v4 = round(v4, load64(p + 24));
  }
};

// Finishes a stream: `lanes` has consumed data[0, done) (a multiple of 32), the rest is hashed
// here. `size` is the stream's total length.
uint64_t finish(Lanes lanes, uint64_t seed, const uint8_t* data, size_t done, size_t size) {
  const uint8_t* p = data + done;
  const uint8_t* const end = data + size;
  while (p + 32 <= end) {
    lanes.stripe(p);
    p += 32;
  }
  uint64_t h;
  if (size >= 32) {
    h = rotl(lanes.v1, 1) + rotl(lanes.v2, 7) + rotl(lanes.v3, 12) + rotl(lanes.v4, 18);
    h = merge_round(h, lanes.v1);
    h = merge_round(h, lanes.v2);
    h = merge_round(h, lanes.v3);
    h = merge_round(h, lanes.v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(size);
  while (p + 8 <= end) {
    h ^= round(0, load64(p));
    h = rotl(h, 27) * kP1 + kP4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= static_cast<uint64_t>(load32(p)) * kP1;
    h = rotl(h, 23) * kP2 + kP3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * kP5;
    h = rotl(h, 11) * kP1;
    ++p;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace

uint64_t xxhash64(const void* data, size_t size, uint64_t seed) {
  return finish(Lanes(seed), seed, static_cast<const uint8_t*>(data), 0, size);
}

void xxhash64_x4(const uint8_t* const data[4], const size_t size[4], const uint64_t seed[4], uint64_t out[4]) {
  Lanes a(seed[0]), b(seed[1]), c(seed[2]), d(seed[3]);
  // Sixteen independent multiply chains per step instead of four: the streams run in lockstep
  // over the stripes they all have, then each finishes on its own.
  const size_t common = std::min({size[0], size[1], size[2], size[3]}) / 32 * 32;
  for (size_t off = 0; off < common; off += 32) {
    a.stripe(data[0] + off);
    b.stripe(data[1] + off);
    c.stripe(data[2] + off);
    d.stripe(data[3] + off);
  }
  out[0] = finish(a, seed[0], data[0], common, size[0]);
  out[1] = finish(b, seed[1], data[1], common, size[1]);
  out[2] = finish(c, seed[2], data[2], common, size[2]);
  out[3] = finish(d, seed[3], data[3], common, size[3]);
}

}  // namespace crayon
