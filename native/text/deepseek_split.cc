// DeepSeek-V3's Split patterns as hand-written searches (see deepseek_split.h).
//
// Why: on the regex VM these three patterns took ~30% of a DeepSeek-V3 encode. Each is simple
// enough that Oniguruma's backtracking can be worked out by hand into forward scans, as
// pretokenize.cc does for the tiktoken patterns; the difference is that a position may start no
// match at all, so each function walks start positions the way the VM does (one character, by
// decode length, at a time) until one matches.
//
// Notation for `words` (each class exactly as the VM reads it from regex_tables.h):
//   A  = [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~] (the 32 ASCII punctuation and symbol characters)
//   B  = [^\r\n\p{L}\p{P}\p{S}] (includes \p{M}, \p{N}, spaces other than \r \n, invalid bytes)
//   LM = [\p{L}\p{M}]   PS = [\p{P}\p{S}]   NL = [\r\n]   S = \s (White_Space)
// At a position i holding character c, followed by d, the alternatives in order give:
//   1. c in A, d in [A-Za-z]: through the run of ASCII letters after c.
//   2. B? LM+: if c is in LM, the LM run from c (when c is a mark, B? may take it, but the run
//      from d then ends where the run from c does; when d is no LM, B? gives c back and LM+ takes
//      it). Otherwise if c is in B and d in LM, the LM run from d.
//   3. " "? PS+ NL*: c in PS: the PS run from c, then the NL run. c a space (which is in B, so
//      alternative 2 came first) and d in PS: the same from d. No later part can fail, so greedy.
//   4. \s* NL+: \s* takes the S run from c and gives it back one character at a time until NL+
//      can start, so the match ends just after the run's last \r or \n (NL+ cannot go further:
//      what follows that character is no NL). No NL in the run: no match.
//   5. \s+(?!\S): the whole S run if it reaches the end of the text (\S fails there); otherwise
//      the run minus its last character (which is S, so (?!\S) holds before it), if the run has
//      at least two characters.
//   6. \s+: the whole S run.
// A character that is in B but not in S, followed by no LM (a digit, a control character, an
// invalid byte, a format character), starts no match; nor does anything at the end of the text.
//
// The slow twin is the VM itself: tests/test_regex_oniguruma.py runs each pattern through the
// scanner and, wrapped in (?:...) so that no scanner is recognised, through the VM, and compares
// both with `tokenizers`.
#include "text/deepseek_split.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "core/utf8.h"
#include "tables/regex_tables.h"

namespace crayon {
namespace {

namespace rt = regex_tables;

// Character class bits.
constexpr uint8_t kL = 0x01;            // \p{L}
constexpr uint8_t kM = 0x02;            // \p{M}
constexpr uint8_t kN = 0x04;            // \p{N}
constexpr uint8_t kPS = 0x08;           // [\p{P}\p{S}]
constexpr uint8_t kS = 0x10;            // \s
constexpr uint8_t kNl = 0x20;           // [\r\n]
constexpr uint8_t kAsciiPunct = 0x40;   // A
constexpr uint8_t kAsciiLetter = 0x80;  // [A-Za-z]

constexpr uint32_t cats(std::initializer_list<rt::Category> cs) {
  uint32_t m = 0;
  for (rt::Category c : cs) m |= uint32_t{1} << c;
  return m;
}
constexpr uint32_t kLetterCats = cats({rt::kLu, rt::kLl, rt::kLt, rt::kLm, rt::kLo});
constexpr uint32_t kMarkCats = cats({rt::kMn, rt::kMc, rt::kMe});
constexpr uint32_t kNumberCats = cats({rt::kNd, rt::kNl, rt::kNo});
constexpr uint32_t kPunctSymbolCats = cats({rt::kPc, rt::kPd, rt::kPs, rt::kPe, rt::kPi, rt::kPf, rt::kPo,
                                            rt::kSm, rt::kSc, rt::kSk, rt::kSo});

// The class bits that props() alone gives: those of the general category (its low five bits) and
// White_Space. Outside ASCII they are all of a character's bits.
uint8_t props_class(uint16_t p) {
  const uint32_t cat = uint32_t{1} << (p & rt::kCategoryMask);
  uint8_t c = 0;
  if (cat & kLetterCats) c |= kL;
  if (cat & kMarkCats) c |= kM;
  if (cat & kNumberCats) c |= kN;
  if (cat & kPunctSymbolCats) c |= kPS;
  if (p & rt::kSpace) c |= kS;
  return c;
}

// Class bits of a code point (or utf8::kInvalid, which has none), from the VM's own tables: the
// definition, which the tables below are built from.
uint8_t classify_slow(uint32_t cp) {
  if (cp == utf8::kInvalid) return 0;
  uint8_t c = props_class(rt::props(cp));
  if (cp == '\r' || cp == '\n') c |= kNl;
  const bool ascii_letter = cp < 0x80 && (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  if (ascii_letter) c |= kAsciiLetter;
  if (cp >= 0x21 && cp <= 0x7E && !ascii_letter && !(cp >= '0' && cp <= '9')) c |= kAsciiPunct;
  return c;
}

std::array<uint8_t, 128> ascii_classes() {
  std::array<uint8_t, 128> t{};
  for (uint32_t b = 0; b < 128; ++b) t[b] = classify_slow(b);
  return t;
}
const std::array<uint8_t, 128> kAscii = ascii_classes();

// Outside ASCII, props_class by props()' low seven bits (the category, \w, \s): one load instead
// of the tests (which were a fifth of a DeepSeek-V3 encode of text in other scripts).
constexpr uint16_t kPropsKey = rt::kCategoryMask | rt::kWord | rt::kSpace;
static_assert(kPropsKey == 0x7F, "props' low seven bits");
const std::array<uint8_t, 128> kByProps = [] {
  std::array<uint8_t, 128> t{};
  for (uint16_t key = 0; key < t.size(); ++key) t[key] = props_class(key);
  return t;
}();

// classify_slow(cp), from the tables (props(utf8::kInvalid) is 0, a Cn without White_Space: no bits).
inline uint8_t classify(uint32_t cp) { return cp < 0x80 ? kAscii[cp] : kByProps[rt::props(cp) & kPropsKey]; }

struct Char {
  uint32_t cp;   // code point or utf8::kInvalid; 0 at the end of the text
  uint32_t len;  // bytes; 0 only at the end of the text
  uint8_t cls;   // class bits; 0 at the end of the text
};

inline bool is_cjk(uint32_t cp) { return (cp >= 0x3040 && cp <= 0x30FF) || (cp >= 0x4E00 && cp <= 0x9FA5); }

class Text {
 public:
  explicit Text(std::string_view text) : s_(reinterpret_cast<const uint8_t*>(text.data())), n_(text.size()) {}

  size_t size() const { return n_; }

  [[gnu::always_inline]] Char at(size_t pos) const {
    if (pos >= n_) return {0, 0, 0};
    const uint8_t b = s_[pos];
    if (b < 0x80) {
      saw_cut_ |= (kAscii[b] & kN) != 0;
      return {b, 1, kAscii[b]};
    }
    const utf8::Decoded d = utf8::decode_common(s_ + pos, s_ + n_);
    const uint8_t cls = classify(d.cp);
    saw_cut_ |= (cls & kN) != 0 || is_cjk(d.cp);
    return {d.cp, d.len, cls};
  }

  // Whether at() has returned a number or a character of the cjk class (the characters that cut
  // a `words` segment, deepseek_piece_end) since the last clear_cut().
  bool saw_cut() const { return saw_cut_; }
  void clear_cut() const { saw_cut_ = false; }

  // End of the run of characters having any bit of `mask` from pos.
  size_t run(size_t pos, uint8_t mask) const {
    for (;;) {
      const Char c = at(pos);
      if (!(c.cls & mask)) return pos;
      pos += c.len;
    }
  }

  // End of the run of ASCII letters from pos.
  size_t ascii_letters(size_t pos) const {
    while (pos < n_ && s_[pos] < 0x80 && (kAscii[s_[pos]] & kAsciiLetter)) ++pos;
    return pos;
  }

 private:
  const uint8_t* s_;
  size_t n_;
  mutable bool saw_cut_ = false;
};

// End of the `words` match starting at i (holding c), or 0 when none starts there.
size_t words_end(const Text& t, size_t i, const Char& c) {
  const size_t next = i + c.len;
  if (c.cls & kAsciiPunct) {
    const size_t e = t.ascii_letters(next);
    if (e > next) return e;
  }
  if (c.cls & (kL | kM)) return t.run(next, kL | kM);
  const Char d = t.at(next);
  const bool in_b = !(c.cls & (kNl | kL | kPS));
  if (in_b && (d.cls & (kL | kM))) return t.run(next + d.len, kL | kM);
  if (c.cls & kPS) return t.run(t.run(next, kPS), kNl);
  if (c.cp == ' ' && (d.cls & kPS)) return t.run(t.run(next + d.len, kPS), kNl);
  if (!(c.cls & kS)) return 0;
  // The S run from i: its end, the start of its last character, the end of its last NL.
  size_t end = i, last = i, after_nl = 0;
  for (Char e = c; e.cls & kS; e = t.at(end)) {
    last = end;
    end += e.len;
    if (e.cls & kNl) after_nl = end;
  }
  if (after_nl) return after_nl;
  if (end == t.size() || last == i) return end;
  return last;
}

// Every character of the cjk class is three bytes led by E3..E9 (U+3040 is E3 81 80, U+9FA5 is
// E9 BE A5). The code point of the class character at pos, or 0. Only the continuation bits are
// checked: the leads E0 and ED that would need narrower second bytes give code points outside
// the class (overlong forms below U+0800, surrogates), so this agrees with utf8::decode.
inline uint32_t cjk_cp(const uint8_t* s, size_t n, size_t pos) {
  if (n - pos < 3) return 0;
  const uint32_t b0 = s[pos], b1 = s[pos + 1], b2 = s[pos + 2];
  if ((b0 & 0xF0) != 0xE0 || (b1 & 0xC0) != 0x80 || (b2 & 0xC0) != 0x80) return 0;
  const uint32_t cp = (b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F);
  return is_cjk(cp) ? cp : 0;
}

// The length of the class character at pos, or 0.
inline size_t cjk_at(const uint8_t* s, size_t n, size_t pos) { return cjk_cp(s, n, pos) != 0 ? 3 : 0; }

// Which kana of U+3040-U+30FF are letters or marks, as the VM's tables say. (The ideographs
// U+4E00-U+9FA5 are all letters, Lo.)
const std::array<bool, 0xC0> kKanaLetters = [] {
  std::array<bool, 0xC0> t{};
  for (uint32_t k = 0; k < t.size(); ++k) t[k] = (classify(0x3040 + k) & (kL | kM)) != 0;
  return t;
}();

struct CjkRun {
  size_t end;
  bool letters_only;  // every character a letter or a mark
};

// The run of cjk class characters from i, whose first is `cp`. When every character of the run
// is a letter or a mark, the `words` alternative [\p{L}\p{M}]+ matches the run whole, and the run
// is one piece.
inline CjkRun cjk_run(const uint8_t* s, size_t n, size_t i, uint32_t cp) {
  bool letters = true;
  for (;;) {
    if (cp < 0x4E00) letters &= kKanaLetters[cp - 0x3040];
    i += 3;
    // Ideographs (most of a run) by the sequence's bytes as one big-endian number: a well-formed
    // three-byte sequence orders as its code point does, so U+4E00..U+9FA5 is E4B880..E9BEA5.
    // One load per character where four bytes are readable; the rest and kana by code point.
    while (n - i >= 4) {
      uint32_t v;
      std::memcpy(&v, s + i, 4);
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__
      v = __builtin_bswap32(v);
#endif
      v >>= 8;
      if ((v & 0xF0C0C0) != 0xE08080 || v - 0xE4B880 > 0xE9BEA5 - 0xE4B880) break;
      i += 3;
    }
    if ((cp = cjk_cp(s, n, i)) == 0) return {i, letters};
  }
}

// End of the \p{N}{1,3} group starting at i (holding c, an N character).
size_t digit_group_end(const Text& t, size_t i, const Char& c) {
  size_t e = i + c.len;
  for (int k = 1; k < 3; ++k) {
    const Char d = t.at(e);
    if (!(d.cls & kN)) break;
    e += d.len;
  }
  return e;
}

}  // namespace

bool search_deepseek_digits(std::string_view text, size_t from, size_t& match_start, size_t& match_end) {
  const Text t(text);
  for (size_t i = from; i < t.size();) {
    const Char c = t.at(i);
    if (c.cls & kN) {
      match_start = i;
      match_end = digit_group_end(t, i, c);
      return true;
    }
    i += c.len;
  }
  return false;
}

bool search_deepseek_cjk(std::string_view text, size_t from, size_t& match_start, size_t& match_end) {
  // Only bytes E3..E9 need decoding: such a byte is no continuation byte (80..BF), so it starts a
  // character however the VM stepped from `from`, and every character before it is outside the class.
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  for (size_t i = from; i < n; ++i) {
    const uint32_t cp = cjk_cp(s, n, i);
    if (cp == 0) continue;
    match_start = i;
    match_end = cjk_run(s, n, i, cp).end;
    return true;
  }
  return false;
}

namespace {

// search_deepseek_words on t.
bool search_words(const Text& t, size_t from, size_t& match_start, size_t& match_end) {
  for (size_t i = from; i < t.size();) {
    const Char c = t.at(i);
    if (const size_t e = words_end(t, i, c)) {
      match_start = i;
      match_end = e;
      return true;
    }
    i += c.len;
  }
  return false;
}

}  // namespace

bool search_deepseek_words(std::string_view text, size_t from, size_t& match_start, size_t& match_end) {
  return search_words(Text(text), from, match_start, match_end);
}

size_t deepseek_piece_end(std::string_view text, size_t pos) {
  const Text t(text);
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  size_t ms = 0, me = 0;
  // cjk (first: most characters of Chinese and Japanese text, and none of them a digit): the run
  // from pos is a segment of its own, which `words` cuts further (U+30FB KATAKANA MIDDLE DOT is
  // punctuation, U+3099 a mark).
  if (const uint32_t cp = cjk_cp(s, n, pos)) {
    const CjkRun run = cjk_run(s, n, pos, cp);
    if (run.letters_only) return run.end;  // (most runs: no search, no class lookups)
    if (!search_deepseek_words(text.substr(0, run.end), pos, ms, me)) return run.end;
    return ms == pos ? me : ms;
  }
  const Char c = t.at(pos);
  // digits: pos starts a group of up to three, since every earlier piece ended on a group's end;
  // `words` matches nothing in a group (no letter, mark, punctuation or space), so it stays whole.
  if (c.cls & kN) return digit_group_end(t, pos, c);
  // Punctuation or a symbol outside ASCII (Chinese text's ，。“”): `words` matches at pos with
  // alternative 3, the PS run and then the NL run, and the only cuts that can end it early are
  // cjk characters inside the PS run (U+30FB, U+30A0 are P); digits and cjk letters are no PS
  // and \r \n no cut. So the piece is that run up to the first cjk character, then the NL run:
  // what the search below gives, without searching twice (once on the whole text, once up to
  // the cut after the piece, where most of these pieces end).
  if (c.len > 1 && (c.cls & kPS)) {
    size_t e = pos + c.len;
    while (!cjk_at(s, n, e)) {
      const Char d = t.at(e);
      if (!(d.cls & kPS)) break;
      e += d.len;
    }
    while (e < n && (s[e] == '\r' || s[e] == '\n')) ++e;  // the NL run (ASCII only)
    return e;
  }
  // words, on the text between two cuts (a digit or a cjk character: the earlier Splits made
  // those pieces of their own). Searched on the whole text first; that answer stands unless a cut
  // lies among the characters the search looked at: up to its end, the whitespace run continuing
  // there (alternatives 4 and 5 read it to its end), and one character more. Every one of those
  // characters came through t.at() but the ASCII letters after an ASCII punctuation character
  // (alternative 1), which cut nothing; so when at() met no cut, there is none to look for
  // (most pieces: their characters are then decoded once, not twice).
  t.clear_cut();
  bool found = search_words(t, pos, ms, me);
  size_t seen = found ? me : n;
  while (seen < n) {
    const Char d = t.at(seen);
    seen += d.len;
    if (!(d.cls & kS)) break;
  }
  if (!t.saw_cut()) seen = pos;
  for (size_t i = pos; i < seen;) {
    if (s[i] < 0x80) {  // ASCII: only the digits cut
      if (static_cast<uint8_t>(s[i] - '0') >= 10) {
        ++i;
        continue;
      }
    }
    const Char d = t.at(i);
    if ((d.cls & kN) || cjk_at(s, n, i)) {
      // The segment ends at i: search it alone (its end is the end of the text for `$`-like
      // lookaheads). No match: the rest of the segment is one piece.
      found = search_deepseek_words(text.substr(0, i), pos, ms, me);
      if (!found) return i;
      break;
    }
    i += d.len;
  }
  if (!found) return n;
  return ms == pos ? me : ms;  // a match at pos, or the unmatched text before the next one
}

}  // namespace crayon
