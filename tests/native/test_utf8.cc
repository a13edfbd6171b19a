// native/core/utf8.h: decode() and decode_common() against a decoder written from the Unicode
// Standard's table of well-formed byte sequences (Table 3-7), for every first three bytes, a
// fourth byte that does and one that does not continue, and every count of readable bytes.
// decode_common() is the scanners' inline fast path (its three-byte test works on the code point,
// not on the lead-dependent ranges of the second byte); both must give the table's answer: the
// character and its length where the bytes start a well-formed sequence, else one invalid byte.
#include <cstdint>
#include <cstdio>

#include "core/utf8.h"

namespace {

using crayon::utf8::Decoded;
using crayon::utf8::kInvalid;

bool in(uint32_t b, uint32_t lo, uint32_t hi) { return b >= lo && b <= hi; }

// Table 3-7: the well-formed sequences, row by row.
Decoded table(const uint8_t* p, size_t avail) {
  const uint32_t b0 = p[0];
  const uint32_t b1 = avail > 1 ? p[1] : 0, b2 = avail > 2 ? p[2] : 0, b3 = avail > 3 ? p[3] : 0;
  const Decoded bad{kInvalid, 1};
  if (b0 <= 0x7F) return {b0, 1};
  if (in(b0, 0xC2, 0xDF)) return avail >= 2 && in(b1, 0x80, 0xBF) ? Decoded{(b0 & 0x1F) << 6 | (b1 & 0x3F), 2} : bad;
  uint32_t lo1 = 0x80, hi1 = 0xBF;
  if (b0 == 0xE0) lo1 = 0xA0;
  if (b0 == 0xED) hi1 = 0x9F;
  if (in(b0, 0xE0, 0xEF)) {
    if (avail < 3 || !in(b1, lo1, hi1) || !in(b2, 0x80, 0xBF)) return bad;
    return {(b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F), 3};
  }
  if (b0 == 0xF0) lo1 = 0x90;
  if (b0 == 0xF4) hi1 = 0x8F;
  if (in(b0, 0xF0, 0xF4)) {
    if (avail < 4 || !in(b1, lo1, hi1) || !in(b2, 0x80, 0xBF) || !in(b3, 0x80, 0xBF)) return bad;
    return {(b0 & 0x07) << 18 | (b1 & 0x3F) << 12 | (b2 & 0x3F) << 6 | (b3 & 0x3F), 4};
  }
  return bad;  // C0, C1, F5..FF and stray continuation bytes
}

int failures = 0;

void check(const char* what, const uint8_t* p, size_t avail, Decoded got, Decoded want) {
  if (got.cp == want.cp && got.len == want.len) return;
  if (++failures <= 10) {
    std::printf("%s: bytes %02X %02X %02X %02X avail %zu: got (%X, %u) want (%X, %u)\n", what, p[0], p[1], p[2], p[3],
                avail, got.cp, got.len, want.cp, want.len);
  }
}

}  // namespace

int main() {
  uint64_t cases = 0;
  // Buffers of exactly 1..4 bytes, so that a read past `end` is ASan's to report.
  uint8_t* buffers[5] = {nullptr, new uint8_t[1], new uint8_t[2], new uint8_t[3], new uint8_t[4]};
  const uint8_t fourth[] = {0x80, 0xBF, 0x41, 0xC0};
  for (uint32_t b0 = 0; b0 < 256; ++b0) {
    for (uint32_t b1 = 0; b1 < 256; ++b1) {
      for (uint32_t b2 = 0; b2 < 256; ++b2) {
        for (const uint8_t b3 : fourth) {
          const uint8_t bytes[4] = {static_cast<uint8_t>(b0), static_cast<uint8_t>(b1), static_cast<uint8_t>(b2), b3};
          for (size_t avail = 1; avail <= 4; ++avail) {
            uint8_t* p = buffers[avail];
            for (size_t k = 0; k < avail; ++k) p[k] = bytes[k];
            const Decoded want = table(bytes, avail);
            check("decode", bytes, avail, crayon::utf8::decode(p, p + avail), want);
            check("decode_common", bytes, avail, crayon::utf8::decode_common(p, p + avail), want);
            ++cases;
          }
          if (b0 < 0xF0 || b0 > 0xF4) break;  // the fourth byte matters only after a four-byte lead
        }
        if (b0 < 0xE0) break;  // the third only after a lead of three or four bytes
      }
      if (b0 < 0xC0) break;  // the second not after ASCII or a continuation byte
    }
  }
  for (uint8_t* b : buffers) delete[] b;
  std::printf("%llu cases, %d failures\n", static_cast<unsigned long long>(cases), failures);
  return failures == 0 ? 0 : 1;
}
