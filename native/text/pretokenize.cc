// Hand-written scanners for tiktoken's split patterns.
//
// Why scanners and not a regex engine: tiktoken spends most of its time in fancy-regex. Each
// pattern here is a short leftmost-first alternation whose backtracking can be worked out once, by
// hand, into a few forward scans over character runs; what remains is a table lookup per character
// (ASCII from a 128-byte table, the rest from the two-stage tables in unicode_tables.h).
//
// Each scanner below starts with the pattern and the reasoning that turns it into scans. Notation:
//   L N M = \p{L} \p{N} \p{M};  S = \s (White_Space);  NL = [\r\n]
//   O = [^\s\p{L}\p{N}]         P = [^\r\n\p{L}\p{N}] (includes S other than NL, and M)
//   "run of X from i" = the longest sequence of X characters starting at i.
// Contractions: cl100k, o200k and Llama 3 match their letters case-insensitively (U+017F matches
// s; see contraction_letter), r50k matches lower-case ASCII only. The apostrophe is U+0027 only.
//
// Linear time: every scan is over a run that the returned piece, or the next one or two pieces,
// consume; no run is rescanned more than a constant number of times (noted per scanner).
// Invalid UTF-8 bytes are one-byte characters with no flags (so they are O and P).
//
// Performance (piece_end in a loop, -O2, one core; en_gutenberg_big / zh_hongloumeng): about
// 300 / 330 MiB/s for every pattern, 15 ns per English piece, until ASCII letter runs went eight
// bytes per step (ascii_run): cl100k 500 MiB/s (9 ns per piece), o200k 475 (10 ns; with its fast
// paths for ASCII punctuation and for words without a capital), the engine +8-17% on English and code. What mattered before: pushing
// pieces into `out` one at a time cost ~12% (now buffered in chunks), and o200k's general letter
// scan ran at ~240 MiB/s on English until the all-ASCII word fast path. A per-character decode is
// not the bottleneck; ASCII never reaches the UTF-8 decoder. What is left per piece is mostly
// branches on the piece's kind, which piece_blocks.cc removes for blocks of ASCII: the engines
// call these scanners for the pieces a block cannot prove (non-ASCII text, runs longer than a
// block, the end of a segment).
//
// The slow twin is tiktoken itself: tests/test_pretokenize.py compares every scanner with it.
#include "text/pretokenize.h"

#include <cstring>

#include "core/swar.h"
#include "core/utf8.h"
#include "tables/unicode_tables.h"

namespace crayon {
namespace {

using unicode::kLetter;
using unicode::kLowerish;
using unicode::kNumber;
using unicode::kSpace;
using unicode::kUpperish;

constexpr uint32_t kEndOfText = 0xFFFFFFFEu;

// The end of the run of ASCII bytes in [lo, hi] from pos, eight bytes at a time (core/swar.h): a
// word of up to eight letters is one load, a few adds and a count of trailing zeros, where a loop
// over bytes costs a mispredicted exit per word. `fold` ORs 0x20 into each byte first, which maps
// A-Z onto a-z and no other ASCII byte into a-z. Non-ASCII bytes end the run.
inline size_t ascii_run(const uint8_t* s, size_t n, size_t pos, uint8_t lo, uint8_t hi, bool fold) {
  const uint8_t case_bit = fold ? 0x20 : 0;
  pos = swar::skip(s, pos, n, [&](uint64_t x) { return swar::non_ascii_or_outside(x, lo, hi, case_bit); });
  while (pos < n && static_cast<uint8_t>((s[pos] | case_bit) - lo) <= hi - lo && s[pos] < 0x80) ++pos;
  return pos;
}

struct Ch {
  uint32_t cp;   // code point, utf8::kInvalid, or kEndOfText
  uint32_t len;  // bytes; 0 only at the end of the text
  uint8_t f;     // unicode flags
};

inline bool is_nl(const Ch& c) { return c.cp == '\r' || c.cp == '\n'; }
// [^\s\p{L}\p{N}]
inline bool is_o(const Ch& c) { return c.len != 0 && !(c.f & (kLetter | kNumber | kSpace)); }
// [^\r\n\p{L}\p{N}]
inline bool is_p(const Ch& c) { return c.len != 0 && !(c.f & (kLetter | kNumber)) && !is_nl(c); }

class Scanner {
 public:
  explicit Scanner(std::string_view text)
      : s_(reinterpret_cast<const uint8_t*>(text.data())), n_(text.size()) {}

  size_t size() const { return n_; }
  const uint8_t* data() const { return s_; }

  Ch at(size_t pos) const {
    if (pos >= n_) return {kEndOfText, 0, 0};
    const uint8_t b = s_[pos];
    if (b < 0x80) return {b, 1, unicode::kAsciiFlags[b]};
    const utf8::Decoded d = utf8::decode_common(s_ + pos, s_ + n_);
    return {d.cp, d.len, d.cp == utf8::kInvalid ? uint8_t{0} : unicode::flags(d.cp)};
  }

  // End of the run of characters having any of `mask` from pos, ASCII bytes without decoding.
  size_t run_any(size_t pos, uint8_t mask) const {
    if (mask == kLetter) pos = ascii_run(s_, n_, pos, 'a', 'z', /*fold=*/true);
    while (pos < n_) {
      const uint8_t b = s_[pos];
      if (b < 0x80) {
        if (!(unicode::kAsciiFlags[b] & mask)) break;
        ++pos;
        continue;
      }
      const Ch c = at(pos);
      if (!(c.f & mask)) break;
      pos += c.len;
    }
    return pos;
  }

  // End of the run of O characters from pos.
  size_t run_o(size_t pos) const {
    while (pos < n_) {
      const uint8_t b = s_[pos];
      if (b < 0x80) {
        if (unicode::kAsciiFlags[b] & (kLetter | kNumber | kSpace)) break;
        ++pos;
        continue;
      }
      const Ch c = at(pos);
      if (!is_o(c)) break;
      pos += c.len;
    }
    return pos;
  }

  // End of the run of bytes from `set` (ASCII only) from pos.
  size_t run_bytes(size_t pos, bool slash) const {
    while (pos < n_ && (s_[pos] == '\r' || s_[pos] == '\n' || (slash && s_[pos] == '/'))) ++pos;
    return pos;
  }

  // Up to three N characters from pos (pos holds an N).
  size_t digits3(size_t pos) const {
    for (int k = 0; k < 3; ++k) {
      const Ch c = at(pos);
      if (!(c.f & kNumber)) break;
      pos += c.len;
    }
    return pos;
  }

  // Bytes matched by the contraction body after an apostrophe, starting at pos, or 0:
  // [sdmt] | ll | ve | re, case-insensitive or not.
  size_t contraction_body(size_t pos, bool ignore_case) const {
    const Ch a = at(pos);
    const char l = letter(a, ignore_case);
    switch (l) {
      case 's': case 'd': case 'm': case 't': return a.len;
      case 'l': case 'v': case 'r': {
        const Ch b = at(pos + a.len);
        const char want = l == 'l' ? 'l' : 'e';
        return letter(b, ignore_case) == want ? a.len + b.len : 0;
      }
      default: return 0;
    }
  }

  // Bytes matched by an optional case-insensitive contraction (apostrophe included) at pos.
  size_t optional_contraction(size_t pos) const {
    if (pos >= n_ || s_[pos] != '\'') return 0;
    const size_t body = contraction_body(pos + 1, /*ignore_case=*/true);
    return body ? 1 + body : 0;
  }

  // A run of whitespace from pos (pos holds an S character).
  struct SpaceRun {
    size_t end;       // first position after the run
    size_t last;      // start of the run's last character
    size_t after_nl;  // position after the last \r or \n in the run, or 0 if none
    bool single;      // the run is one character
  };
  SpaceRun space_run(size_t pos) const {
    SpaceRun r{pos, pos, 0, true};
    const size_t start = pos;
    while (pos < n_) {
      const uint8_t b = s_[pos];
      size_t len = 1;
      if (b < 0x80) {
        if (!(unicode::kAsciiFlags[b] & kSpace)) break;
        if (b == '\r' || b == '\n') r.after_nl = pos + 1;
      } else {
        const Ch c = at(pos);
        if (!(c.f & kSpace)) break;
        len = c.len;
      }
      r.last = pos;
      pos += len;
    }
    r.end = pos;
    r.single = r.last == start;
    return r;
  }

 private:
  static char letter(const Ch& c, bool ignore_case) {
    if (ignore_case) return unicode::contraction_letter(c.cp);
    switch (c.cp) {
      case 's': case 'd': case 'm': case 't': case 'l': case 'v': case 'r': case 'e':
        return static_cast<char>(c.cp);
      default: return 0;
    }
  }

  const uint8_t* s_;
  size_t n_;
};

// ---------------------------------------------------------------------------------------------
// r50k_base:  '(?:[sdmt]|ll|ve|re) | ?\p{L}++ | ?\p{N}++ | ?[^\s\p{L}\p{N}]++ | \s++$ | \s+(?!\S) | \s
//
// All quantifiers on classes are possessive or cannot backtrack usefully, so at i:
//   1. ' + case-sensitive contraction.
//   2-4. Optional U+0020, then a run of L, of N, or of O, chosen by the first character after
//      the optional space (the classes are disjoint; if the space is not followed by L/N/O, the
//      space alternatives fail and the whitespace ones apply).
//   5-7. i starts a whitespace run [i, j): j == end -> [i, j); run of >= 2 -> [i, start of last
//      character) (the lookahead fails at j, succeeds one character earlier); else one character.
// Each whitespace run is scanned at most twice (the piece before its last character, then the
// last character, which joins the next piece or is scanned alone).
size_t end_r50k(const Scanner& sc, size_t i) {
  const Ch c0 = sc.at(i);
  if (c0.cp == '\'') {
    const size_t body = sc.contraction_body(i + 1, /*ignore_case=*/false);
    if (body) return i + 1 + body;
  }
  size_t start = i;
  Ch c = c0;
  if (c0.cp == ' ') {
    const Ch c1 = sc.at(i + 1);
    if (c1.len && !(c1.f & kSpace)) {
      start = i + 1;
      c = c1;
    }
  }
  if (c.f & kLetter) return sc.run_any(start, kLetter);
  if (c.f & kNumber) return sc.run_any(start, kNumber);
  if (is_o(c)) return sc.run_o(start);
  const Scanner::SpaceRun r = sc.space_run(i);
  if (r.end == sc.size() || r.single) return r.end;
  return r.last;
}

// ---------------------------------------------------------------------------------------------
// cl100k_base:
//   '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ?[^\s\p{L}\p{N}]++[\r\n]*+
//   | \s++$ | \s*[\r\n] | \s+(?!\S) | \s
// Llama 3:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n]*
//   | \s*[\r\n]+ | \s+(?!\S) | \s+
//
// The first four alternatives behave the same in both (backtracking into P? or [\r\n]* cannot
// produce a different first match), so at i:
//   1. ' + case-insensitive contraction.
//   2. i is L: run of L.  i is P and i+1 is L: P + run of L.
//   3. i is N: up to three N.
//   4. Optional U+0020, then a run of O, then a run of [\r\n].
//   Otherwise i starts a whitespace run [i, j). Let k = just after the last \r/\n in it.
//   cl100k:  j == end -> [i, j)  (\s++$ comes first);  k exists -> [i, k)  (\s* backtracks to the
//            last newline);  run of >= 2 -> [i, start of last char);  else one character.
//   Llama 3: k exists -> [i, k) (\s*[\r\n]+ comes first; [\r\n]+ cannot extend past the last
//            newline of the run);  j == end -> [i, j) (the lookahead succeeds at the end);
//            run of >= 2 -> [i, start of last char);  else one character (\s+ on a run of one).
//   e.g. "a \n  ": cl100k "a", " \n  ";  Llama 3 "a", " \n", "  ".
// A whitespace run is scanned at most three times (up to its last newline, the rest but its last
// character, the last character).
template <bool kLlama3>
size_t end_cl100k_like(const Scanner& sc, size_t i) {
  const Ch c0 = sc.at(i);
  if (c0.cp == '\'') {
    const size_t body = sc.contraction_body(i + 1, /*ignore_case=*/true);
    if (body) return i + 1 + body;
  }
  if (c0.f & kLetter) return sc.run_any(i + c0.len, kLetter);
  if (c0.f & kNumber) return sc.digits3(i);
  if (is_p(c0)) {
    const Ch c1 = sc.at(i + c0.len);
    if (c1.f & kLetter) return sc.run_any(i + c0.len + c1.len, kLetter);
  }
  size_t start = i;
  Ch c = c0;
  if (c0.cp == ' ') {
    start = i + 1;
    c = sc.at(start);
  }
  if (is_o(c)) return sc.run_bytes(sc.run_o(start), /*slash=*/false);
  const Scanner::SpaceRun r = sc.space_run(i);
  if (kLlama3) {
    if (r.after_nl) return r.after_nl;
    if (r.end == sc.size() || r.single) return r.end;
    return r.last;
  }
  if (r.end == sc.size()) return r.end;
  if (r.after_nl) return r.after_nl;
  return r.single ? r.end : r.last;
}

// ---------------------------------------------------------------------------------------------
// o200k_base:
//   P?U*W+C? | P?U+W*C? | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}],
// C = (?i:'s|'t|'re|'ve|'m|'ll|'d). U and W overlap in Lm, Lo and M; P contains M.
//
// Here backtracking matters. For a start s (after P, or at i itself when P is not taken):
//   alt1(s): U* takes the run of U from s to u; W+ must then match at least one W. U* gives back
//     one character at a time, so W+ starts at the largest position p in [s, u] holding a W:
//       p == u (the character after the U run is W, i.e. Ll): W+ takes the run of W from u;
//       p <  u (the last Lm/Lo/M inside the U run): W+ takes exactly that one character, since
//              everything after it up to u is Lu/Lt and u itself is not W.
//     No W anywhere: alt1 fails. Then C? greedily.
//   alt2(s): needs s to be U; U+ takes the run of U to u, W* the run of W from u, then C?.
// P? is greedy: P taken is tried first, then P dropped. Dropping it can only matter when i is a
// mark (P's only overlap with U and W). Order: alt1(P taken), alt1(P dropped), alt2(P taken),
// alt2(P dropped). E.g. "中A." gives "中", "A", "." and "\u0301AB" gives "\u0301", "AB".
// Then N{1,3}; then optional U+0020, a run of O, a run of [\r\n/]; whitespace as in Llama 3.
// A U run is scanned at most four times per piece, and a piece that stops inside a U run leaves
// only Lu/Lt characters after it, which the next piece takes whole.
size_t o200k_alt1(const Scanner& sc, size_t s) {
  size_t pos = s;
  size_t last_w_end = 0;  // end of the last W character inside the U run, 0 if none
  for (;;) {
    const Ch c = sc.at(pos);
    if (!(c.f & kUpperish)) {
      size_t e;
      if (c.f & kLowerish) {
        e = sc.run_any(pos + c.len, kLowerish);
      } else if (last_w_end) {
        e = last_w_end;
      } else {
        return 0;
      }
      return e + sc.optional_contraction(e);
    }
    pos += c.len;
    if (c.f & kLowerish) last_w_end = pos;
  }
}

size_t o200k_alt2(const Scanner& sc, size_t s) {
  const Ch c = sc.at(s);
  if (!(c.f & kUpperish)) return 0;
  const size_t e = sc.run_any(sc.run_any(s + c.len, kUpperish), kLowerish);
  return e + sc.optional_contraction(e);
}

constexpr bool ascii_cases_are_plain() {
  for (int b = 0; b < 128; ++b) {
    const bool up = b >= 'A' && b <= 'Z', low = b >= 'a' && b <= 'z';
    if (((unicode::kAsciiFlags[b] & kUpperish) != 0) != up) return false;
    if (((unicode::kAsciiFlags[b] & kLowerish) != 0) != low) return false;
  }
  return true;
}
static_assert(ascii_cases_are_plain(), "o200k_ascii_word assumes U = [A-Z], W = [a-z] in ASCII");

// Fast path for the common all-ASCII word: optional ASCII P, [A-Z]*, [a-z]+, then an ASCII byte
// (or the end). In ASCII U = [A-Z] and W = [a-z] do not overlap and no mark can precede, so this
// is alt1 with P taken (or not needed); a non-ASCII byte anywhere hands over to the general path.
size_t o200k_ascii_word(const uint8_t* s, size_t n, size_t i) {
  auto upper = [](uint8_t b) { return static_cast<uint8_t>(b - 'A') < 26; };
  auto lower = [](uint8_t b) { return static_cast<uint8_t>(b - 'a') < 26; };
  if (i >= n) return 0;
  size_t pos = i;
  const uint8_t b0 = s[pos];
  if (!upper(b0) && !lower(b0)) {
    if (b0 >= 0x80 || b0 == '\r' || b0 == '\n' || (unicode::kAsciiFlags[b0] & kNumber)) return 0;
    ++pos;  // P
  }
  if (pos < n && !lower(s[pos])) pos = ascii_run(s, n, pos, 'A', 'Z', /*fold=*/false);  // most words: no U run
  if (pos >= n || !lower(s[pos])) return 0;
  pos = ascii_run(s, n, pos + 1, 'a', 'z', /*fold=*/false);
  if (pos < n && s[pos] >= 0x80) return 0;
  return pos;
}

size_t end_o200k(const Scanner& sc, size_t i) {
  if (const size_t e = o200k_ascii_word(sc.data(), sc.size(), i)) return e + sc.optional_contraction(e);
  // ASCII O not followed by a letter (",", ". ", "\"\n"): neither letter alternative can match
  // (with P taken they need U or W next; i is no letter or mark to drop P for), and i is no N, so
  // it is the O-run alternative, without the Unicode lookups of the general path below.
  const uint8_t b0 = sc.data()[i];
  if (b0 < 0x80 && !(unicode::kAsciiFlags[b0] & (kLetter | kNumber | kSpace))) {
    const uint8_t b1 = i + 1 < sc.size() ? sc.data()[i + 1] : 0;
    if (b1 < 0x80 && !(unicode::kAsciiFlags[b1] & kLetter)) return sc.run_bytes(sc.run_o(i), /*slash=*/true);
  }
  const Ch c0 = sc.at(i);
  const bool p = is_p(c0);
  const bool letter_or_mark = c0.f & (kUpperish | kLowerish);
  if (p || letter_or_mark) {
    size_t e;
    if (p && (e = o200k_alt1(sc, i + c0.len))) return e;
    if (letter_or_mark && (e = o200k_alt1(sc, i))) return e;
    if (p && (e = o200k_alt2(sc, i + c0.len))) return e;
    if (letter_or_mark && (e = o200k_alt2(sc, i))) return e;
  }
  if (c0.f & kNumber) return sc.digits3(i);
  size_t start = i;
  Ch c = c0;
  if (c0.cp == ' ') {
    start = i + 1;
    c = sc.at(start);
  }
  if (is_o(c)) return sc.run_bytes(sc.run_o(start), /*slash=*/true);
  const Scanner::SpaceRun r = sc.space_run(i);
  if (r.after_nl) return r.after_nl;
  if (r.end == sc.size() || r.single) return r.end;
  return r.last;
}

template <size_t (*End)(const Scanner&, size_t)>
void split_with(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>& out) {
  // Pieces go to a small local buffer first: appending them one by one to `out` costs more than
  // the scan itself on English text.
  constexpr size_t kChunk = 256;
  std::pair<uint32_t, uint32_t> buf[kChunk];
  const Scanner sc(text);
  size_t pos = 0, k = 0;
  while (pos < text.size()) {
    const size_t end = End(sc, pos);
    buf[k++] = {static_cast<uint32_t>(pos), static_cast<uint32_t>(end)};
    if (k == kChunk) {
      out.insert(out.end(), buf, buf + k);
      k = 0;
    }
    pos = end;
  }
  out.insert(out.end(), buf, buf + k);
}

}  // namespace

size_t piece_end(SplitPattern pattern, std::string_view text, size_t pos) {
  const Scanner sc(text);
  switch (pattern) {
    case SplitPattern::kR50k: return end_r50k(sc, pos);
    case SplitPattern::kCl100k: return end_cl100k_like<false>(sc, pos);
    case SplitPattern::kLlama3: return end_cl100k_like<true>(sc, pos);
    case SplitPattern::kO200k: return end_o200k(sc, pos);
    case SplitPattern::kNone: break;
  }
  return text.size();
}

// Qwen2 differs from Llama 3 only in the digit alternative, which comes after the contraction and
// letter alternatives; neither of those can start at a \p{N} character (it is not ' and not in
// [^\r\n\p{L}\p{N}] or \p{L}), so a number takes exactly one character and anything else is
// Llama 3's piece.
size_t piece_end_qwen2(std::string_view text, size_t pos) {
  const Scanner sc(text);
  const Ch c0 = sc.at(pos);
  if (c0.f & kNumber) return pos + c0.len;
  return end_cl100k_like<true>(sc, pos);
}

void split_pieces(SplitPattern pattern, std::string_view text,
                  std::vector<std::pair<uint32_t, uint32_t>>& out) {
  switch (pattern) {
    case SplitPattern::kR50k: return split_with<end_r50k>(text, out);
    case SplitPattern::kCl100k: return split_with<end_cl100k_like<false>>(text, out);
    case SplitPattern::kLlama3: return split_with<end_cl100k_like<true>>(text, out);
    case SplitPattern::kO200k: return split_with<end_o200k>(text, out);
    case SplitPattern::kNone:
      if (!text.empty()) out.emplace_back(0, static_cast<uint32_t>(text.size()));
      return;
  }
}

}  // namespace crayon
