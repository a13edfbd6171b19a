// BertNormalizer and BertPreTokenizer. See bert.h for the data flow and the alignment argument.
//
// How it is made fast without changing a byte or an alignment:
//
//  * The four BertNormalizer steps are fused into one pass (Fused below): stage A (clean_text,
//    handle_chinese_chars) -> stage B (NFD + Mn filter) -> stage C (lowercase) -> output, each
//    char carrying its source char's alignment. tokenizers' own order is kept, so a control char
//    removed between a letter and a mark still lets the mark reach the letter's NFD run.
//  * Stage B holds one NFD run (a boundary starter and the marks after it). A run that passes the
//    NFD quick check (nothing decomposes, classes in order) is emitted as it is; only a run that
//    NFD changes goes through normalize_nfd, on a small text whose alignments are markers (char k
//    of the run has (k, k+1)), so that the positional alignments NFD hands out can be mapped back
//    to the run's real ones. That is exact because NFD never combines alignments, it only copies
//    them by position, and a run's pairs consume exactly the run's chars.
//  * ASCII runs skip the stages: one 128-entry map per option set (byte out, or removed), eight
//    bytes at a time when a word holds no control char, alignments copied in blocks.
//  * The fused pass is exact only if no step ever sees text whose first byte has an empty
//    alignment (normalize.h's poisoned text). Steps never create one from clean text, but an empty
//    alignment inside the text could become some step's first byte once the chars before it are
//    filtered out; the pass checks the two places where that can happen (the first char kept by
//    clean_text and the first char that reaches lowercase) and falls back to the reference. It
//    also leaves invalid UTF-8 to the reference, so that the two agree on any bytes.
//  * normalize_bert_same_length never builds alignments at all: for the usual input (English
//    text, identity alignments) the output has one byte per input byte and the engine can keep
//    its alignments implicit.
//
// Rejected: running the steps one after another like tokenizers (five passes, five alignment
// vectors; kept as reference::normalize_bert, the test oracle), and cutting the text at NFD
// boundaries the way normalize.cc does (the Mn filter and clean_text remove chars, so the fused
// per-char pass is simpler here and just as fast).
#include "text/bert.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>

#if defined(__SSE2__) || defined(_M_X64)
#define CRAYON_BERT_SSE2 1
#include <emmintrin.h>
#endif
#if defined(_MSC_VER)
#include <intrin.h>
#endif

#include "tables/bert_tables.h"
#include "tables/normalize_tables.h"
#include "core/utf8.h"
#include "text/decompose.h"

namespace crayon {
namespace {

namespace bt = bert_tables;
namespace nt = normalize_tables;

// A byte that is not well-formed UTF-8: no properties, written back as the same byte (the same
// convention as normalize.cc and transform_chars).
constexpr uint32_t kRawByte = 0x80000000u;

// Hangul syllables decompose arithmetically into two or three jamo (normalize_tables has no list).
using hangul::kSBase;
using hangul::kSCount;

struct Char {
  uint32_t cp;  // code point, or kRawByte | byte
  uint32_t len;
};

inline Char char_at(const uint8_t* p, size_t i, size_t n) {
  const utf8::Decoded d = utf8::decode(p + i, p + n);
  if (d.cp == utf8::kInvalid) return {kRawByte | p[i], 1};
  return {d.cp, d.len};
}

inline uint32_t utf8_len(uint32_t cp) {
  if (cp & kRawByte) return 1;
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

// A char of the rewritten text: a code point, or a raw byte carried through (kRawByte | byte).
inline int encode(uint32_t cp, char* out) {
  if (cp & kRawByte) {
    out[0] = static_cast<char>(cp & 0xFF);
    return 1;
  }
  return utf8::encode(cp, out);
}

inline uint8_t bert_props(uint32_t cp) { return (cp & kRawByte) ? 0 : bt::props(cp); }
inline uint16_t norm_props(uint32_t cp) { return (cp & kRawByte) ? 0 : nt::props(cp); }
inline uint8_t ccc(uint16_t props) { return static_cast<uint8_t>(props & 0xFF); }

// An NFD run starts at a starter whose decomposition starts with a starter (normalize.cc's
// boundary for NFD): there the crate's reorder buffer is empty.
inline bool nfd_boundary(uint32_t cp) {
  if (cp < 0x80 || (cp & kRawByte)) return true;
  const uint16_t pr = nt::props(cp);
  return ccc(pr) == 0 && !(pr & nt::kCanonBadStart);
}

inline const uint32_t* lower_of(uint32_t cp, uint32_t* len) {
  const nt::Record* r = nt::record(cp);
  *len = r->lower_len;
  return nt::kPool + r->lower_off;
}

inline bool poisoned(const NormalizedText& t) { return !t.align.empty() && t.align[0].first == t.align[0].second; }

inline bool empty(const Alignment& a) { return a.first == a.second; }

// ---- ASCII ------------------------------------------------------------------------------------

constexpr uint64_t kOnes = 0x0101010101010101ull;
constexpr uint64_t kHighs = 0x8080808080808080ull;

// High bit set in some byte iff the word (of ASCII bytes) holds a byte < 0x20 or 0x7F.
inline uint64_t ascii_controls8(uint64_t w) {
  const uint64_t below_space = (w - 0x20 * kOnes) & ~w;
  const uint64_t x = w ^ (0x7F * kOnes);
  const uint64_t del = (x - kOnes) & ~x;
  return (below_space | del) & kHighs;
}

// High bit set in some byte iff the word (of ASCII bytes) holds 'A'..'Z'.
inline uint64_t ascii_upper8(uint64_t w) {
  const uint64_t ge_a = w + (0x80 - 'A') * kOnes;
  const uint64_t gt_z = w + (0x80 - 'Z' - 1) * kOnes;
  return ge_a & ~gt_z & kHighs;
}

inline uint64_t lower_ascii8(uint64_t w) { return w | (ascii_upper8(w) >> 2); }

inline uint64_t load8(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// What the whole chain does to each ASCII byte, for one option set: its output byte, or removed.
// (No ASCII char is Chinese or Mn, and ASCII is NFD-stable; bert_tables' probe guarantees it.)
struct AsciiMap {
  uint8_t out[128];
  bool keep[128];
};

int option_index(const BertNormalizerOptions& o) {
  return (o.clean_text ? 1 : 0) | (o.handle_chinese_chars ? 2 : 0) | (o.strip_accents ? 4 : 0) | (o.lowercase ? 8 : 0);
}

const AsciiMap& ascii_map(const BertNormalizerOptions& o) {
  static const auto maps = [] {
    struct Maps { AsciiMap m[16]; } all{};
    for (int k = 0; k < 16; ++k) {
      const bool clean = k & 1, lower = k & 8;
      for (uint32_t b = 0; b < 128; ++b) {
        const uint8_t f = bt::props(b);
        uint32_t c = b;
        bool keep = true;
        if (clean && (f & bt::kRemove)) keep = false;
        if (clean && (f & bt::kSpace)) c = ' ';
        if (lower && c - 'A' < 26u) c |= 0x20;
        all.m[k].out[b] = static_cast<uint8_t>(c);
        all.m[k].keep[b] = keep;
      }
    }
    return all;
  }();
  return maps.m[option_index(o)];
}

// Per BMP code point c (bit c), for one option set: the chain keeps c as it is (clean_text does not
// remove or replace it, it is not a Chinese char, lowercase leaves it) and, with strip_accents, it
// starts an NFD run, does not decompose and is no Mn, so that its run is c alone unless marks
// follow. The fused pass takes such a char without the stages' five table lookups. Built at the
// first use of an option set (about a millisecond).
const uint64_t* plain_chars(const BertNormalizerOptions& o) {
  static std::once_flag once[16];
  static std::array<std::array<uint64_t, 1024>, 16> bits;
  const int k = option_index(o);
  std::call_once(once[k], [&] {
    for (uint32_t cp = 0x80; cp < 0x10000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      const uint8_t f = bt::props(cp);
      const uint16_t pr = nt::props(cp);
      if (o.clean_text && (f & (bt::kRemove | bt::kSpace))) continue;
      if (o.handle_chinese_chars && (f & bt::kChinese)) continue;
      if (o.strip_accents && (!nfd_boundary(cp) || (pr & nt::kCanonDecomp) || (f & bt::kMn))) continue;
      if (o.lowercase && (pr & nt::kLowerChanges)) continue;
      bits[k][cp >> 6] |= uint64_t{1} << (cp & 63);
    }
  });
  return bits[k].data();
}

// ---- the fused pass ---------------------------------------------------------------------------

// Output text + alignments (kAlign; the text alone otherwise), written through raw pointers
// (capacity checked per char or per run).
template <bool kAlign>
class Sink {
 public:
  explicit Sink(size_t hint) {
    text_.resize(hint);
    if constexpr (kAlign) align_.reserve(hint);
  }
  // The text alone, after the first `keep` bytes of `prefix` (its buffer taken over).
  Sink(std::string&& prefix, size_t keep, size_t hint) : text_(std::move(prefix)), len_(keep) {
    static_assert(!kAlign, "a kept prefix has no alignments");
    if (text_.size() < keep + hint) text_.resize(keep + hint);
  }

  void put(uint32_t cp, Alignment a) {
    if (len_ + 4 > text_.size()) text_.resize(text_.size() * 2 + 16);
    const int n = encode(cp, &text_[len_]);
    len_ += static_cast<size_t>(n);
    if constexpr (kAlign) {
      for (int k = 0; k < n; ++k) align_.push_back(a);
    }
  }

  // Room for k more bytes; returns where they go (commit with advance()).
  char* room(size_t k) {
    if (len_ + k > text_.size()) text_.resize(std::max(text_.size() * 2, len_ + k) + 16);
    return &text_[len_];
  }
  void advance(size_t k) { len_ += k; }
  void copy_align(const Alignment* from, size_t k) { align_.insert(align_.end(), from, from + k); }

  void finish(NormalizedText& t) {
    text_.resize(len_);
    t.text.swap(text_);
    t.align.swap(align_);
  }
  void finish(std::string& text) {
    text_.resize(len_);
    text.swap(text_);
  }

 private:
  std::string text_;
  std::vector<Alignment> align_;
  size_t len_ = 0;
};

// Thrown when the fused pass cannot promise the reference's result: an empty alignment would
// become some step's first byte, or the text is not valid UTF-8 (a removed char between two stray
// bytes can make them one char for the steps after clean_text, which a one-pass scan never sees).
struct NeedsReference {};

// The fused pass over `text` whose byte i has the alignment align[i]. kAlign false: the text
// alone (align is null; every char then carries a placeholder alignment, which is never empty,
// as no byte of an original text has one).
template <bool kAlign>
class Fused {
 public:
  Fused(std::string_view text, const Alignment* align, const BertNormalizerOptions& o)
      : Fused(text, align, o, Sink<kAlign>(hint(text))) {}
  Fused(std::string_view text, const Alignment* align, const BertNormalizerOptions& o, Sink<kAlign>&& out)
      : text_(text), align_(align), o_(o), map_(ascii_map(o)), plain_(plain_chars(o)), out_(std::move(out)) {}
  static size_t hint(std::string_view text) { return text.size() + text.size() / 8 + 16; }
  Fused(const Fused&) = delete;  // decomposer_'s sink points back at this one
  Fused& operator=(const Fused&) = delete;

  template <class Out>
  void run(Out& t) {
    const auto* p = reinterpret_cast<const uint8_t*>(text_.data());
    const size_t n = text_.size();
    for (size_t i = 0; i < n;) {
      if (p[i] < 0x80 && first_a_ && first_c_) {
        size_t j = i + 1;
        while (j + 8 <= n && (load8(p + j) & kHighs) == 0) j += 8;
        while (j < n && p[j] < 0x80) ++j;
        // Bytes clean_text removes produce nothing and end no NFD run: "e\x01\u0301" is one run
        // for strip_accents, as in tokenizers, where the filter runs before NFD. Only a kept byte
        // (an NFD boundary) flushes the pending run.
        size_t k = i;
        while (k < j && !map_.keep[p[k]]) ++k;
        if (k < j) {
          flush_b();
          ascii_run(p, k, j);
        }
        i = j;
        continue;
      }
      const Char c = char_at(p, i, n);
      Alignment a{0, 1};
      if constexpr (kAlign) a = align_[i];
      i += c.len;
      if (c.cp < 0x10000 && first_a_ && first_c_ && ((plain_[c.cp >> 6] >> (c.cp & 63)) & 1)) {
        // A plain char comes out as it is (plain_chars). With strip_accents the run pending before
        // it goes out first, and marks after it make a run of their own, which NFD decomposes and
        // orders as it would behind it: a starter that does not decompose is never reordered.
        if (has_head_ || !marks_.empty()) flush_b();
        out_.put(c.cp, a);
        continue;
      }
      stage_a(c.cp, a);
    }
    flush_b();
    out_.finish(t);
  }

 private:
  // ASCII bytes [i, j): mapped through map_, alignments copied in blocks between removed bytes.
  void ascii_run(const uint8_t* p, size_t i, size_t j) {
    char* w = out_.room(j - i);
    char* const w0 = w;
    [[maybe_unused]] const Alignment* align = align_;
    size_t block = i;  // first byte whose alignment is not copied yet
    size_t k = i;
    const bool clean = o_.clean_text, lower = o_.lowercase;
    while (k < j) {
      if (k + 8 <= j) {
        const uint64_t word = load8(p + k);
        if (!clean || ascii_controls8(word) == 0) {
          const uint64_t v = lower ? lower_ascii8(word) : word;
          std::memcpy(w, &v, 8);
          w += 8;
          k += 8;
          continue;
        }
      }
      const uint8_t b = p[k];
      if (map_.keep[b]) {
        *w++ = static_cast<char>(map_.out[b]);
      } else {
        if constexpr (kAlign) out_.copy_align(align + block, k - block);
        block = k + 1;
      }
      ++k;
    }
    if constexpr (kAlign) out_.copy_align(align + block, j - block);
    out_.advance(static_cast<size_t>(w - w0));
  }

  // clean_text, then handle_chinese_chars.
  void stage_a(uint32_t cp, Alignment a) {
    if (cp & kRawByte) throw NeedsReference{};
    uint8_t f = bt::props(cp);
    if (o_.clean_text) {
      if (f & bt::kRemove) return;
      if (f & bt::kSpace) {
        cp = ' ';
        f = 0;
      }
    }
    if (!first_a_) {  // the first char of the mapped text: must not start a poisoned text
      if (empty(a)) throw NeedsReference{};
      first_a_ = true;
    }
    if (o_.handle_chinese_chars && (f & bt::kChinese)) {
      if (o_.strip_accents && nfd_boundary(cp) && !(norm_props(cp) & nt::kCanonDecomp)) {
        // What the three stage_b calls below do when cp is a starter without a decomposition (every
        // CJK ideograph but the compatibility ones): the pending run is flushed, ' ' and cp each
        // pass alone, and the second ' ' stays pending (a mark after it joins its run).
        flush_b();
        strip_mn(' ', a);
        strip_mn(cp, a);
        head_ = {' ', a};
        has_head_ = true;
        return;
      }
      stage_b(' ', a);
      stage_b(cp, a);
      stage_b(' ', a);
      return;
    }
    stage_b(cp, a);
  }

  // strip_accents: NFD run by run, then the Mn filter. The run is head_ (its boundary starter;
  // absent only at the start of the text or after an ASCII run) and the marks after it.
  void stage_b(uint32_t cp, Alignment a) {
    if (!o_.strip_accents) {
      stage_c(cp, a);
      return;
    }
    if (nfd_boundary(cp)) {
      flush_b();
      head_ = {cp, a};
      has_head_ = true;
      return;
    }
    marks_.push_back({cp, a});
  }

  void flush_b() {
    if (marks_.empty()) {  // the usual run: one starter
      if (!has_head_) return;
      if (!(norm_props(head_.cp) & nt::kCanonDecomp)) {
        has_head_ = false;
        return strip_mn(head_.cp, head_.a);
      }
    }
    run_.clear();
    if (has_head_) run_.push_back(head_);
    run_.insert(run_.end(), marks_.begin(), marks_.end());
    has_head_ = false;
    marks_.clear();
    bool quick = true;
    uint8_t last = 0;
    for (const Pending& x : run_) {
      const uint16_t pr = norm_props(x.cp);
      if ((pr & nt::kCanonDecomp) || (ccc(pr) != 0 && last > ccc(pr))) {
        quick = false;
        break;
      }
      last = ccc(pr);
    }
    if (quick) {
      for (const Pending& x : run_) strip_mn(x.cp, x.a);
    } else {
      nfd_run();
    }
  }

  // normalize_nfd on the run alone, with marker alignments mapped back to the real ones. Text
  // alone (kAlign false), the run goes straight through the crate's decomposer, as normalize_nfd
  // would take it, once a char has reached lowercase: from then on no alignment is read (stage_c
  // checks only the first char's), so none is made (the marker text was 13% of bert_base_uncased's
  // instructions on the 39 scripts).
  void nfd_run() {
    if constexpr (!kAlign) {
      if (first_c_) {
        for (const Pending& x : run_) decomposer_.push_char(x.cp);
        return decomposer_.flush();
      }
    }
    mini_.text.clear();
    mini_.align.clear();
    char buf[4];
    for (uint32_t k = 0; k < run_.size(); ++k) {
      const int len = encode(run_[k].cp, buf);
      mini_.text.append(buf, static_cast<size_t>(len));
      mini_.align.insert(mini_.align.end(), static_cast<size_t>(len), Alignment{k, k + 1});
    }
    normalize_nfd(mini_);
    const auto* p = reinterpret_cast<const uint8_t*>(mini_.text.data());
    const size_t n = mini_.text.size();
    for (size_t i = 0; i < n;) {
      const Char c = char_at(p, i, n);
      const Alignment m = mini_.align[i];
      strip_mn(c.cp, empty(m) ? Alignment{0, 0} : run_[m.first].a);
      i += c.len;
    }
  }

  void strip_mn(uint32_t cp, Alignment a) {
    if (bert_props(cp) & bt::kMn) return;
    stage_c(cp, a);
  }

  // lowercase, then out.
  void stage_c(uint32_t cp, Alignment a) {
    if (!first_c_) {  // the first char that lowercase sees
      if (empty(a)) throw NeedsReference{};
      first_c_ = true;
    }
    if (o_.lowercase && (norm_props(cp) & nt::kLowerChanges)) {
      uint32_t len;
      const uint32_t* low = lower_of(cp, &len);
      for (uint32_t k = 0; k < len; ++k) out_.put(low[k], a);
      return;
    }
    out_.put(cp, a);
  }

  struct Pending {
    uint32_t cp;
    Alignment a;
  };

  std::string_view text_;
  const Alignment* align_;
  const BertNormalizerOptions& o_;
  const AsciiMap& map_;
  const uint64_t* plain_;
  Sink<kAlign> out_;
  Pending head_{0, {0, 0}};
  bool has_head_ = false;
  std::vector<Pending> marks_, run_;
  NormalizedText mini_;
  // The decomposer's output, char by char, into the Mn filter (kAlign false: no alignment read).
  struct ToStripMn {
    Fused* fused;
    void operator()(uint32_t cp, int32_t, uint8_t) { fused->strip_mn(cp, Alignment{0, 1}); }
  };
  ToStripMn to_strip_mn_{this};
  Decomposer<ToStripMn> decomposer_{/*compat=*/false, to_strip_mn_};
  bool first_a_ = false, first_c_ = false;
};

// ---- tokenizers' steps, literally (the reference) ----------------------------------------------

template <class F>
void for_each_char(const std::string& s, F f) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const Char c = char_at(p, i, s.size());
    f(c.cp);
    i += c.len;
  }
}

using Pairs = std::vector<std::pair<uint32_t, int32_t>>;

// NormalizedString::filter: each kept char carries minus the number of removed chars after it;
// removed chars before the first kept one become the initial offset (0 if nothing is kept).
template <class Keep>
void filter(NormalizedText& t, Keep keep) {
  Pairs pairs;
  pairs.reserve(t.text.size());
  int32_t removed = 0;
  size_t removed_start = 0;
  bool have_last = false;
  uint32_t last = 0;
  for_each_char(t.text, [&](uint32_t cp) {
    if (keep(cp)) {
      if (have_last) {
        pairs.emplace_back(last, -removed);
      } else {
        removed_start = static_cast<size_t>(removed);
      }
      have_last = true;
      last = cp;
      removed = 0;
    } else {
      ++removed;
    }
  });
  if (have_last) pairs.emplace_back(last, -removed);
  transform_chars(t, pairs, removed_start);
}

template <class Map>
void map_chars(NormalizedText& t, Map map) {
  Pairs pairs;
  for_each_char(t.text, [&](uint32_t cp) { pairs.emplace_back(map(cp), 0); });
  transform_chars(t, pairs);
}


// ---- BertPreTokenizer ---------------------------------------------------------------------------
//
// Pieces are the runs of word chars (neither whitespace nor punctuation) and each punctuation char.
// The scanner takes 64 ASCII bytes at a time as bit masks (word, punctuation) and walks only the
// events in them - a word starts, a word ends, a punctuation char - writing each piece
// unconditionally and advancing the count by a flag, so that the unpredictable word lengths cost
// no branch mispredictions. Blocks holding a byte >= 0x80 go char by char (step) with the same
// state: whether a word is open, and where it started.

constexpr uint8_t kWordBit = 1, kPunctBit = 2, kDecodeBit = 4;

inline uint32_t lowest_bit(uint64_t x) {  // x != 0
#if defined(_MSC_VER)
  unsigned long i;
  _BitScanForward64(&i, x);
  return static_cast<uint32_t>(i);
#else
  return static_cast<uint32_t>(__builtin_ctzll(x));
#endif
}

struct ByteClassTable {
  uint8_t c[256];
};

const ByteClassTable kByteClass = [] {
  ByteClassTable t{};
  for (uint32_t b = 0; b < 256; ++b) {
    if (b >= 0x80) {
      t.c[b] = kDecodeBit;
      continue;
    }
    const uint8_t f = bt::props(b);
    t.c[b] = (f & bt::kWhitespace) ? 0 : (f & bt::kPunc) ? kPunctBit : kWordBit;
  }
  return t;
}();


struct BlockMasks {
  uint64_t word, punct, decode;  // bit j: byte j is a word byte / punctuation / >= 0x80
};

BlockMasks classify64_table(const uint8_t* p) {
  BlockMasks b{0, 0, 0};
  for (uint32_t j = 0; j < 64; ++j) {
    const uint8_t c = kByteClass.c[p[j]];
    b.word |= static_cast<uint64_t>(c & kWordBit) << j;
    b.punct |= static_cast<uint64_t>((c & kPunctBit) >> 1) << j;
    b.decode |= static_cast<uint64_t>((c & kDecodeBit) >> 2) << j;
  }
  return b;
}

#if defined(CRAYON_BERT_SSE2)
// The same classes with SSE2 range compares: whitespace is 0x09..0x0D and ' ', punctuation the
// four ASCII ranges. kSimdAgrees checks them against the probed table once, for all 128 bytes.
BlockMasks classify64_sse2(const uint8_t* p) {
  BlockMasks b{0, 0, 0};
  auto in = [](__m128i v, char lo, char hi) {  // lo <= v <= hi, signed (bytes >= 0x80 never match)
    return _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(static_cast<char>(lo - 1))),
                         _mm_cmplt_epi8(v, _mm_set1_epi8(static_cast<char>(hi + 1))));
  };
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i space = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), in(v, 0x09, 0x0D));
    const __m128i punct = _mm_or_si128(_mm_or_si128(in(v, 0x21, 0x2F), in(v, 0x3A, 0x40)),
                                       _mm_or_si128(in(v, 0x5B, 0x60), in(v, 0x7B, 0x7E)));
    const uint64_t hi = static_cast<uint32_t>(_mm_movemask_epi8(v));
    const uint64_t sp = static_cast<uint32_t>(_mm_movemask_epi8(space));
    const uint64_t pu = static_cast<uint32_t>(_mm_movemask_epi8(punct));
    b.decode |= hi << (16 * k);
    b.punct |= pu << (16 * k);
    b.word |= (~(hi | sp | pu) & 0xFFFF) << (16 * k);
  }
  return b;
}

const bool kSimdAgrees = [] {
  uint8_t bytes[128];
  for (int i = 0; i < 128; ++i) bytes[i] = static_cast<uint8_t>(i);
  for (int h = 0; h < 128; h += 64) {
    const BlockMasks a = classify64_table(bytes + h), b = classify64_sse2(bytes + h);
    if (a.word != b.word || a.punct != b.punct || a.decode != b.decode) return false;
  }
  return true;
}();

inline BlockMasks classify64(const uint8_t* p) { return kSimdAgrees ? classify64_sse2(p) : classify64_table(p); }
#else
inline BlockMasks classify64(const uint8_t* p) { return classify64_table(p); }
#endif

class PieceScanner {
 public:
  // `isolated`: bert_props flags of non-ASCII chars that are pre-tokens of their own, as punctuation.
  PieceScanner(std::vector<std::pair<uint32_t, uint32_t>>& pieces, uint8_t isolated)
      : pieces_(pieces), isolated_(isolated | bt::kPunc) {}

  // 64 ASCII bytes at `base`: bit j of `word` / `punct` describes byte base + j.
  void block(uint32_t base, uint64_t word, uint64_t punct) {
    const uint64_t prev = (word << 1) | (open_ ? 1 : 0);  // bit j: byte j - 1 is a word byte
    const uint64_t starts = word & ~prev;
    const uint64_t ends = ~word & prev;                    // first non-word byte after a word
    uint64_t events = starts | ends | punct;
    std::pair<uint32_t, uint32_t> out[66];  // at most one piece per end or punctuation bit, plus one
    size_t m = 0;
    uint32_t start = start_;
    while (events) {
      const uint32_t j = lowest_bit(events);
      events &= events - 1;
      const uint32_t q = base + j;
      out[m] = {start, q};
      m += (ends >> j) & 1;
      start = ((starts >> j) & 1) ? q : start;
      out[m] = {q, q + 1};
      m += (punct >> j) & 1;
    }
    pieces_.insert(pieces_.end(), out, out + m);
    start_ = start;
    open_ = (word >> 63) & 1;
  }

  // One char at i (any byte); returns the index after it.
  uint32_t step(const uint8_t* p, uint32_t i, uint32_t n) {
    uint8_t c = kByteClass.c[p[i]];
    uint32_t len = 1;
    if (c & kDecodeBit) {
      const Char ch = char_at(p, i, n);
      len = ch.len;
      const uint8_t f = bert_props(ch.cp);
      c = (f & bt::kWhitespace) ? 0 : (f & isolated_) ? kPunctBit : kWordBit;
    }
    if (c & kWordBit) {
      if (!open_) start_ = i;
      open_ = true;
    } else {
      if (open_) pieces_.emplace_back(start_, i);
      open_ = false;
      if (c & kPunctBit) pieces_.emplace_back(i, i + len);
    }
    return i + len;
  }

  void finish(uint32_t n) {
    if (open_) pieces_.emplace_back(start_, n);
    open_ = false;
  }

 private:
  std::vector<std::pair<uint32_t, uint32_t>>& pieces_;
  uint8_t isolated_;
  uint32_t start_ = 0;
  bool open_ = false;
};

}  // namespace

// -------------------------------------------------------------------------------------------------

bool bert_is_identity(std::string_view text, const BertNormalizerOptions& o) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  const AsciiMap& map = ascii_map(o);
  uint8_t last_ccc = 0;
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      for (; i + 8 <= n; i += 8) {
        const uint64_t w = load8(p + i);
        if ((w & kHighs) || (o.clean_text && ascii_controls8(w)) || (o.lowercase && ascii_upper8(w))) break;
      }
      for (; i < n && p[i] < 0x80; ++i) {
        if (!map.keep[p[i]] || map.out[p[i]] != p[i]) return false;
      }
      last_ccc = 0;
      continue;
    }
    const Char c = char_at(p, i, n);
    i += c.len;
    if (c.cp & kRawByte) {
      last_ccc = 0;
      continue;
    }
    const uint8_t f = bt::props(c.cp);
    const uint16_t pr = nt::props(c.cp);
    if (o.clean_text && (f & (bt::kRemove | bt::kSpace))) return false;  // ' ' itself is ASCII
    if (o.handle_chinese_chars && (f & bt::kChinese)) return false;
    if (o.strip_accents) {
      if ((pr & nt::kCanonDecomp) || (f & bt::kMn)) return false;
      if (ccc(pr) != 0 && last_ccc > ccc(pr)) return false;
      last_ccc = ccc(pr);
    }
    if (o.lowercase && (pr & nt::kLowerChanges)) return false;
  }
  return true;
}

void normalize_bert(NormalizedText& t, const BertNormalizerOptions& o) {
  if (poisoned(t)) return reference::normalize_bert(t, o);
  if (bert_is_identity(t.text, o)) return;
  try {
    Fused<true>(t.text, t.align.data(), o).run(t);
  } catch (const NeedsReference&) {
    reference::normalize_bert(t, o);  // t is untouched until run() finishes
  }
}

bool normalize_bert_text(std::string_view text, const BertNormalizerOptions& o, std::string& out, size_t from) {
  // From a kept ASCII char on (normalize_bert_same_length's resume), the rest normalizes as it
  // would in the whole: that char is a starter no mark before it reorders with, and every other
  // step is char by char. So the kept bytes stay and the fused pass takes up the rest.
  const std::string_view rest = text.substr(from);
  try {
    Fused<false>(rest, nullptr, o, Sink<false>(std::move(out), from, Fused<false>::hint(rest))).run(out);
  } catch (const NeedsReference&) {
    return false;
  }
  return true;
}

namespace {

// normalize_bert_same_length up to the first char it cannot keep: that char's position, or n.
size_t same_length_until(std::string_view text, const BertNormalizerOptions& o, std::string& out,
                         bool* separators_left) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  out.resize(n);
  char* w = &out[0];
  const AsciiMap& map = ascii_map(o);
  for (size_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      if (i + 8 <= n) {
        const uint64_t word = load8(p + i);
        if (!(word & kHighs) && (!o.clean_text || !ascii_controls8(word))) {
          const uint64_t v = o.lowercase ? lower_ascii8(word) : word;
          std::memcpy(w + i, &v, 8);
          i += 8;
          continue;
        }
      }
      if (!map.keep[p[i]]) return i;
      w[i] = static_cast<char>(map.out[p[i]]);
      ++i;
      continue;
    }
    const Char c = char_at(p, i, n);
    uint32_t cp = c.cp;
    if (!(cp & kRawByte)) {
      const uint8_t f = bt::props(cp);
      if (o.clean_text && (f & bt::kRemove)) return i;
      if (o.clean_text && (f & bt::kSpace)) {
        // Mapped to ' ' (a shorter char): left as it is only for a splitter that drops it anyway
        // (and isolates CJK chars, which is right only where handle_chinese_chars spaces them).
        if (separators_left == nullptr || !o.handle_chinese_chars || !(f & bt::kWhitespace)) return i;
        *separators_left = true;
        std::memcpy(w + i, p + i, c.len);
        i += c.len;
        continue;
      }
      const bool cjk = o.handle_chinese_chars && (f & bt::kChinese);
      if (cjk && separators_left == nullptr) return i;
      if (o.strip_accents) {
        const uint16_t pr = nt::props(cp);
        // A mark is either dropped or may be reordered; a starter must keep its first piece and
        // lose all the others (then it is alone in its NFD run: the next char is a starter too,
        // or this test fails on it).
        if (ccc(pr) != 0 || (pr & nt::kCanonBadStart)) return i;
        if (pr & nt::kCanonDecomp) {
          if (cp - kSBase < kSCount) return i;  // Hangul: two or three jamo
          const nt::Record* r = nt::record(cp);
          const uint32_t* d = nt::kPool + r->canon_off;
          for (uint32_t k = 1; k < r->canon_len; ++k) {
            if (!(bt::props(d[k]) & bt::kMn)) return i;
          }
          cp = d[0];
        }
        if (bt::props(cp) & bt::kMn) return i;
      }
      if (o.lowercase && (nt::props(cp) & nt::kLowerChanges)) {
        uint32_t len;
        const uint32_t* low = lower_of(cp, &len);
        if (len != 1) return i;
        cp = low[0];
      }
      if (utf8_len(cp) != c.len) return i;
      // Isolating CJK chars after normalizing finds the chars that were CJK before only if
      // normalizing keeps the class (NFD of a compatibility ideograph is an ideograph).
      if (separators_left != nullptr && o.handle_chinese_chars && ((bt::props(cp) & bt::kChinese) != 0) != cjk) return i;
      if (cjk) *separators_left = true;
    }
    encode(cp, w + i);
    i += c.len;
  }
  return n;
}

}  // namespace

bool normalize_bert_same_length(std::string_view text, const BertNormalizerOptions& o, std::string& out,
                                bool* separators_left, size_t* resume) {
  const size_t stop = same_length_until(text, o, out, separators_left);
  if (stop == text.size()) return true;
  if (resume != nullptr) {
    // The last char before the stop that is a kept ASCII char: an NFD boundary (a removed control
    // is none: "e\x01\u0301" is one run), so the bytes before it are final.
    const auto* p = reinterpret_cast<const uint8_t*>(text.data());
    const AsciiMap& map = ascii_map(o);
    size_t k = stop;
    while (k > 0 && !(p[k - 1] < 0x80 && map.keep[p[k - 1]])) --k;
    *resume = k > 0 ? k - 1 : 0;
  }
  return false;
}

void pretokenize_bert(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces, bool isolate_cjk) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  const uint32_t n = static_cast<uint32_t>(text.size());
  PieceScanner scan(pieces, isolate_cjk ? bt::kChinese : 0);
  uint32_t i = 0;
  while (i + 64 <= n) {
    const BlockMasks b = classify64(p + i);
    if (b.decode == 0) {
      scan.block(i, b.word, b.punct);
      i += 64;
      continue;
    }
    const uint32_t end = i + 64;  // char by char up to the first char that starts at or after end
    while (i < end) i = scan.step(p, i, n);
  }
  while (i < n) i = scan.step(p, i, n);
  scan.finish(n);
}

namespace reference {

void normalize_bert(NormalizedText& t, const BertNormalizerOptions& o) {
  if (o.clean_text) {
    filter(t, [](uint32_t cp) { return !(bert_props(cp) & bt::kRemove); });
    map_chars(t, [](uint32_t cp) { return (bert_props(cp) & bt::kSpace) ? uint32_t{' '} : cp; });
  }
  if (o.handle_chinese_chars) {
    Pairs pairs;
    for_each_char(t.text, [&](uint32_t cp) {
      if (bert_props(cp) & bt::kChinese) {
        pairs.emplace_back(' ', 0);
        pairs.emplace_back(cp, 1);
        pairs.emplace_back(' ', 1);
      } else {
        pairs.emplace_back(cp, 0);
      }
    });
    transform_chars(t, pairs);
  }
  if (o.strip_accents) {
    crayon::reference::normalize_nfd(t);
    filter(t, [](uint32_t cp) { return !(bert_props(cp) & bt::kMn); });
  }
  if (o.lowercase) crayon::reference::normalize_lowercase(t);
}

// Pattern::find_matches for a char predicate, then NormalizedString::split and the empty-piece
// filter of PreTokenizedString::split, once for whitespace (Removed) and once for punctuation
// (Isolated) inside each piece.
void pretokenize_bert(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& pieces) {
  struct Seg {
    uint32_t start, end;
    bool match;
  };
  auto find = [](std::string_view s, uint32_t base, uint8_t flag) {
    std::vector<Seg> segs;
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    const uint32_t n = static_cast<uint32_t>(s.size());
    uint32_t last = 0;
    for (uint32_t i = 0; i < n;) {
      const Char c = char_at(p, i, n);
      if (bert_props(c.cp) & flag) {
        if (last < i) segs.push_back({base + last, base + i, false});
        segs.push_back({base + i, base + i + c.len, true});
        last = i + c.len;
      }
      i += c.len;
    }
    if (n > last) segs.push_back({base + last, base + n, false});
    return segs;
  };
  std::vector<std::pair<uint32_t, uint32_t>> words;
  for (const Seg& s : find(text, 0, bt::kWhitespace)) {
    if (!s.match && s.end > s.start) words.emplace_back(s.start, s.end);  // Removed
  }
  for (const auto& [a, b] : words) {
    for (const Seg& s : find(text.substr(a, b - a), a, bt::kPunc)) {
      if (s.end > s.start) pieces.emplace_back(s.start, s.end);  // Isolated
    }
  }
}

}  // namespace reference
}  // namespace crayon
