// The crate's Decompositions (unicode-normalization-alignments, as tokenizers runs it for NFD and
// NFKD), fed one char at a time: each char's full decomposition, its first piece (c, 0) and the
// others (c, 1), then each run of non-starters stably sorted by class, the change travelling with
// its char. Shared by normalize.cc (the forms, with their alignments) and bert.cc (strip_accents
// when only the text is wanted).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tables/normalize_tables.h"

namespace crayon {

// Hangul syllables (Unicode ch. 3.12); the crate decomposes and composes them arithmetically.
namespace hangul {
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;
}  // namespace hangul

// Sink: void(uint32_t cp, int32_t change, uint8_t combining_class), called in output order, at
// each starter for the run before it and at flush(). A raw byte (a pseudo code point of 2^31 or
// more) has no properties and passes as a starter.
template <class Sink>
class Decomposer {
 public:
  Decomposer(bool compat, Sink& sink) : compat_(compat), sink_(sink) {}

  void push_char(uint32_t cp) {
    namespace nt = normalize_tables;
    using namespace hangul;  // NOLINT
    if (cp < 0x80) {
      push(cp, 0, 0);
      return;
    }
    if (cp - kSBase < kSCount) {
      const uint32_t s = cp - kSBase;
      push(kLBase + s / kNCount, 0, 0);
      push(kVBase + (s % kNCount) / kTCount, 1, 0);
      if (s % kTCount) push(kTBase + s % kTCount, 1, 0);
      return;
    }
    const uint16_t pr = nt::props(cp);
    if (pr & (compat_ ? nt::kCompatDecomp : nt::kCanonDecomp)) {
      const nt::Record* r = nt::record(cp);
      const uint32_t off = compat_ ? r->compat_off : r->canon_off;
      const uint32_t len = compat_ ? r->compat_len : r->canon_len;
      for (uint32_t i = 0; i < len; ++i) {
        const uint32_t d = nt::kPool[off + i];
        push(d, i ? 1 : 0, static_cast<uint8_t>(nt::props(d) & 0xFF));
      }
      return;
    }
    push(cp, 0, static_cast<uint8_t>(pr & 0xFF));
  }

  // Sorts and emits what is pending: at a starter, and at the end of a piece.
  void flush() {
    const size_t k = pending_.size();
    if (k > 1) {
      if (k <= 32) {  // stable insertion sort: runs are short in real text
        for (size_t i = 1; i < k; ++i) {
          const Part x = pending_[i];
          size_t j = i;
          for (; j > 0 && pending_[j - 1].cls > x.cls; --j) pending_[j] = pending_[j - 1];
          pending_[j] = x;
        }
      } else {
        std::stable_sort(pending_.begin(), pending_.end(), [](const Part& a, const Part& b) { return a.cls < b.cls; });
      }
    }
    for (const Part& p : pending_) sink_(p.cp, p.change, p.cls);
    pending_.clear();
  }

 private:
  struct Part {
    uint32_t cp;
    int32_t change;
    uint8_t cls;
  };

  void push(uint32_t cp, int32_t change, uint8_t cls) {
    if (cls == 0) flush();
    pending_.push_back({cp, change, cls});
  }

  bool compat_;
  Sink& sink_;
  std::vector<Part> pending_;
};

}  // namespace crayon
