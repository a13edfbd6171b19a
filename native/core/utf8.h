// UTF-8 decoding of one code point, for scanners that walk text a character at a time.
//
// Accepts exactly the well-formed sequences of Unicode Table 3-7 (no overlongs, no surrogates,
// nothing above U+10FFFF). Anything else decodes as a one-byte character kInvalid, so a scanner
// always advances and never reads past `end`.
#pragma once

#include <cstddef>
#include <cstdint>

namespace crayon::utf8 {

// Returned for a byte that does not start a well-formed sequence; it has no Unicode flags.
inline constexpr uint32_t kInvalid = 0xFFFFFFFFu;

struct Decoded {
  uint32_t cp;   // code point, or kInvalid
  uint32_t len;  // bytes consumed: 1..4, never 0
};

// Whether b continues a multi-byte character (10xxxxxx).
inline bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Bytes of the character a lead byte b announces (1 for ASCII and for a stray continuation byte);
// not a check that they follow.
inline uint32_t sequence_length(uint8_t b) { return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

// The code point of the three bytes at p, which must be a well-formed three-byte character.
inline uint32_t three_byte_cp(const uint8_t* p) {
  return (uint32_t{p[0]} & 0x0F) << 12 | (uint32_t{p[1]} & 0x3F) << 6 | (p[2] & 0x3Fu);
}

// The code point of the well-formed two-byte character at p (a lead C2..DF and a continuation
// byte, `avail` bytes readable), else 0.
inline uint32_t two_byte_cp(const uint8_t* p, size_t avail) {
  const uint32_t b0 = p[0];
  if (b0 - 0xC2 >= 0xE0 - 0xC2 || avail < 2 || !is_continuation(p[1])) return 0;
  return (b0 & 0x1F) << 6 | (p[1] & 0x3Fu);
}

// Decodes the character at p; requires p < end.
inline Decoded decode(const uint8_t* p, const uint8_t* end) {
  const uint32_t b0 = p[0];
  if (b0 < 0x80) return {b0, 1};
  const size_t avail = static_cast<size_t>(end - p);
  auto cont = [](uint32_t b) { return (b & 0xC0) == 0x80; };
  if (b0 < 0xC2) return {kInvalid, 1};  // continuation byte or overlong 2-byte lead
  if (b0 < 0xE0) {
    if (avail < 2 || !cont(p[1])) return {kInvalid, 1};
    return {((b0 & 0x1F) << 6) | (p[1] & 0x3Fu), 2};
  }
  if (b0 < 0xF0) {
    if (avail < 3) return {kInvalid, 1};
    const uint32_t b1 = p[1], b2 = p[2];
    // E0 needs A0..BF (no overlongs); ED needs 80..9F (no surrogates).
    const uint32_t lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (b1 < lo || b1 > hi || !cont(b2)) return {kInvalid, 1};
    return {three_byte_cp(p), 3};
  }
  if (b0 < 0xF5) {
    if (avail < 4) return {kInvalid, 1};
    const uint32_t b1 = p[1], b2 = p[2], b3 = p[3];
    // F0 needs 90..BF (no overlongs); F4 needs 80..8F (nothing above U+10FFFF).
    const uint32_t lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (b1 < lo || b1 > hi || !cont(b2) || !cont(b3)) return {kInvalid, 1};
    return {((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F), 4};
  }
  return {kInvalid, 1};
}

// decode() for scanners' inner loops: ASCII and the well-formed two- and three-byte characters
// (the scripts of most text) inline, anything else through decode(). The same results.
// (decode() itself is not inlined into such loops, and its call was ~4% of a scan of other scripts.)
[[gnu::always_inline]] inline Decoded decode_common(const uint8_t* p, const uint8_t* end) {
  const uint32_t b0 = p[0];
  if (b0 < 0x80) return {b0, 1};
  const size_t avail = static_cast<size_t>(end - p);
  if (const uint32_t cp = two_byte_cp(p, avail)) return {cp, 2};
  if ((b0 & 0xF0) == 0xE0 && avail >= 3) {
    // Two continuation bytes, and a code point that is neither an overlong form (E0 80-9F ..,
    // below U+0800) nor a surrogate (ED A0-BF .., U+D800-U+DFFF): checked on the code point,
    // fewer tests than the lead-dependent ranges of the second byte.
    const uint32_t b1 = p[1], b2 = p[2];
    const uint32_t cp = (b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F);
    if (((b1 | b2 << 8) & 0xC0C0) == 0x8080 && cp >= 0x800 && cp - 0xD800 >= 0x800) return {cp, 3};
  }
  return decode(p, end);
}

// Writes the UTF-8 of code point cp (<= 0x10FFFF) to out; returns its length (1..4).
inline int encode(uint32_t cp, char* out) {
  if (cp < 0x80) {
    out[0] = static_cast<char>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<char>(0xC0 | (cp >> 6));
    out[1] = static_cast<char>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<char>(0xE0 | (cp >> 12));
    out[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<char>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<char>(0xF0 | (cp >> 18));
  out[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<char>(0x80 | (cp & 0x3F));
  return 4;
}

// Unicode White_Space, which is what Rust's char::is_whitespace tests (used by tokenizers for
// added-token lstrip/rstrip and by tiktoken's encode_with_unstable).
inline bool is_white_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

}  // namespace crayon::utf8
