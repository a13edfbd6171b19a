// The binary framing the command-line test drivers share: files of little-endian u32 values and
// u32-length-prefixed byte strings, written by the Python tests. Every read is bounds-checked, so a
// malformed file is an exception, never a bad read.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace driver_io {

struct Reader {
  std::string data;
  size_t pos = 0;
  bool at_end() const { return pos >= data.size(); }
  void need(size_t n) const {
    if (pos > data.size() || n > data.size() - pos) throw std::runtime_error("truncated input file");
  }
  uint32_t u32() {
    need(4);
    uint32_t v;
    std::memcpy(&v, data.data() + pos, 4);
    pos += 4;
    return v;
  }
  double f64() {
    need(8);
    double v;
    std::memcpy(&v, data.data() + pos, 8);
    pos += 8;
    return v;
  }
  std::string bytes() {
    const uint32_t n = u32();
    need(n);
    std::string s = data.substr(pos, n);
    pos += n;
    return s;
  }
};

inline std::string read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error(std::string("cannot open ") + path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }

}  // namespace driver_io
