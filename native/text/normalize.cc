// Normalizers with tokenizers' exact alignment bookkeeping. See normalize.h for the data flow.
//
// How the Unicode forms are made fast without changing a single alignment:
//
//  * tokenizers runs the crate's iterator over the whole text and rebuilds text and alignments
//    through `transform` every time. The pair sequence it produces is a pure function of the
//    characters, and at a "boundary" - a starter (class 0) whose decomposition also starts with a
//    starter that nothing composes onto - the crate's state is empty: the reorder buffer is sorted
//    and emitted, the recomposer emits its composee and blocked marks. So the text can be cut at
//    boundaries and every piece processed on its own; the pieces' outputs concatenate to the
//    whole's, alignments included, because `transform` reads alignments by absolute position.
//  * A piece that passes the UAX #15 quick check (no character with Quick_Check No/Maybe, classes
//    non-decreasing in each run of marks) comes out as its own chars, each (c, 0), in order: its
//    text and alignments are copied unchanged. So a scan finds the first piece that is not quick,
//    the text before it is copied (or nothing is done at all if there is none), the piece goes
//    through the faithful algorithm, and scanning resumes at the next boundary.
//  * ASCII is skipped eight bytes at a time.
// reference::normalize_* run the faithful algorithm over the whole text with no cuts; the tests
// compare both on everything they generate.
//
// Rejected: the usual ICU-style "decompose then compose in place" (it would give the same text but
// not the crate's pair sequence, whose positional quirks are visible in the offsets); a
// stream-safe limit on mark runs (the crate has none, so a 100k run is one sort, O(k log k)).
#include "text/normalize.h"

#include <algorithm>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tables/normalize_tables.h"
#include "core/utf8.h"
#include "text/decompose.h"

namespace crayon {
namespace {

namespace nt = normalize_tables;

// A byte that is not well-formed UTF-8 travels as this pseudo code point: no properties, never
// composes, written back as the same single byte.
constexpr uint32_t kRawByte = 0x80000000u;

using namespace hangul;  // NOLINT: the constants of the syllable arithmetic (text/decompose.h)

struct Char {
  uint32_t cp;  // code point, or kRawByte | byte
  uint32_t len;
};

inline Char char_at(const std::string& s, size_t i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const utf8::Decoded d = utf8::decode(p + i, p + s.size());
  if (d.cp == utf8::kInvalid) return {kRawByte | p[i], 1};
  return {d.cp, d.len};
}

// A char of the rewritten text: a code point, or a raw byte carried through (kRawByte | byte).
inline int encode(uint32_t cp, char* out) {
  if (cp & kRawByte) {
    out[0] = static_cast<char>(cp & 0xFF);
    return 1;
  }
  return utf8::encode(cp, out);
}

inline uint8_t ccc(uint32_t cp) { return static_cast<uint8_t>(nt::props(cp) & 0xFF); }

// See normalize.h: text whose first byte has an empty alignment goes the faithful way.
inline bool poisoned(const NormalizedText& t) {
  return !t.align.empty() && t.align[0].first == t.align[0].second;
}

inline bool all_ascii8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return (w & 0x8080808080808080ull) == 0;
}

// The end of the run of ASCII bytes from i: 32 bytes a step with SSE2 (English and code are one
// such run from start to end, and eight bytes a step was 1.6% of a Qwen2.5 encode's
// instructions there), then eight, then one.
inline size_t ascii_run_end(const uint8_t* p, size_t i, size_t n) {
#if defined(__SSE2__)
  for (; i + 32 <= n; i += 32) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + 16));
    if (_mm_movemask_epi8(_mm_or_si128(a, b)) != 0) break;
  }
#endif
  while (i + 8 <= n && all_ascii8(reinterpret_cast<const char*>(p + i))) i += 8;
  while (i < n && p[i] < 0x80) ++i;
  return i;
}

// ---------------------------------------------------------------------------------------------
// transform: rebuilds text + alignments from (char, change) pairs, reading the old ones by
// position exactly as NormalizedString::transform_range does.
// ---------------------------------------------------------------------------------------------
//
// transform() targets Range::Original(..), which convert_offsets maps to the normalized range
// from the first byte whose alignment is not empty: the bytes before it are kept as they are and
// reading starts after them (the poisoned case of normalize.h; the range is 0..n otherwise).
// `initial_chars` is transform's initial_offset: chars removed before the first pair.
class Rewriter {
 public:
  explicit Rewriter(const NormalizedText& old, size_t initial_chars = 0) : old_(old), n_(old.text.size()) {
    out_.text.reserve(n_ + n_ / 4 + 16);
    out_.align.reserve(n_ + n_ / 4 + 16);
    size_t k = 0;
    while (k < n_ && old.align[k].first == old.align[k].second) ++k;
    copy_to(k);
    for (; initial_chars > 0 && off_ < n_; --initial_chars) off_ += char_at(old_.text, off_).len;
  }

  size_t offset() const { return off_; }

  // Old bytes [offset, end) unchanged: what (c, 0) for each of their chars produces (every byte
  // of a char shares the char's alignment).
  void copy_to(size_t end) {
    if (end <= off_) return;
    out_.text.append(old_.text, off_, end - off_);
    out_.align.insert(out_.align.end(), old_.align.begin() + off_, old_.align.begin() + end);
    off_ = end;
  }

  void emit(uint32_t cp, int32_t change) {
    Alignment a{0, 0};
    if (change > 0) {
      if (off_ > 0) a = old_.align[off_ - 1];  // inserted: shares the previous byte's alignment
    } else {
      if (off_ >= n_) panic();
      a = old_.align[off_];  // replaces the next old char...
      for (int64_t k = 1 - static_cast<int64_t>(change); k > 0 && off_ < n_; --k) {
        off_ += char_at(old_.text, off_).len;  // ...and removes -change more
      }
    }
    char buf[4];
    const int len = encode(cp, buf);
    out_.text.append(buf, static_cast<size_t>(len));
    out_.align.insert(out_.align.end(), static_cast<size_t>(len), a);
  }

  // tokenizers indexes past the end of its alignments: only reachable on poisoned text.
  [[noreturn]] void panic() const {
    throw NormalizerPanic("index out of bounds: the len is " + std::to_string(n_) + " but the index is " +
                          std::to_string(off_));
  }

  // Like tokenizers, the output replaces the whole old text (old chars never consumed vanish).
  void finish(NormalizedText& t) {
    t.text.swap(out_.text);
    t.align.swap(out_.align);
  }

 private:
  const NormalizedText& old_;
  size_t n_;
  size_t off_ = 0;
  NormalizedText out_;
};

// Canonical composition of two chars, or false.
inline bool compose(uint32_t a, uint32_t b, uint32_t* out) {
  if (a - kLBase < kLCount && b - kVBase < kVCount) {
    *out = kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    return true;
  }
  // LV + T, for T in U+11A8..U+11C2 only (not T_BASE itself).
  if (a - kSBase < kSCount && (a - kSBase) % kTCount == 0 && b - kTBase - 1 < kTCount - 1) {
    *out = a + (b - kTBase);
    return true;
  }
  if (!(nt::props(b) & nt::kTrailer)) return false;
  const uint64_t key = (static_cast<uint64_t>(a) << 21) | b;
  const uint64_t* end = nt::kCompKeys + sizeof(nt::kCompKeys) / sizeof(nt::kCompKeys[0]);
  const uint64_t* it = std::lower_bound(nt::kCompKeys, end, key);
  if (it == end || *it != key) return false;
  *out = nt::kCompValues[it - nt::kCompKeys];
  return true;
}

// The crate's Recompositions state machine, eager instead of pulled, same output order: a composed
// char carries change k.change + c.change - 1; blocked marks wait in `buffer_` and follow their
// composee out.
class Recomposer {
 public:
  explicit Recomposer(Rewriter& out) : out_(out) {}

  void operator()(uint32_t ch, int32_t change, uint8_t cls) {
    if (!has_composee_) {
      if (cls != 0) {
        out_.emit(ch, change);  // leading non-starter: nothing to compose onto
        return;
      }
      set_composee(ch, change);
      return;
    }
    uint32_t r;
    if (last_ccc_ < 0) {
      if (compose(k_cp_, ch, &r)) {
        k_cp_ = r;
        k_change_ += change - 1;
        return;
      }
      if (cls == 0) {
        out_.emit(k_cp_, k_change_);
        set_composee(ch, change);
        return;
      }
      buffer_.push_back({ch, change});
      last_ccc_ = cls;
      return;
    }
    if (last_ccc_ >= cls) {  // blocked
      if (cls == 0) {
        finish();
        set_composee(ch, change);
        return;
      }
      buffer_.push_back({ch, change});
      last_ccc_ = cls;
      return;
    }
    if (compose(k_cp_, ch, &r)) {
      k_cp_ = r;
      k_change_ += change - 1;
      return;
    }
    buffer_.push_back({ch, change});
    last_ccc_ = cls;
  }

  // Composee first, then the marks it blocked; the state is then empty.
  void finish() {
    if (has_composee_) out_.emit(k_cp_, k_change_);
    has_composee_ = false;
    for (const auto& b : buffer_) out_.emit(b.first, b.second);
    buffer_.clear();
    last_ccc_ = -1;
  }

 private:
  void set_composee(uint32_t ch, int32_t change) {
    has_composee_ = true;
    k_cp_ = ch;
    k_change_ = change;
    last_ccc_ = -1;
  }

  Rewriter& out_;
  bool has_composee_ = false;
  uint32_t k_cp_ = 0;
  int32_t k_change_ = 0;
  int last_ccc_ = -1;  // class of the last blocked mark; -1: none since the composee
  std::vector<std::pair<uint32_t, int32_t>> buffer_;
};

// Decomposer sink for NFD/NFKD: straight to the rewriter.
struct Emit {
  Rewriter& out;
  void operator()(uint32_t cp, int32_t change, uint8_t) { out.emit(cp, change); }
};

// ---------------------------------------------------------------------------------------------
// Forms: quick check and boundaries
// ---------------------------------------------------------------------------------------------
struct Form {
  bool compat;
  bool compose;
  uint16_t not_quick;     // a char with any of these flags fails the quick check
  uint16_t not_boundary;  // a class-0 char with none of these is a boundary
};

constexpr Form kNfd{false, false, nt::kCanonDecomp, nt::kCanonBadStart};
constexpr Form kNfkd{true, false, nt::kCompatDecomp, nt::kCompatBadStart};
constexpr Form kNfc{false, true, nt::kNfcNo | nt::kTrailer, nt::kCanonBadStart | nt::kTrailer};
constexpr Form kNfkc{true, true, nt::kNfkcNo | nt::kTrailer, nt::kCompatBadStart | nt::kTrailer};

// Per form, the two-byte characters (U+0080..U+07FF) that leave quick_scan's state as a fresh
// starter leaves it: class 0, no quick-check failure, a boundary, nothing to decompose (most
// letters of Latin, Greek, Cyrillic, Armenian, Hebrew, Arabic). One bit each, 256 bytes per form;
// quick_scan passes them with one load instead of a decode and a props lookup.
struct InertTwoByte {
  uint64_t bits[0x800 / 64] = {};
  explicit InertTwoByte(const Form& f) {
    const uint16_t decomposes = f.compat ? nt::kCompatDecomp : nt::kCanonDecomp;
    for (uint32_t cp = 0x80; cp < 0x800; ++cp) {
      const uint16_t pr = nt::props(cp);
      if ((pr & 0xFF) == 0 && !(pr & (f.not_quick | f.not_boundary | decomposes))) bits[cp >> 6] |= uint64_t{1} << (cp & 63);
    }
  }
  bool has(uint32_t cp) const { return bits[cp >> 6] >> (cp & 63) & 1; }
};
const InertTwoByte kInertTwoByte[4] = {InertTwoByte(kNfd), InertTwoByte(kNfkd), InertTwoByte(kNfc),
                                       InertTwoByte(kNfkc)};
inline const InertTwoByte& inert_two_byte(const Form& f) { return kInertTwoByte[(f.compat ? 1 : 0) + (f.compose ? 2 : 0)]; }

inline bool is_boundary(uint32_t cp, const Form& f) {
  if (cp < 0x80 || (cp & kRawByte)) return true;
  const uint16_t pr = nt::props(cp);
  return (pr & 0xFF) == 0 && !(pr & f.not_boundary);
}

struct Scan {
  bool quick;       // [from, n) passes the quick check
  size_t boundary;  // otherwise: the last boundary at or before the first char that fails
};

// U+4000..U+9FFF (UTF-8 lead bytes E4-E9: the end of CJK Extension A, the Yijing hexagrams, the
// unified ideographs) are starters that no form changes and none composes with: quick_scan
// passes over them without the tables (a table lookup per character was 4% of Qwen2's time on
// Chinese). Checked against the tables when this file compiles.
constexpr bool cjk_block_inert() {
  for (uint32_t cp = 0x4000; cp < 0xA000; ++cp) {
    const uint16_t pr = nt::kPropsStage2[(nt::kPropsStage1[cp >> nt::kPropsShift] << nt::kPropsShift) +
                                         (cp & ((1u << nt::kPropsShift) - 1))];
    if ((pr & ~nt::kLowerChanges) != 0) return false;
  }
  return true;
}
static_assert(cjk_block_inert(), "U+4000..U+9FFF are no longer inert under normalization: drop quick_scan's fast path");

// The quick check from `from` (a boundary, or 0). Beyond UAX #15's, a Quick_Check=Maybe character
// (a trailer: the second of some composition) passes where the recomposer would not compose it:
// a mark between it and the last starter blocks it (class 0, or a class at least its own), or
// that starter, which must not decompose, has no composition with it. Such text comes out of the
// faithful algorithm as its own chars, each (c, 0). Bengali, Tamil, Malayalam, Sinhala and Syriac
// text is full of such trailers.
Scan quick_scan(std::string_view s, size_t from, const Form& f) {
  const size_t n = s.size();
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const uint16_t decomposes = f.compat ? nt::kCompatDecomp : nt::kCanonDecomp;
  size_t i = from, boundary = from;
  uint8_t last_ccc = 0;  // the largest class since the last starter (classes never fall: checked)
  // The last starter, and whether the recomposer holds it as it is (it does not decompose, and
  // nothing since it does): then it is the one char a trailer could compose with.
  uint32_t starter = 0;
  bool starter_kept = false;
  const InertTwoByte& inert = inert_two_byte(f);
  while (i < n) {
    if (p[i] < 0x80) {
      i = ascii_run_end(p, i, n);
      boundary = i - 1;
      last_ccc = 0;
      starter = p[i - 1];
      starter_kept = true;
      continue;
    }
    if (p[i] >= 0xE4 && p[i] <= 0xE9 && i + 2 < n && utf8::is_continuation(p[i + 1]) && utf8::is_continuation(p[i + 2])) {
      boundary = i;  // cjk_block_inert()
      starter = utf8::three_byte_cp(p + i);
      starter_kept = true;
      last_ccc = 0;
      i += 3;
      continue;
    }
    if (const uint32_t cp = utf8::two_byte_cp(p + i, n - i)) {
      if (inert.has(cp)) {  // what the general step below does for such a character
        boundary = i;
        starter = cp;
        starter_kept = true;
        last_ccc = 0;
        i += 2;
        continue;
      }
    }
    const utf8::Decoded d = utf8::decode_common(p + i, p + n);
    const uint16_t pr = d.cp == utf8::kInvalid ? 0 : nt::props(d.cp);  // a raw byte: a boundary
    const uint8_t cls = static_cast<uint8_t>(pr & 0xFF);
    if (cls != 0 && last_ccc > cls) return {false, boundary};
    if (pr & f.not_quick) {
      if ((pr & f.not_quick) != nt::kTrailer || !starter_kept) return {false, boundary};
      const bool blocked = last_ccc != 0 && last_ccc >= cls;
      uint32_t composed;
      if (!blocked && compose(starter, d.cp, &composed)) return {false, boundary};
    }
    if (cls == 0 && !(pr & f.not_boundary)) boundary = i;
    last_ccc = cls;
    if (d.cp == utf8::kInvalid || cls == 0) {
      starter = d.cp;
      starter_kept = d.cp != utf8::kInvalid && !(pr & decomposes);
    } else if (pr & decomposes) {
      starter_kept = false;
    }
    i += d.len;
  }
  return {true, n};
}

// Feeds the chars of [from, to) through the form's pipeline (the caller flushes).
template <class Pipeline>
void feed(const std::string& s, size_t from, size_t to, Pipeline& dec) {
  for (size_t i = from; i < to;) {
    const Char c = char_at(s, i);
    dec.push_char(c.cp);
    i += c.len;
  }
}

template <class Dec, class Finish>
void run_form(NormalizedText& t, const Form& f, Rewriter& w, Dec& dec, Finish finish_pipeline, Scan scan) {
  const std::string& s = t.text;
  const size_t n = s.size();
  for (;;) {
    size_t i = scan.boundary;
    w.copy_to(i);
    // The faithful algorithm from this boundary up to the next one (at least one char).
    do {
      const Char c = char_at(s, i);
      dec.push_char(c.cp);
      i += c.len;
    } while (i < n && !is_boundary(char_at(s, i).cp, f));
    finish_pipeline();
    if (i >= n) return;
    scan = quick_scan(s, i, f);
    if (scan.quick) {
      w.copy_to(n);
      return;
    }
  }
}

void normalize_form_reference(NormalizedText& t, const Form& f);

void normalize_form(NormalizedText& t, const Form& f) {
  if (poisoned(t)) return normalize_form_reference(t, f);
  const Scan scan = quick_scan(t.text, 0, f);
  if (scan.quick) return;
  Rewriter w(t);
  if (f.compose) {
    Recomposer rec(w);
    Decomposer<Recomposer> dec(f.compat, rec);
    run_form(t, f, w, dec, [&] { dec.flush(); rec.finish(); }, scan);
  } else {
    Emit emit{w};
    Decomposer<Emit> dec(f.compat, emit);
    run_form(t, f, w, dec, [&] { dec.flush(); }, scan);
  }
  w.finish(t);
}

void normalize_form_reference(NormalizedText& t, const Form& f) {
  Rewriter w(t);
  if (f.compose) {
    Recomposer rec(w);
    Decomposer<Recomposer> dec(f.compat, rec);
    feed(t.text, 0, t.text.size(), dec);
    dec.flush();
    rec.finish();
  } else {
    Emit emit{w};
    Decomposer<Emit> dec(f.compat, emit);
    feed(t.text, 0, t.text.size(), dec);
    dec.flush();
  }
  w.finish(t);
}


bool is_identity(std::string_view text, const Form& f) { return quick_scan(text, 0, f).quick; }

// ---------------------------------------------------------------------------------------------
// Lowercase
// ---------------------------------------------------------------------------------------------

// The lowercase mapping of cp (which has kLowerChanges) as a pool slice.
inline const uint32_t* lower_of(uint32_t cp, uint32_t* len) {
  const nt::Record* r = nt::record(cp);
  *len = r->lower_len;
  return nt::kPool + r->lower_off;
}

inline uint32_t utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// ASCII A-Z -> a-z in eight bytes known to be ASCII.
inline uint64_t lower_ascii8(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  const uint64_t ge_a = w + (0x80 - 'A') * kOnes;      // high bit: byte >= 'A'
  const uint64_t gt_z = w + (0x80 - 'Z' - 1) * kOnes;  // high bit: byte > 'Z'
  return w | (((ge_a & ~gt_z) & 0x8080808080808080ull) >> 2);
}

bool is_white_space(uint32_t cp) {  // Rust char::is_whitespace: the White_Space property
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

// Applies sorted, validated matches: [last, start) copied, the match replaced by `content`
// whose bytes all take the alignment of the match's last byte (the byte before an empty match).
void apply_matches(NormalizedText& t, const std::vector<std::pair<uint32_t, uint32_t>>& m,
                   std::string_view content) {
  NormalizedText out;
  out.text.reserve(t.text.size() + m.size() * content.size());
  out.align.reserve(t.text.size() + m.size() * content.size());
  size_t last = 0;
  for (const auto& [start, end] : m) {
    out.text.append(t.text, last, start - last);
    out.align.insert(out.align.end(), t.align.begin() + last, t.align.begin() + start);
    const Alignment a = end == 0 ? Alignment{0, 0} : t.align[end - 1];
    out.text.append(content);
    out.align.insert(out.align.end(), content.size(), a);
    last = end;
  }
  out.text.append(t.text, last, std::string::npos);
  out.align.insert(out.align.end(), t.align.begin() + last, t.align.end());
  t.text.swap(out.text);
  t.align.swap(out.align);
}

inline bool is_char_start(const std::string& s, size_t i) {
  return i >= s.size() || (static_cast<uint8_t>(s[i]) & 0xC0) != 0x80;
}

// NormalizedString::lrstrip as written: chars of [lead, tail) are (c, 0), except that the char
// whose INDEX equals the byte length minus the trailing count minus one (the last kept char when
// the text is ASCII) carries -trailing; `lead` chars go through initial_offset.
void strip_transform(NormalizedText& t, size_t lead_end, size_t tail_start) {
  const std::string& s = t.text;
  const size_t n = s.size();
  size_t leading = 0, trailing = 0, count = 0;
  for (size_t i = 0; i < n; i += char_at(s, i).len) {
    ++count;
    if (i < lead_end) ++leading;
    if (i >= tail_start) ++trailing;
  }
  const int64_t marked = static_cast<int64_t>(n) - static_cast<int64_t>(trailing) - 1;
  Rewriter w(t, leading);
  size_t index = 0;
  for (size_t i = 0; i < n; ++index) {
    const Char c = char_at(s, i);
    if (index >= leading && index + trailing < count) {
      w.emit(c.cp, static_cast<int64_t>(index) == marked ? -static_cast<int32_t>(trailing) : 0);
    }
    i += c.len;
  }
  w.finish(t);
}

}  // namespace

namespace reference {
void normalize_lowercase(NormalizedText& t);
}  // namespace reference

// -------------------------------------------------------------------------------------------------

NormalizedText NormalizedText::from_original(std::string_view original) {
  NormalizedText t;
  t.text.assign(original.data(), original.size());
  const size_t n = original.size();
  t.align.resize(n);
  const auto* p = reinterpret_cast<const uint8_t*>(original.data());
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      t.align[i] = {static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)};
      ++i;
      continue;
    }
    const uint32_t len = utf8::decode(p + i, p + n).len;
    const Alignment a{static_cast<uint32_t>(i), static_cast<uint32_t>(i + len)};
    for (uint32_t k = 0; k < len; ++k) t.align[i + k] = a;
    i += len;
  }
  return t;
}

void normalize_nfd(NormalizedText& t) { normalize_form(t, kNfd); }
void normalize_nfkd(NormalizedText& t) { normalize_form(t, kNfkd); }
void normalize_nfc(NormalizedText& t) { normalize_form(t, kNfc); }
void normalize_nfkc(NormalizedText& t) { normalize_form(t, kNfkc); }

bool nfd_is_identity(std::string_view text) { return is_identity(text, kNfd); }
bool nfkd_is_identity(std::string_view text) { return is_identity(text, kNfkd); }
bool nfc_is_identity(std::string_view text) { return is_identity(text, kNfc); }
bool nfkc_is_identity(std::string_view text) { return is_identity(text, kNfkc); }

bool lowercase_is_identity(std::string_view text) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      if (static_cast<unsigned>(p[i] - 'A') < 26u) return false;
      ++i;
      continue;
    }
    const utf8::Decoded d = utf8::decode(p + i, p + n);
    if (d.cp != utf8::kInvalid && (nt::props(d.cp) & nt::kLowerChanges)) return false;
    i += d.len;
  }
  return true;
}

void normalize_lowercase(NormalizedText& t) {
  if (poisoned(t)) return reference::normalize_lowercase(t);
  std::string& s = t.text;
  const size_t n = s.size();
  // Pass 1, in place: every change that keeps the byte length (alignments stay as they are).
  // Lowercase is idempotent (checked by the generator), so pass 2 can tell what is left to do.
  size_t first_resize = n;
  for (size_t i = 0; i < n;) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      while (i + 8 <= n && all_ascii8(&s[i])) {
        uint64_t w;
        std::memcpy(&w, &s[i], 8);
        w = lower_ascii8(w);
        std::memcpy(&s[i], &w, 8);
        i += 8;
      }
      for (; i < n && static_cast<uint8_t>(s[i]) < 0x80; ++i) {
        if (static_cast<unsigned>(static_cast<uint8_t>(s[i]) - 'A') < 26u) s[i] = static_cast<char>(s[i] | 0x20);
      }
      continue;
    }
    const Char c = char_at(s, i);
    if (nt::props(c.cp) & nt::kLowerChanges) {  // props is 0 for a raw byte
      uint32_t len;
      const uint32_t* low = lower_of(c.cp, &len);
      if (len == 1 && utf8_len(low[0]) == c.len) {
        encode(low[0], &s[i]);
      } else if (first_resize == n) {
        first_resize = i;
      }
    }
    i += c.len;
  }
  if (first_resize == n) return;
  // Pass 2: rebuild, copying runs whole and emitting the mappings that change the length.
  Rewriter w(t);
  for (size_t i = first_resize; i < n;) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Char c = char_at(s, i);
    if (nt::props(c.cp) & nt::kLowerChanges) {
      uint32_t len;
      const uint32_t* low = lower_of(c.cp, &len);
      if (len != 1 || utf8_len(low[0]) != c.len) {
        w.copy_to(i);
        for (uint32_t k = 0; k < len; ++k) w.emit(low[k], k ? 1 : 0);
      }
    }
    i += c.len;
  }
  w.copy_to(n);
  w.finish(t);
}

void transform_chars(NormalizedText& t, const std::vector<std::pair<uint32_t, int32_t>>& pairs,
                     size_t initial_chars) {
  Rewriter w(t, initial_chars);
  for (const auto& [cp, change] : pairs) w.emit(cp, change);
  w.finish(t);
}

void normalize_prepend(NormalizedText& t, std::string_view prefix) {
  if (t.text.empty()) return;
  // transform_range(0..len(first char), [prefix[0]: 0, prefix[1..]: +1, first char: +1]).
  const size_t first = char_at(t.text, 0).len;
  const Alignment a0 = t.align[0];              // what prefix[0] (change 0) takes
  const Alignment a1 = t.align[first - 1];      // what every inserted char takes
  size_t head = 0;                              // bytes of prefix[0]
  if (!prefix.empty()) {
    const auto* p = reinterpret_cast<const uint8_t*>(prefix.data());
    head = utf8::decode(p, p + prefix.size()).len;
  }
  std::vector<Alignment> align;
  align.reserve(prefix.size() + t.align.size());
  if (prefix.empty()) {
    align.insert(align.end(), first, Alignment{0, 0});  // the first char is "inserted" at 0
  } else {
    align.insert(align.end(), head, a0);
    align.insert(align.end(), prefix.size() - head + first, a1);
  }
  align.insert(align.end(), t.align.begin() + first, t.align.end());
  t.text.insert(0, prefix.data(), prefix.size());
  t.align.swap(align);
}

void normalize_strip(NormalizedText& t, bool left, bool right) {
  const std::string& s = t.text;
  const size_t n = s.size();
  size_t lead = 0, tail = n;
  if (left) {
    while (lead < n) {
      const Char c = char_at(s, lead);
      if (!is_white_space(c.cp)) break;
      lead += c.len;
    }
  }
  if (right) {
    while (tail > lead) {
      size_t j = tail - 1;
      while (j > lead && !is_char_start(s, j)) --j;
      if (!is_white_space(char_at(s, j).cp)) break;
      tail = j;
    }
  }
  if (lead == 0 && tail == n) return;
  if (poisoned(t)) return strip_transform(t, lead, tail);
  // Kept chars are (c, 0) with the leading ones skipped by initial_offset: a plain slice.
  t.text.erase(tail);
  t.text.erase(0, lead);
  t.align.erase(t.align.begin() + static_cast<std::ptrdiff_t>(tail), t.align.end());
  t.align.erase(t.align.begin(), t.align.begin() + static_cast<std::ptrdiff_t>(lead));
}

void normalize_replace_literal(NormalizedText& t, std::string_view pattern, std::string_view content) {
  const std::string& s = t.text;
  if (s.empty()) return;
  std::vector<std::pair<uint32_t, uint32_t>> m;
  if (pattern.empty()) {
    // Oniguruma's empty match at every char boundary, the end included.
    for (size_t i = 0; i < s.size(); i += char_at(s, i).len) {
      m.emplace_back(static_cast<uint32_t>(i), static_cast<uint32_t>(i));
    }
    m.emplace_back(static_cast<uint32_t>(s.size()), static_cast<uint32_t>(s.size()));
  } else {
    const std::string_view view(s);
    for (size_t at = view.find(pattern); at != std::string_view::npos; at = view.find(pattern, at + pattern.size())) {
      if (!is_char_start(s, at)) continue;  // only possible with a malformed pattern
      m.emplace_back(static_cast<uint32_t>(at), static_cast<uint32_t>(at + pattern.size()));
    }
    if (m.empty()) return;
  }
  apply_matches(t, m, content);
}

void normalize_replace_ranges(NormalizedText& t, const std::vector<std::pair<uint32_t, uint32_t>>& matches,
                              std::string_view content) {
  const std::string& s = t.text;
  if (s.empty() || matches.empty()) return;
  // Keep only ranges that honour the contract; in the normal case this is all of them.
  bool valid = true;
  uint64_t last = 0;
  for (const auto& [a, b] : matches) {
    if (a < last || a > b || b > s.size() || !is_char_start(s, a) || !is_char_start(s, b)) {
      valid = false;
      break;
    }
    last = b;
  }
  if (valid) {
    apply_matches(t, matches, content);
    return;
  }
  std::vector<std::pair<uint32_t, uint32_t>> kept;
  last = 0;
  for (const auto& [a, b] : matches) {
    if (a < last || a > b || b > s.size() || !is_char_start(s, a) || !is_char_start(s, b)) continue;
    kept.emplace_back(a, b);
    last = b;
  }
  if (!kept.empty()) apply_matches(t, kept, content);
}

namespace reference {

void normalize_nfd(NormalizedText& t) { normalize_form_reference(t, kNfd); }
void normalize_nfkd(NormalizedText& t) { normalize_form_reference(t, kNfkd); }
void normalize_nfc(NormalizedText& t) { normalize_form_reference(t, kNfc); }
void normalize_nfkc(NormalizedText& t) { normalize_form_reference(t, kNfkc); }

// NormalizedString::lowercase: every char through to_lowercase, first piece (c, 0), rest (c, 1).
void normalize_lowercase(NormalizedText& t) {
  Rewriter w(t);
  const std::string& s = t.text;
  for (size_t i = 0; i < s.size();) {
    const Char c = char_at(s, i);
    if ((c.cp & kRawByte) == 0 && (nt::props(c.cp) & nt::kLowerChanges)) {
      uint32_t len;
      const uint32_t* low = lower_of(c.cp, &len);
      for (uint32_t k = 0; k < len; ++k) w.emit(low[k], k ? 1 : 0);
    } else {
      w.emit(c.cp, 0);
    }
    i += c.len;
  }
  w.finish(t);
}

}  // namespace reference
}  // namespace crayon
