// Double-array trie builder.
//
// How it builds, and why:
//
// * Keys are sorted once (unsigned bytewise). In sorted order, the keys below any trie node form
//   one contiguous range, and that range splits into one sub-range per child byte, in increasing
//   byte order; a key that ends at the node sorts first in its range. So the trie is built
//   straight from ranges of the sorted keys, depth first with an explicit stack (a key may be
//   arbitrarily long; recursion could overflow). No pointer trie is ever materialised.
//
// * Placement is first fit: for a node with child bytes c0 < c1 < ... < ck, take the first free
//   slot f (in index order) such that base = f - c0 >= 0 and every base + ci is free. Slot 0 (the
//   root) is never free, so every child lands at index >= 1. Free slots sit in doubly linked
//   lists in index order, so a search never looks at used slots and a slot leaves a list in O(1).
//   Slots past the current end count as free; the arrays grow on demand and are trimmed to the
//   last used slot at the end.
//
// * A node with one child takes the first free slot (>= c0): O(1) once the first 256 slots are
//   used. A node with several children scans `open_list_`. Over time the front of the arrays fills
//   with isolated holes that only single children fit; rescanning them for every branching node
//   is quadratic. So a slot that has failed kMaxFailures times as a branching node's c0 leaves
//   the open list (it stays in `free_list_`, and single children still fill it). Apart from
//   stepping over slots below c0 (only among the first 255), every step of a branching search
//   either places the node or counts a failure, so all branching searches together make
//   O(kMaxFailures * slots + nodes) probes. This is darts' "95% full" start
//   position and cedar's closed blocks, cut down to one counter per slot.
//
// Measured (one core, g++ -O2; tests/native/test_double_array.cc prints these for real vocabs):
//   o200k_base: 200k keys, 421,661 nodes -> 421,803 slots (fill 0.9997), about 45-55 ms, of which
//   about 20 ms is the sort. Sorting (first 8 bytes, index) pairs instead of the key views cut the
//   sort from about 40 ms to 20 ms: most comparisons then stay inside one contiguous array.
//   Without the failure cap, 3000 nodes of ~60 random child bytes took 5.2 s instead of 0.1 s;
//   with it their fill drops a little (0.62 -> 0.52 on a similar set) and real vocabularies do not
//   change. kMaxFailures = 16 was the knee between 4 (faster, less dense) and 64 or 256 (3x-10x
//   slower on that set for a few percent of fill).
//
// Not done: packing wide random fan-outs densely (first fit leaves them at fill 0.3-0.5; real
// vocabularies are mostly single-child chains, which fill the holes); breadth-first order (it
// would scatter each key's path across the arrays, and lookups walk one key at a time).
//
// Invariants of the result (the tests check all of them): size >= 1; check[0] == -1; for every
// node s, 0 <= base[s] < size, and each child t = base[s] + c satisfies 1 <= t < size and
// check[t] == s; free slots and leaves have base 0; free slots have check -1 and value -1.
// Leaves get base 0: child(leaf, c) = c would need check[c] == leaf, and no slot names a leaf as
// its parent. The result depends only on the key set, not on the input order.
#include "core/double_array.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace crayon {
namespace {

using Key = std::pair<std::string_view, int32_t>;

bool bytes_less(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  const int r = n == 0 ? 0 : std::memcmp(a.data(), b.data(), n);  // memcmp compares unsigned bytes
  return r != 0 ? r < 0 : a.size() < b.size();
}

// The first 8 bytes, big-endian and zero-padded: comparing these orders keys as bytes_less does,
// except that ties (shared first 8 bytes, or a short key against its zero-padded extension) need
// the full comparison.
uint64_t prefix8(std::string_view k) {
  uint64_t p = 0;
  const size_t n = std::min<size_t>(k.size(), 8);
  for (size_t i = 0; i < n; ++i) p |= uint64_t{static_cast<uint8_t>(k[i])} << (56 - 8 * i);
  return p;
}

// Sorting (prefix, index) pairs instead of the keys themselves keeps most comparisons inside one
// contiguous array instead of chasing every key's bytes (see the measurements above).
void sort_keys(std::vector<Key>& keys) {
  struct Entry {
    uint64_t prefix;
    uint32_t index;
  };
  std::vector<Entry> order(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    order[i] = {prefix8(keys[i].first), static_cast<uint32_t>(i)};
  }
  std::sort(order.begin(), order.end(), [&keys](const Entry& a, const Entry& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return bytes_less(keys[a.index].first, keys[b.index].first);
  });
  std::vector<Key> sorted;
  sorted.reserve(keys.size());
  for (const Entry& e : order) sorted.push_back(keys[e.index]);
  keys = std::move(sorted);
}

// A doubly linked list over slot indices, kept in increasing index order (slots are only ever
// appended in order, or removed).
struct SlotList {
  static constexpr int32_t kNil = -1;
  std::vector<int32_t> next, prev;
  int32_t head = kNil, tail = kNil;

  void resize(size_t n) {
    next.resize(n, kNil);
    prev.resize(n, kNil);
  }
  // Appends t, which must be past every slot in the list and below the size.
  void append(int32_t t) {
    next[t] = kNil;
    prev[t] = tail;
    if (tail != kNil) next[tail] = t;
    else head = t;
    tail = t;
  }
  void remove(int32_t t) {
    const int32_t p = prev[t], n = next[t];
    if (p != kNil) next[p] = n;
    else head = n;
    if (n != kNil) prev[n] = p;
    else tail = p;
  }
};

class Builder {
 public:
  DoubleArrayData build(std::vector<Key> keys) {
    sort_keys(keys);
    for (size_t i = 1; i < keys.size(); ++i) {
      if (keys[i - 1].first == keys[i].first) {
        throw std::invalid_argument("build_double_array: duplicate key (" +
                                    std::to_string(keys[i].first.size()) + " bytes)");
      }
    }

    grow(256 + 1);
    take(0);  // the root: never free, never a child (every child index is >= 1); check[0] == -1

    // Depth-first over key ranges: (node, [begin, end) in `keys`, depth = bytes consumed so far).
    struct Item {
      int32_t node;
      size_t begin, end, depth;
    };
    std::vector<Item> stack;
    if (!keys.empty()) stack.push_back({0, 0, keys.size(), 0});
    std::vector<uint8_t> labels;
    std::vector<size_t> bounds;  // [bounds[i], bounds[i+1]): the keys below child labels[i]
    while (!stack.empty()) {
      const Item it = stack.back();
      stack.pop_back();
      size_t b = it.begin;
      if (keys[b].first.size() == it.depth) {  // the key ending here sorts first in its range
        value_[it.node] = keys[b].second;
        ++b;
      }
      if (b == it.end) continue;  // a leaf: base stays 0

      labels.clear();
      bounds.clear();
      for (size_t i = b; i < it.end; ++i) {
        const uint8_t c = static_cast<uint8_t>(keys[i].first[it.depth]);
        if (labels.empty() || labels.back() != c) {
          labels.push_back(c);
          bounds.push_back(i);
        }
      }
      bounds.push_back(it.end);

      const int32_t base = find_base(labels);
      base_[it.node] = base;
      for (uint8_t c : labels) {
        take(base + c);
        check_[base + c] = it.node;
      }
      for (size_t i = labels.size(); i-- > 0;) {  // pushed in reverse: smallest byte placed first
        stack.push_back({base + labels[i], bounds[i], bounds[i + 1], it.depth + 1});
      }
    }

    DoubleArrayData d;
    const size_t n = static_cast<size_t>(used_end_);
    d.base.assign(base_.begin(), base_.begin() + n);
    d.check.assign(check_.begin(), check_.begin() + n);
    d.value.assign(value_.begin(), value_.begin() + n);
    d.units.resize(n);
    for (size_t t = 0; t < n; ++t) d.units[t] = DoubleArrayUnit{base_[t], check_[t]};
    return d;
  }

 private:
  static constexpr int32_t kNil = SlotList::kNil;
  static constexpr uint8_t kMaxFailures = 16;

  int32_t capacity() const { return static_cast<int32_t>(check_.size()); }
  bool is_free(int64_t t) const { return t >= capacity() || free_[t]; }

  // First fit for `labels` (sorted, distinct, non-empty). Grows the arrays to hold every child.
  int32_t find_base(const std::vector<uint8_t>& labels) {
    const int32_t c0 = labels.front();
    int32_t base = -1;
    if (labels.size() == 1) {
      // Any free slot fits a single child; only the first 255 slots can be too small for c0.
      for (int32_t f = free_list_.head; f != kNil; f = free_list_.next[f]) {
        if (f >= c0) {
          base = f - c0;
          break;
        }
      }
    } else {
      for (int32_t f = open_list_.head; f != kNil;) {
        const int32_t next = open_list_.next[f];
        if (f >= c0) {
          const int64_t cand = int64_t{f} - c0;
          bool fits = true;
          for (size_t i = 1; i < labels.size() && fits; ++i) fits = is_free(cand + labels[i]);
          if (fits) {
            base = static_cast<int32_t>(cand);
            break;
          }
          if (++failures_[f] >= kMaxFailures) open_list_.remove(f);  // closed: single children only
        }
        f = next;
      }
    }
    if (base < 0) base = std::max(capacity() - c0, 0);  // past the end everything is free
    const int64_t last = int64_t{base} + labels.back();
    if (last >= capacity()) grow(last + 1);
    return base;
  }

  // Extends the arrays to hold at least `min_size` slots; new slots are free and join both lists.
  void grow(int64_t min_size) {
    const int64_t limit = std::numeric_limits<int32_t>::max();
    if (min_size > limit) throw std::length_error("build_double_array: trie exceeds int32 slots");
    const int32_t old = capacity();
    const int32_t n = static_cast<int32_t>(std::min(limit, std::max(min_size, int64_t{old} * 2)));
    base_.resize(n, 0);
    check_.resize(n, -1);
    value_.resize(n, -1);
    free_.resize(n, 1);
    failures_.resize(n, 0);
    free_list_.resize(n);
    open_list_.resize(n);
    for (int32_t t = old; t < n; ++t) {
      free_list_.append(t);
      open_list_.append(t);
    }
  }

  // Marks slot t used (it must be free and inside the arrays).
  void take(int32_t t) {
    free_[t] = 0;
    free_list_.remove(t);
    if (failures_[t] < kMaxFailures) open_list_.remove(t);
    used_end_ = std::max(used_end_, t + 1);
  }

  std::vector<int32_t> base_, check_, value_;
  std::vector<uint8_t> free_;      // free_[t]: slot t is unused (check_ can't tell: the root has -1)
  std::vector<uint8_t> failures_;  // times slot t failed as a branching node's first child
  SlotList free_list_;             // every free slot: where single children go
  SlotList open_list_;             // free slots with < kMaxFailures failures: where branching nodes go
  int32_t used_end_ = 0;           // one past the last used slot
};

}  // namespace

DoubleArrayData build_double_array(const std::vector<std::pair<std::string_view, int32_t>>& keys) {
  if (keys.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    throw std::length_error("build_double_array: too many keys for int32 indices");
  }
  for (const auto& [key, value] : keys) {
    if (key.empty()) throw std::invalid_argument("build_double_array: empty key");
    if (value < 0) {
      throw std::invalid_argument("build_double_array: negative value " + std::to_string(value) +
                                  " (values must be >= 0; -1 marks 'no key here')");
    }
  }
  return Builder().build(keys);
}

}  // namespace crayon
