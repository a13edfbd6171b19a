// tokenizers' Precompiled normalizer: see precompiled.h for the rules and the quirks reproduced.
#include "text/precompiled.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>

#include "tables/grapheme_tables.h"
#include "core/utf8.h"

namespace crayon {
namespace {

namespace gt = grapheme_tables;

// ---------------------------------------------------------------------------------------------
// Grapheme properties: a flat table for the BMP (built once from the runs), a binary search above.
// ---------------------------------------------------------------------------------------------
uint8_t run_props(uint32_t cp) {
  const uint32_t key = (cp << 8) | 0xFF;
  const uint32_t* it = std::upper_bound(gt::kRuns, gt::kRuns + gt::kRunCount, key);
  return static_cast<uint8_t>(it[-1] & 0xFF);  // kRuns[0] starts at U+0000
}

uint8_t hangul_props(uint32_t cp) {
  return (cp - gt::kHangulFirst) % 28 == 0 ? gt::kLV : gt::kLVT;
}

const std::array<uint8_t, 0x10000>& bmp_props() {
  static const std::array<uint8_t, 0x10000> table = [] {
    std::array<uint8_t, 0x10000> t{};
    for (uint32_t i = 0; i < gt::kRunCount; ++i) {
      const uint32_t lo = gt::kRuns[i] >> 8;
      const uint32_t hi = i + 1 < gt::kRunCount ? gt::kRuns[i + 1] >> 8 : 0x110000;
      for (uint32_t cp = lo; cp < hi && cp < 0x10000; ++cp) t[cp] = static_cast<uint8_t>(gt::kRuns[i] & 0xFF);
    }
    for (uint32_t i = 0; i < gt::kHangulCount; ++i) t[gt::kHangulFirst + i] = hangul_props(gt::kHangulFirst + i);
    return t;
  }();
  return table;
}

// The crate decides ASCII below U+007F without its tables; the runs say the same (the generator
// writes them so), so the flat table serves every BMP code point. Invalid bytes act as Control.
inline uint8_t props_of(uint32_t cp, const std::array<uint8_t, 0x10000>& bmp) {
  if (cp < 0x10000) return bmp[cp];
  if (cp >= 0x110000) return gt::kControl;
  return run_props(cp);
}

inline uint8_t cat(uint8_t props) { return props & gt::kCatMask; }

// U+4E00..U+9FFF, the unified ideographs, have no grapheme property (category Any, no InCB flags):
// between two of them the crate always breaks (GB999), and stepping over one leaves its cursor as
// it starts. scan() passes over runs of them with a bit test each. Checked when this file compiles.
constexpr bool ideographs_plain() {
  for (uint32_t i = 0; i < gt::kRunCount; ++i) {
    const uint32_t lo = gt::kRuns[i] >> 8;
    const uint32_t hi = i + 1 < gt::kRunCount ? gt::kRuns[i + 1] >> 8 : 0x110000;
    if (lo < 0xA000 && hi > 0x4E00 && (gt::kRuns[i] & 0xFF) != 0) return false;
  }
  return true;
}
static_assert(ideographs_plain(), "U+4E00..U+9FFF gained a grapheme property: drop scan()'s ideograph path");

// Whether p[0, 3) is a well-formed U+4E00..U+9FFF: a three-byte lead, two continuation bytes and
// the code point in range, combined without branches (the lead bytes E4-E9 come in random order).
inline bool is_ideograph(const uint8_t* p) {
  const bool shape = ((p[0] & 0xF0) == 0xE0) & ((p[1] & 0xC0) == 0x80) & ((p[2] & 0xC0) == 0x80);
  return shape & (utf8::three_byte_cp(p) - 0x4E00u < 0x5200u);
}

// What check_pair (unicode-segmentation's grapheme.rs) answers for a (before, after) category pair.
enum Pair : uint8_t { kBreak, kKeep, kGB9c, kGB11, kGB12 };

constexpr Pair pair_rule(uint8_t b, uint8_t a) {
  using namespace gt;
  const bool b_ctl = b == kControl || b == kCR || b == kLF, a_ctl = a == kControl || a == kCR || a == kLF;
  if (b == kCR && a == kLF) return kKeep;                                          // GB3
  if (b_ctl || a_ctl) return kBreak;                                               // GB4, GB5
  if (b == kL && (a == kL || a == kV || a == kLV || a == kLVT)) return kKeep;     // GB6
  if ((b == kLV || b == kV) && (a == kV || a == kT)) return kKeep;                // GB7
  if ((b == kLVT || b == kT) && a == kT) return kKeep;                             // GB8
  if (a == kExtend || a == kZWJ || a == kSpacingMark || b == kPrepend) return kKeep;  // GB9, 9a, 9b
  if (a == kInCBConsonant) return kGB9c;
  if (b == kZWJ && a == kExtendedPictographic) return kGB11;
  if (b == kRegionalIndicator && a == kRegionalIndicator) return kGB12;            // GB12, GB13
  return kBreak;                                                                   // GB999
}

struct PairTable {
  Pair rule[16][16];
  constexpr PairTable() : rule() {
    for (uint8_t b = 0; b < 16; ++b)
      for (uint8_t a = 0; a < 16; ++a) rule[b][a] = pair_rule(b, a);
  }
};
constexpr PairTable kPairs;

// The crate's forward GraphemeCursor state, as of the char just stepped over. The crate scans
// backwards for GB9c / GB11 / GB12 where it lacks this state; what it finds is the same.
struct Segmenter {
  uint32_t ri = 0;           // Regional_Indicators ending here
  bool incb_base = false;    // the last char that is neither InCB=Extend nor InCB=Linker is a consonant
  bool incb_linker = false;  // ... and a Linker came after it
  bool ep = false;           // Extended_Pictographic Extend* ends here
  bool zwj_after_ep = false; // Extended_Pictographic Extend* ZWJ ends here

  void step(uint8_t p) {
    const uint8_t c = cat(p);
    ri = c == gt::kRegionalIndicator ? ri + 1 : 0;
    if (p & gt::kIncbLinker) {
      incb_linker = true;
    } else if (!(p & gt::kIncbExtend)) {
      incb_base = c == gt::kInCBConsonant;
      incb_linker = false;
    }
    if (c == gt::kZWJ) {
      zwj_after_ep = ep;
      ep = false;
    } else {
      zwj_after_ep = false;
      if (c == gt::kExtendedPictographic) {
        ep = true;
      } else if (c != gt::kExtend) {
        ep = false;
      }
    }
  }

  // Boundary between the char just stepped over (props `before`) and the next one.
  bool is_break(uint8_t before, uint8_t after) const {
    switch (kPairs.rule[cat(before)][cat(after)]) {
      case kBreak: return true;
      case kKeep: return false;
      case kGB9c: return !(incb_base && incb_linker);
      case kGB11: return !zwj_after_ep;
      case kGB12: return ri % 2 == 0;
    }
    return true;
  }
};

inline utf8::Decoded decode_at(const uint8_t* p, size_t i, size_t n) { return utf8::decode(p + i, p + n); }

// A (char, change) pair's code point as transform_chars takes it (invalid bytes carried raw).
inline uint32_t pair_cp(const utf8::Decoded& d, const uint8_t* at) {
  return d.cp == utf8::kInvalid ? (0x80000000u | at[0]) : d.cp;
}

uint32_t le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

[[noreturn]] void panic_hostile() {
  throw NormalizerPanic("Precompiled: the charsmap indexes out of range (tokenizers panics here)");
}

inline bool poisoned(const NormalizedText& t) { return !t.align.empty() && t.align[0].first == t.align[0].second; }

// ---------------------------------------------------------------------------------------------
// The fast path's writer: tokenizers' transform, fed one pair at a time, with unchanged runs
// copied in bulk while its read position is in step with the text.
// ---------------------------------------------------------------------------------------------
class Emitter {
 public:
  explicit Emitter(const NormalizedText& old)
      : p_(reinterpret_cast<const uint8_t*>(old.text.data())), align_(old.align), n_(old.text.size()) {
    out_.text.reserve(n_ + n_ / 8 + 16);
    out_.align.reserve(n_ + n_ / 8 + 16);
  }

  // The old chars in [a, b) are kept: (c, 0) each. The last one stays pending, since a later
  // removal may add to its change.
  void keep(size_t a, size_t b) {
    if (a >= b) return;
    flush();
    if (off_ != a) {  // out of step (removals were lost at the start): pair by pair
      for (size_t i = a; i < b;) {
        const uint32_t len = decode_at(p_, i, b).len;
        push(p_ + i, len, 0);
        i += len;
      }
      return;
    }
    const size_t last = last_char(a, b);
    out_.text.append(reinterpret_cast<const char*>(p_ + a), last - a);
    out_.align.insert(out_.align.end(), align_.begin() + static_cast<std::ptrdiff_t>(a),
                      align_.begin() + static_cast<std::ptrdiff_t>(last));
    off_ = last;
    push(p_ + last, static_cast<uint32_t>(b - last), 0);
  }

  // tokenizers' replace(): `old_chars` old chars become the chars of `rep`.
  void replace(uint32_t old_chars, std::string_view rep) {
    const auto* r = reinterpret_cast<const uint8_t*>(rep.data());
    const size_t m = rep.size();
    int64_t new_chars = 0;
    for (size_t i = 0; i < m; i += decode_at(r, i, m).len) ++new_chars;
    const int64_t diff = new_chars - static_cast<int64_t>(old_chars);
    if (new_chars == 0) {
      if (has_pending_) pending_.change += diff;  // onto the last pair pushed, or lost
      return;
    }
    int64_t k = 0;
    for (size_t i = 0; i < m; ++k) {
      const uint32_t len = decode_at(r, i, m).len;
      int64_t change = diff > 0 && k >= new_chars - diff ? 1 : 0;
      if (diff < 0 && k == new_chars - 1) change += diff;
      push(r + i, len, change);
      i += len;
    }
  }

  void finish(NormalizedText& t) {
    flush();
    t.text.swap(out_.text);
    t.align.swap(out_.align);
  }

 private:
  struct Pending {
    const uint8_t* bytes;
    uint32_t len;
    int64_t change;
  };

  void push(const uint8_t* bytes, uint32_t len, int64_t change) {
    flush();
    pending_ = {bytes, len, change};
    has_pending_ = true;
  }

  // NormalizedString::transform_range for one pair.
  void flush() {
    if (!has_pending_) return;
    has_pending_ = false;
    Alignment a{0, 0};
    if (pending_.change > 0) {
      if (off_ > 0) a = align_[off_ - 1];
    } else {
      if (off_ >= n_) throw NormalizerPanic("index out of bounds: the len is " + std::to_string(n_));
      a = align_[off_];
      for (int64_t k = 1 - pending_.change; k > 0 && off_ < n_; --k) off_ += decode_at(p_, off_, n_).len;
    }
    out_.text.append(reinterpret_cast<const char*>(pending_.bytes), pending_.len);
    out_.align.insert(out_.align.end(), pending_.len, a);
  }

  // Start of the last char of [a, b), as the scanner decoded it.
  size_t last_char(size_t a, size_t b) const {
    size_t q = b - 1;
    while (q > a && b - q < 4 && (p_[q] & 0xC0) == 0x80) --q;
    if (decode_at(p_, q, b).len == b - q) return q;
    for (q = a;;) {  // invalid UTF-8 around here: walk forward as the scanner did
      const size_t next = q + decode_at(p_, q, b).len;
      if (next >= b) return q;
      q = next;
    }
  }

  const uint8_t* p_;
  const std::vector<Alignment>& align_;
  size_t n_;
  size_t off_ = 0;  // transform's read position in the old text
  bool has_pending_ = false;
  Pending pending_{};
  NormalizedText out_;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// The charsmap
// ---------------------------------------------------------------------------------------------
PrecompiledNormalizer::PrecompiledNormalizer(std::string blob) {
  auto owned = std::make_shared<Owned>();
  owned->blob = std::move(blob);
  parse(owned->blob);
  for (uint32_t cp = 0; cp < 0x10000; ++cp) {
    if (cp >= 0xD800 && cp < 0xE000) continue;
    uint8_t buf[3];
    const size_t len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
    if (len == 1) {
      buf[0] = static_cast<uint8_t>(cp);
    } else if (len == 2) {
      buf[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
      buf[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    } else {
      buf[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
      buf[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
      buf[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    }
    const Lookup r = lookup(buf, len);
    if (r.hit != Hit::kNone) continue;
    owned->quiet[cp >> 6] |= uint64_t{1} << (cp & 63);
    if (r.left) owned->dead[cp >> 6] |= uint64_t{1} << (cp & 63);
  }
  quiet_ = owned->quiet.data();
  dead_ = owned->dead.data();
  keep_ = std::move(owned);
}

PrecompiledNormalizer::PrecompiledNormalizer(std::string_view section, std::shared_ptr<const void> owner)
    : keep_(std::move(owner)) {
  if (section.size() < kBitmapBytes) {
    throw std::invalid_argument("the Precompiled section is shorter than its bitmaps");
  }
  quiet_ = reinterpret_cast<const uint64_t*>(section.data());
  dead_ = reinterpret_cast<const uint64_t*>(section.data() + kBitmapBytes / 2);
  parse(section.substr(kBitmapBytes));
}

std::string PrecompiledNormalizer::section_image() const {
  std::string out(reinterpret_cast<const char*>(quiet_), kBitmapBytes / 2);
  out.append(reinterpret_cast<const char*>(dead_), kBitmapBytes / 2);
  out.append(blob_);
  return out;
}

void PrecompiledNormalizer::parse(std::string_view blob) {
  const auto* b = reinterpret_cast<const unsigned char*>(blob.data());
  if (blob.size() < 4) {
    throw std::invalid_argument("precompiled_charsmap has " + std::to_string(blob.size()) +
                                " bytes, fewer than the 4 of its trie-size header: not a SentencePiece charsmap "
                                "(tokenizers rejects it too)");
  }
  const uint64_t units = le32(b) / 4;
  if (4 + units * 4 > blob.size()) {
    throw std::invalid_argument("precompiled_charsmap announces a trie of " + std::to_string(le32(b)) +
                                " bytes but only " + std::to_string(blob.size() - 4) +
                                " follow: the charsmap is truncated");
  }
  blob_ = blob;
  // Read in place: the blob starts 4-byte aligned (a cartridge section, or a heap string) and
  // cartridges are little-endian like every host the engine builds for.
  units_ = reinterpret_cast<const uint32_t*>(blob.data() + 4);
  n_units_ = units;
  normalized_ = blob.substr(4 + units * 4);
  const auto* s = reinterpret_cast<const uint8_t*>(normalized_.data());
  for (size_t i = 0; i < normalized_.size();) {
    const utf8::Decoded d = utf8::decode(s + i, s + normalized_.size());
    if (d.cp == utf8::kInvalid) {
      throw std::invalid_argument("precompiled_charsmap's replacement strings are not valid UTF-8 (byte " +
                                  std::to_string(i) + " of " + std::to_string(normalized_.size()) +
                                  "): the charsmap is corrupt");
    }
    i += d.len;
  }
  for (uint8_t c = 0; c < 128; ++c) ascii_[c] = lookup(&c, 1);
}

// spm_precompiled's common_prefix_search, keeping its first result (the shortest key that is a
// prefix of `key`), and its string, as Precompiled::transform slices it. Every index tokenizers
// would take out of range is reported as kPanic, also after a first result was found.
PrecompiledNormalizer::Lookup PrecompiledNormalizer::lookup(const uint8_t* key, size_t len) const {
  const uint64_t size = n_units_;
  if (size == 0) return {Hit::kPanic, 0, 0, false};
  auto offset = [](uint64_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
  uint64_t node = offset(units_[0]);
  bool found = false, left = false;
  uint32_t value = 0;
  for (size_t i = 0; i < len; ++i) {
    const uint8_t c = key[i];
    if (c == 0) {
      left = true;
      break;
    }
    node ^= c;
    if (node >= size) return {Hit::kPanic, 0, 0, false};
    const uint64_t unit = units_[node];
    if ((unit & ((1u << 31) | 0xFFu)) != c) {
      left = true;
      break;
    }
    node ^= offset(unit);
    if ((unit >> 8) & 1) {
      if (node >= size) return {Hit::kPanic, 0, 0, false};
      if (!found) value = units_[node] & 0x7FFFFFFFu;
      found = true;
    }
  }
  if (!found) return {Hit::kNone, 0, 0, left};
  // &normalized[value..nul]: panics past the end or inside a UTF-8 sequence.
  const size_t n = normalized_.size();
  if (value > n || (value < n && (static_cast<uint8_t>(normalized_[value]) & 0xC0) == 0x80)) {
    return {Hit::kPanic, 0, 0, false};
  }
  const void* nul = value < n ? std::memchr(normalized_.data() + value, 0, n - value) : nullptr;
  const size_t end = nul ? static_cast<size_t>(static_cast<const char*>(nul) - normalized_.data()) : n;
  return {Hit::kFound, value, static_cast<uint32_t>(end - value), false};
}

// Walks the text cluster by cluster as Precompiled::normalize does, calling
// sink(start, end, old_chars, lookup) for every hit: [start, end) holds `old_chars` chars that
// become the lookup's string. The sink returns false to stop.
template <class Sink>
PrecompiledNormalizer::Scan PrecompiledNormalizer::scan(std::string_view text, Sink& sink) const {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  const auto& bmp = bmp_props();
  Segmenter seg;
  size_t ahead = SIZE_MAX;  // where ahead_char was decoded (the next cluster's first char)
  utf8::Decoded ahead_char{0, 1};
  uint8_t ahead_props = 0;
  size_t i = 0;
  while (i < n) {
    // i starts a cluster. An ASCII byte followed by an ASCII byte (or the end) is a cluster of its
    // own unless it is CR LF; stepping over ASCII leaves the segmenter in its initial state.
    if (p[i] < 0x80) {
      size_t j = i;
      for (; j < n && p[j] < 0x80; ++j) {
        if (j + 1 < n && (p[j + 1] >= 0x80 || (p[j] == '\r' && p[j + 1] == '\n'))) break;
        const Lookup& a = ascii_[p[j]];
        if (a.hit == Hit::kNone) continue;
        if (a.hit == Hit::kPanic) return Scan::kPanic;
        if (!sink(j, j + 1, 1, a)) return Scan::kStopped;
      }
      if (j > i) {
        seg = Segmenter{};
        i = j;
        continue;
      }
    }
    // An ideograph is a cluster of its own before another, an ASCII byte or the end (ideographs_plain:
    // category Any, which breaks before Any and Control alike), and kept when quiet.
    if (p[i] >= 0xE4 && p[i] <= 0xE9) {
      const size_t from = i;
      while (i + 3 <= n && is_ideograph(p + i) && (i + 3 == n || p[i + 3] < 0x80 || (i + 6 <= n && is_ideograph(p + i + 3))) &&
             quiet(utf8::three_byte_cp(p + i))) {
        i += 3;
      }
      if (i > from) {
        seg = Segmenter{};
        continue;
      }
    }
    // A general cluster: step chars until the crate's rules break. The char that breaks it was
    // decoded here already and starts the next cluster.
    const size_t start = i;
    utf8::Decoded d;
    uint8_t before;
    if (ahead == i) {
      d = ahead_char;
      before = ahead_props;
    } else {
      d = decode_at(p, i, n);
      before = props_of(d.cp, bmp);
    }
    seg.step(before);
    size_t end = i + d.len;
    uint32_t chars = 1;
    while (end < n) {
      const utf8::Decoded e = decode_at(p, end, n);
      const uint8_t after = props_of(e.cp, bmp);
      if (seg.is_break(before, after)) {
        ahead = end;
        ahead_char = e;
        ahead_props = after;
        break;
      }
      seg.step(after);
      before = after;
      end += e.len;
      ++chars;
    }
    i = end;
    size_t from = start;
    if (end - start < 6 && !(chars > 1 && dead(d.cp))) {  // a one-char cluster is at most 4 bytes
      if (chars == 1 && quiet(d.cp)) continue;
      const Lookup r = lookup(p + start, end - start);
      if (r.hit == Hit::kPanic) return Scan::kPanic;
      if (r.hit == Hit::kFound) {
        if (!sink(start, end, chars, r)) return Scan::kStopped;
        continue;
      }
    }
    // Each char alone. The first cannot hit when the cluster was walked above (without a result
    // or a panic) or starts with a dead char.
    if (end - start < 6) from = start + d.len;
    for (size_t q = from; q < end;) {
      const utf8::Decoded c = decode_at(p, q, end);
      if (!quiet(c.cp)) {
        const Lookup r = lookup(p + q, c.len);
        if (r.hit == Hit::kPanic) return Scan::kPanic;
        if (r.hit == Hit::kFound && !sink(q, q + c.len, 1, r)) return Scan::kStopped;
      }
      q += c.len;
    }
  }
  return Scan::kDone;
}

bool PrecompiledNormalizer::is_identity(std::string_view text) const {
  auto stop = [](size_t, size_t, uint32_t, const Lookup&) { return false; };
  return scan(text, stop) == Scan::kDone;
}

void PrecompiledNormalizer::normalize(NormalizedText& t) const {
  // Nothing is allocated until the first hit; poisoned text goes the faithful way.
  std::optional<Emitter> w;
  size_t done = 0;  // old text before `done` is written
  bool fallback = false;
  auto sink = [&](size_t start, size_t end, uint32_t old_chars, const Lookup& r) {
    if (!w) {
      if (poisoned(t)) {
        fallback = true;
        return false;
      }
      w.emplace(t);
    }
    w->keep(done, start);
    w->replace(old_chars, normalized_.substr(r.off, r.len));
    done = end;
    return true;
  };
  const Scan s = scan(t.text, sink);
  if (fallback) return normalize_reference(t);
  if (s == Scan::kPanic) panic_hostile();
  if (!w) return;
  w->keep(done, t.text.size());
  w->finish(t);
}

bool PrecompiledNormalizer::normalize_same_length(std::string_view text, std::string& out) const {
  bool same = true;
  out.assign(text.data(), text.size());
  auto sink = [&](size_t start, size_t end, uint32_t old_chars, const Lookup& r) {
    // One character, replaced by one character of its byte length: [start, end) is that one
    // character, and the replacement decodes to a single character spanning all of its bytes.
    const auto* s = reinterpret_cast<const uint8_t*>(normalized_.data()) + r.off;
    same = old_chars == 1 && r.len == end - start && r.len > 0 && utf8::decode(s, s + r.len).len == r.len;
    if (!same) return false;
    std::memcpy(&out[start], s, r.len);
    return true;
  };
  return scan(text, sink) == Scan::kDone && same;
}

bool PrecompiledNormalizer::normalize_text(std::string_view text, std::string& out) const {
  out.clear();
  size_t done = 0;  // text before `done` is written
  auto sink = [&](size_t start, size_t end, uint32_t, const Lookup& r) {
    out.append(text.data() + done, start - done);
    out.append(normalized_.data() + r.off, r.len);
    done = end;
    return true;
  };
  if (scan(text, sink) != Scan::kDone) return false;
  out.append(text.data() + done, text.size() - done);
  return true;
}

void PrecompiledNormalizer::normalize_reference(NormalizedText& t) const {
  // Precompiled::normalize, line by line: graphemes(true), whole lookup under 6 bytes, else each
  // char; replace() builds the pairs; transform only if something was modified.
  const auto* p = reinterpret_cast<const uint8_t*>(t.text.data());
  const size_t n = t.text.size();
  const auto& bmp = bmp_props();
  std::vector<std::pair<uint32_t, int32_t>> pairs;
  pairs.reserve(n);
  bool modified = false;
  auto replace = [&](size_t old_chars, const Lookup& r) {
    const auto* s = reinterpret_cast<const uint8_t*>(normalized_.data()) + r.off;
    int64_t new_chars = 0;
    for (size_t i = 0; i < r.len;) {
      const utf8::Decoded d = utf8::decode(s + i, s + r.len);
      pairs.emplace_back(pair_cp(d, s + i), 0);
      ++new_chars;
      i += d.len;
    }
    const int64_t diff = new_chars - static_cast<int64_t>(old_chars);
    if (diff > 0) {
      for (size_t k = 0; k < static_cast<size_t>(diff); ++k) pairs[pairs.size() - 1 - k].second = 1;
    } else if (diff < 0 && !pairs.empty()) {
      pairs.back().second += static_cast<int32_t>(diff);
    }
  };
  Segmenter seg;
  for (size_t i = 0; i < n;) {
    size_t end = i;
    uint32_t chars = 0;
    uint8_t before = 0;
    while (end < n) {
      const utf8::Decoded e = decode_at(p, end, n);
      const uint8_t after = props_of(e.cp, bmp);
      if (chars > 0 && seg.is_break(before, after)) break;
      seg.step(after);
      before = after;
      end += e.len;
      ++chars;
    }
    if (end - i < 6) {
      const Lookup r = lookup(p + i, end - i);
      if (r.hit == Hit::kPanic) panic_hostile();
      if (r.hit == Hit::kFound) {
        modified = true;
        replace(chars, r);
        i = end;
        continue;
      }
    }
    for (; i < end;) {
      const utf8::Decoded d = decode_at(p, i, end);
      const Lookup r = lookup(p + i, d.len);
      if (r.hit == Hit::kPanic) panic_hostile();
      if (r.hit == Hit::kFound) {
        modified = true;
        replace(1, r);
      } else {
        pairs.emplace_back(pair_cp(d, p + i), 0);
      }
      i += d.len;
    }
  }
  if (modified) transform_chars(t, pairs, 0);
}

}  // namespace crayon
