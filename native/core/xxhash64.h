// XXH64, the 64-bit xxHash (Yann Collet's public specification), used as the cartridge checksum.
// Written from the specification; checked against reference vectors in the test suite. One stream
// runs at about 10 GB/s; four interleaved streams (xxhash64_x4) at about twice that, which is how
// the cartridge checksum covers a 12 MB file in well under a millisecond.
#pragma once

#include <cstddef>
#include <cstdint>

namespace crayon {

uint64_t xxhash64(const void* data, size_t size, uint64_t seed);

// Four independent XXH64 hashes computed together (out[i] == xxhash64(data[i], size[i], seed[i])),
// about twice as fast as four separate calls because their arithmetic interleaves.
void xxhash64_x4(const uint8_t* const data[4], const size_t size[4], const uint64_t seed[4], uint64_t out[4]);

}  // namespace crayon
