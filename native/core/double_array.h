// Double-array trie over byte strings.
//
//   keys (bytes -> int32 value) --build_double_array--> DoubleArrayData (12-byte units)
//                                                          | written into a cartridge section
//                                                          v
//                                  DoubleArrayView (borrowed pointers, e.g. into an mmap)
//
// Layout: node 0 is the root; each slot is one 8-byte unit {base, check}, so following an edge
// touches one cache line for both the check and the next base; values live in their own array,
// read only where a lookup needs one (small units keep more of a 200k-token trie in cache). The child of node s on byte c is t = base[s] + c, and it exists iff
// 0 <= t < size and check[t] == s (check[0] == -1, free slots have check == -1). value[t] is the
// value of the key that ends at node t, or -1 when no key ends there.
//
// Bounds: views must have size >= 1 (the builder guarantees it; loaders reject empty tries).
// Every traversal step checks 0 <= t < size before reading check[t], so a view over any
// array contents (even hostile ones) never reads out of range; a damaged trie can only give wrong
// answers, and the cartridge checksum catches accidental damage. Values are not range-checked
// here: callers check them against their own tables.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace crayon {

struct DoubleArrayUnit {
  int32_t base;
  int32_t check;
};
static_assert(sizeof(DoubleArrayUnit) == 8, "DoubleArrayUnit is stored in cartridges as 8 bytes");

struct DoubleArrayData {
  std::vector<int32_t> base;   // the builder's arrays, kept for structural tests
  std::vector<int32_t> check;
  std::vector<int32_t> value;
  std::vector<DoubleArrayUnit> units;  // base and check interleaved: what views and cartridges use
};

// Builds a trie holding every key. Keys may come in any order but must be distinct and non-empty;
// values must be >= 0. Throws std::invalid_argument on a duplicate or empty key or a negative
// value, std::length_error past int32 slots. The result has at least one slot, check[0] == -1,
// every child index >= 1, and depends only on the key set, not its order.
DoubleArrayData build_double_array(const std::vector<std::pair<std::string_view, int32_t>>& keys);

class DoubleArrayView {
 public:
  DoubleArrayView() = default;
  DoubleArrayView(const DoubleArrayUnit* units, const int32_t* values, uint32_t size)
      : units_(units), values_(values), size_(size) {}
  explicit DoubleArrayView(const DoubleArrayData& d)
      : DoubleArrayView(d.units.data(), d.value.data(), static_cast<uint32_t>(d.units.size())) {}

  static constexpr int32_t kRoot = 0;

  uint32_t size() const { return size_; }
  const DoubleArrayUnit* units() const { return units_; }
  const int32_t* values() const { return values_; }

  // The child of `node` on byte `c`, or -1 when there is none. `node` must be a valid node index.
  int32_t child(int32_t node, uint8_t c) const {
    const int64_t t = static_cast<int64_t>(units_[node].base) + c;
    if (t < 0 || t >= size_ || units_[t].check != node) return -1;
    return static_cast<int32_t>(t);
  }

  // The value stored at `node` (-1 when no key ends there).
  int32_t value_at(int32_t node) const { return values_[node]; }

  // Follows `n` bytes from `node`; returns the node reached or -1.
  int32_t walk(int32_t node, const uint8_t* s, size_t n) const {
    for (size_t i = 0; i < n && node >= 0; ++i) node = child(node, s[i]);
    return node;
  }

  // The value of exactly this key, or -1.
  int32_t find(const uint8_t* s, size_t n) const {
    const int32_t node = walk(kRoot, s, n);
    return node < 0 ? -1 : values_[node];
  }

  // Calls f(length, value) for every key that is a prefix of s[0, n), shortest first.
  // Stops early when f returns false.
  template <class F>
  void for_each_prefix(const uint8_t* s, size_t n, F&& f) const {
    int32_t node = kRoot;
    for (size_t i = 0; i < n; ++i) {
      node = child(node, s[i]);
      if (node < 0) return;
      const int32_t v = values_[node];
      if (v >= 0 && !f(i + 1, v)) return;
    }
  }

  // Length of the longest key that is a prefix of s[0, n) (0 if none); its value goes to *value.
  size_t longest_prefix(const uint8_t* s, size_t n, int32_t* value) const {
    size_t best = 0;
    for_each_prefix(s, n, [&](size_t len, int32_t v) {
      best = len;
      *value = v;
      return true;
    });
    return best;
  }

 private:
  const DoubleArrayUnit* units_ = nullptr;
  const int32_t* values_ = nullptr;
  uint32_t size_ = 0;
};

}  // namespace crayon
