// Standard base64 decoding for the native tests, which read tiktoken rank files
// ("base64(token bytes) SPACE rank" per line).
#pragma once

#include <cstdint>
#include <string>

namespace crayon_test {

// Decodes `in` into *out; stops at '=' padding; false on any other non-alphabet character.
inline bool decode_base64(const std::string& in, std::string* out) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  out->clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    const int x = val(c);
    if (x < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(x);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

}  // namespace crayon_test
