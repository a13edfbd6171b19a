// Skipping runs of ASCII bytes eight at a time (SWAR: one 64-bit word, a few adds and a count of
// trailing zeros), for the scanners whose runs of plain ASCII bytes are long: the pre-tokenizers'
// letter runs, WhitespaceSplit's words, Metaspace's words.
//
// A byte-at-a-time loop pays a mispredicted exit per run (runs vary in length); here a run of up
// to eight bytes is one load. Each caller says where to stop with a word predicate that sets the
// high bit of every byte to stop at; the predicates below cannot carry from one byte into the
// next (each works on bytes whose high bit is cleared first, or tests it separately).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace crayon::swar {

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHigh = 0x8080808080808080ull;

// The first position in [pos, end) whose byte `stop` marks, or the first position from which
// fewer than eight bytes are left (the caller goes on byte by byte from there). `stop(x)` returns
// a word whose bytes have their high bit set where x's bytes are to stop at (other bits ignored).
// On big-endian machines nothing is skipped.
template <class Stop>
inline size_t skip(const uint8_t* s, size_t pos, size_t end, Stop stop) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (pos + 8 <= end) {
    uint64_t x;
    std::memcpy(&x, s + pos, 8);
    const uint64_t m = stop(x) & kHigh;
    if (m != 0) return pos + (static_cast<size_t>(__builtin_ctzll(m)) >> 3);
    pos += 8;
  }
#endif
  return pos;
}

// Bytes >= 0x80, and bytes equal to c (c < 0x80).
inline uint64_t non_ascii_or_byte(uint64_t x, uint8_t c) {
  const uint64_t y = x ^ (kOnes * c);  // a zero byte where x has c
  return x | ((y - kOnes) & ~y);
}

// Bytes >= 0x80, and bytes <= c (c < 0x7F).
inline uint64_t non_ascii_or_at_most(uint64_t x, uint8_t c) {
  return x | (((x | kHigh) - kOnes * (c + 1)) ^ kHigh);  // b - (c + 1) borrows where b <= c
}

// Bytes that may start a character for which Rust's char::is_whitespace holds: ASCII bytes up to
// 0x20, and the lead bytes of U+0085 and U+00A0 (C2), U+1680 (E1), U+2000..U+205F (E2) and U+3000
// (E3). No other byte starts one, nor is inside one (continuation bytes are 80..BF), so a run of
// other bytes, ASCII or not, holds no whitespace. Exact at the lowest marked byte, which is all
// `skip` reads (an equality test may also mark a byte above a true match).
inline uint64_t may_start_whitespace(uint64_t x) {
  auto equal = [x](uint8_t c) {
    const uint64_t y = x ^ (kOnes * c);
    return (y - kOnes) & ~y;
  };
  const uint64_t ascii_low = (((x | kHigh) - kOnes * 0x21) ^ kHigh) & ~x;
  return ascii_low | equal(0xC2) | equal(0xE1) | equal(0xE2) | equal(0xE3);
}

// Bytes >= 0x80, and bytes outside [lo, hi] (0x01 <= lo <= hi <= 0x7E) after `fold` is ORed into
// them (0x20 maps A-Z onto a-z and no other ASCII byte into a-z).
inline uint64_t non_ascii_or_outside(uint64_t x, uint8_t lo, uint8_t hi, uint8_t fold) {
  const uint64_t x7 = (x | kOnes * fold) & ~kHigh;
  const uint64_t in = (x7 + kOnes * (0x80 - lo)) & ~(x7 + kOnes * (0x80 - hi - 1)) & ~x;
  return ~in;
}

// The lead bytes E3..E9: those of kana, CJK punctuation and the CJK ideographs (U+3000..U+9FFF).
// Exact at every byte: the high nibble is tested for E, the low one for 3..9, with adds that stay
// inside their byte (a nibble plus at most 0x7D).
inline uint64_t cjk_lead(uint64_t x) {
  constexpr uint64_t kLow = kOnes * 0x0F, kLow7 = kOnes * 0x7F;
  const uint64_t high = (x & ~kLow) ^ (kOnes * 0xE0);  // zero where the high nibble is E
  const uint64_t high_not_e = high | ((high & kLow7) + kLow7);
  const uint64_t low = x & kLow;
  const uint64_t low_3_to_9 = (low + kOnes * (0x80 - 3)) & ~(low + kOnes * (0x80 - 10));
  return low_3_to_9 & ~high_not_e & kHigh;
}

}  // namespace crayon::swar
