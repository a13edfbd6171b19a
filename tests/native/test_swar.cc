// core/swar.h's cjk_lead: the high bit of exactly the bytes E3..E9, for every byte value at every
// position of the word, beside neighbours of every kind (none may carry into it).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/swar.h"

namespace {

bool is_cjk_lead(uint8_t b) { return b >= 0xE3 && b <= 0xE9; }

}  // namespace

int main() {
  long failures = 0, cases = 0;
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int pos = 0; pos < 8; ++pos) {
    for (int v = 0; v < 256; ++v) {
      for (int fill = 0; fill < 260; ++fill) {
        uint8_t bytes[8];
        // Neighbours: each single byte value repeated, then random words.
        for (int k = 0; k < 8; ++k) bytes[k] = fill < 256 ? static_cast<uint8_t>(fill) : static_cast<uint8_t>(next());
        bytes[pos] = static_cast<uint8_t>(v);
        uint64_t x;
        std::memcpy(&x, bytes, 8);
        const uint64_t got = crayon::swar::cjk_lead(x);
        uint64_t want = 0;
        for (int k = 0; k < 8; ++k) {
          uint8_t b;
          std::memcpy(&b, reinterpret_cast<const uint8_t*>(&x) + k, 1);
          if (is_cjk_lead(b)) want |= uint64_t{0x80} << (8 * k);
        }
        ++cases;
        if (got != want && failures++ < 5) {
          std::printf("FAILED: %016llx gave %016llx, want %016llx\n", static_cast<unsigned long long>(x),
                      static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
        }
      }
    }
  }
  std::printf("cjk_lead: %ld cases, %ld failures\n", cases, failures);
  if (failures == 0) std::printf("swar: ALL OK\n");
  return failures == 0 ? 0 : 1;
}
