// Oniguruma-compatible regex engine: parser, compiler and backtracking VM.
//
// Why a backtracking VM and not a DFA or Pike VM: Oniguruma's result for a pattern is defined by
// the order in which a backtracker tries alternatives (leftmost-first, not leftmost-longest), by
// possessive and atomic constructs, and by its empty-loop check (an iteration of a loop body that
// consumed nothing ends the loop). A Pike VM reproduces the first but not the empty-loop rule; a
// backtracker reproduces all of them directly. What a plain backtracker lacks is a bound, so:
//
// * Memoization. Without backreferences and captures, whether the VM state (pc, pos) leads to a
//   match does not depend on how it was reached, with one exception: inside the body of a loop that
//   can match empty, the empty-loop check compares pos with the position where the iteration
//   started. Since positions only grow inside an iteration, only "did the iteration start here?"
//   matters, and for nested such loops those answers are monotone (if an outer iteration started at
//   pos, so did every inner one). The state is therefore (pc, pos, j) with j = how many of the
//   enclosing nullable loops started their current iteration at pos. Memoizing (pc, pos, j) at
//   branch points (splits and greedy runs) bounds a search by O(slots x text).
// * Memoization costs a hash probe per branch, which ordinary patterns never need. So each start
//   position first runs without it, counting steps; if the count exceeds a bound linear in
//   (program size x bytes scanned), the attempt is discarded and re-run with memoization, which
//   gives the same answer (memoization only prunes states that cannot match).
// * Lookaround and atomic bodies run as sub-searches (first success wins, no backtracking into
//   them: Oniguruma's semantics); a sub-search that succeeded leaves states marked that did not
//   fail, so each sub-search gets a memo of its own.
// * Single-character runs (\p{L}+, \s*, [^\s\p{L}\p{N}]++, \p{N}{1,3}) are one instruction that
//   scans forward and, when greedy, gives characters back one at a time from a single stack entry.
//   Most of the time goes there; an ASCII table makes the common case one load per byte.
//
// Oniguruma dialect (Ruby syntax, ONIG_OPTION_NONE), each probed against tokenizers 0.23.3:
//   `$` end of text or before any "\n";  `^` start, or after a "\n" that is not the last byte;
//   `\Z` end or before a final "\n";  `.` anything but "\n";  `(?m)` makes `.` match "\n";
//   `\h` hex digit;  `\v` U+000B;  `X{n,m}+` = (?:X{n,m})+ and `X{n}?` = (?:X{n})? (not
//   possessive/lazy); `X{n,m}?` lazy; `{` that does not start a valid interval is a literal;
//   `a(?i)b|c` = a(?i:b|c) (an inline option swallows the rest of the group, alternatives too);
//   (?i) folds literals and bracket classes (closure over simple case folding orbits, then
//   negation) but not \p{..}/\w/\s escapes outside brackets; lookbehind may have variable but
//   bounded length.
//
// fancy-regex dialect (RegexDialect::kFancyRegex, tiktoken 0.14 = fancy-regex 0.19 over regex 1.x),
// each probed against tiktoken (tests/test_tiktoken_regex_dialect.py). fancy-regex parses the
// pattern itself; a pattern without lookaround/atomic/possessive parts runs on Rust's regex crate
// (leftmost-first, which equals a backtracker's first match as long as no loop body can match
// empty), otherwise on fancy-regex's backtracking VM, which delegates only sub-expressions whose
// span cannot change under backtracking. So the same VM serves, with a different parser:
//   `^` `\A` start of text, `$` `\z` end of text (no multi-line); `X{n,m}+ X?+ X*+ X++` possessive,
//   `X{n}?` lazy, a second quantifier is an error; `{,m}` is {0,m}; `\w` = Alphabetic|M|Nd|Pc|
//   Join_Control (Oniguruma's bracketed [\w] plus U+200C/U+200D), `\b` on that set; `\s` `\d` and
//   \p{gc} as in Oniguruma (probed equal over every code point); `(?i)` = simple case folding of
//   literals and bracket classes, no multi-character folds; `\xHH` is U+00HH.
//   Refused: anything below whose meaning differs or was not probed (docs/regex.md "Dialects").
#include "text/regex.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "text/deepseek_split.h"
#include "text/pretokenize.h"
#include "tables/regex_tables.h"
#include "core/utf8.h"

namespace crayon {

namespace rt = regex_tables;

namespace {

constexpr size_t kMaxPatternBytes = 64 * 1024;
constexpr size_t kMaxInstructions = 200000;
constexpr int kMaxRepeat = 100000;
// Minimum match lengths saturate here (Analysis::length).
constexpr long kLengthCap = 1L << 40;
// Oniguruma expands a fixed count into copies of its body and refuses the pattern ("too big number
// for repeat range") when the compiled size overflows an int: x{55380}{77590} and a{100000}{100000}
// fail while a{1000}{1000} loads. Reproducing its size arithmetic exactly is not worth it; a
// pattern whose shortest match is longer than this is refused instead, so that tokenizers runs it
// and gives its own answer (the error, or a result), which is always exact.
constexpr long kMaxMinMatchChars = 1L << 26;
constexpr uint32_t kMaxLookbehindChars = 255;
constexpr size_t kNoMatch = static_cast<size_t>(-1);
constexpr size_t kBudgetExceeded = static_cast<size_t>(-2);

// ------------------------------------------------------------------------------------------------
// Text helpers.

inline utf8::Decoded decode_at(const uint8_t* s, size_t n, size_t pos) {
  const uint8_t b = s[pos];
  if (b < 0x80) return {b, 1};
  return utf8::decode(s + pos, s + n);
}

// The start of the character that ends at `pos`, as forward decoding from any earlier boundary
// `lo` would find it: a well-formed sequence of k bytes ending at pos starts with a lead byte,
// which no earlier sequence can cover, so it is always a boundary; otherwise one byte.
inline size_t prev_boundary(const uint8_t* s, size_t n, size_t lo, size_t pos) {
  for (size_t k = 2; k <= 4; ++k) {
    if (pos < lo + k) break;
    const utf8::Decoded d = utf8::decode(s + pos - k, s + n);
    if (d.cp != utf8::kInvalid && d.len == k) return pos - k;
  }
  return pos - 1;
}

inline uint16_t props_of(uint32_t cp) { return cp == utf8::kInvalid ? 0 : rt::props(cp); }

// ------------------------------------------------------------------------------------------------
// Case folding (compile time only).

// The simple case folding orbit of cp (cp itself included), from the generated cycle table.
void fold_orbit(uint32_t cp, std::vector<uint32_t>& out) {
  out.clear();
  out.push_back(cp);
  const rt::FoldLink* b = std::begin(rt::kFoldNext);
  const rt::FoldLink* e = std::end(rt::kFoldNext);
  uint32_t cur = cp;
  for (int guard = 0; guard < 16; ++guard) {
    const rt::FoldLink* it = std::lower_bound(b, e, cur, [](const rt::FoldLink& l, uint32_t v) { return l.cp < v; });
    if (it == e || it->cp != cur || it->next == cp) break;
    cur = it->next;
    out.push_back(cur);
  }
}

bool has_multi_fold(uint32_t cp) {
  return std::binary_search(std::begin(rt::kMultiFold), std::end(rt::kMultiFold), cp);
}

// The representative (smallest member) of cp's orbit, used to compare folded characters.
uint32_t fold_key(uint32_t cp) {
  std::vector<uint32_t> o;
  fold_orbit(cp, o);
  return *std::min_element(o.begin(), o.end());
}

bool is_multi_fold_prefix(uint32_t a, uint32_t b) {
  // kMultiFoldPairs holds folded (lower-case) characters; compare by orbit.
  const uint32_t ka = fold_key(a), kb = fold_key(b);
  for (const auto& p : rt::kMultiFoldPairs) {
    if (fold_key(p[0]) == ka && fold_key(p[1]) == kb) return true;
  }
  return false;
}

// ------------------------------------------------------------------------------------------------
// Character classes.

struct ClassItem {
  enum Kind : uint8_t { kCategories, kFlag, kScript, kAny, kSub };
  Kind kind;
  bool negate;
  uint32_t value;  // category bit mask, flag bit, script index, or sub-class index
};

struct CharClass {
  bool negated = false;
  bool icase = false;  // (?i) bracket class: matches c when any member of c's orbit is a member
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // sorted, disjoint, merged
  std::vector<ClassItem> items;
  uint64_t ascii[2] = {0, 0};  // final answer (negation and folding applied) for cp < 128
};

using Classes = std::vector<CharClass>;

bool class_base(const Classes& cs, const CharClass& c, uint32_t cp);

bool in_ranges(const CharClass& c, uint32_t cp) {
  auto it = std::upper_bound(c.ranges.begin(), c.ranges.end(), cp,
                             [](uint32_t v, const std::pair<uint32_t, uint32_t>& r) { return v < r.first; });
  return it != c.ranges.begin() && cp <= std::prev(it)->second;
}

// Membership before negation and folding.
bool class_positive(const Classes& cs, const CharClass& c, uint32_t cp) {
  if (in_ranges(c, cp)) return true;
  if (c.items.empty()) return false;
  const uint16_t p = props_of(cp);
  for (const ClassItem& it : c.items) {
    bool m = false;
    switch (it.kind) {
      case ClassItem::kCategories: m = (it.value >> (p & rt::kCategoryMask)) & 1u; break;
      case ClassItem::kFlag: m = (p & it.value) != 0; break;
      case ClassItem::kScript: m = cp != utf8::kInvalid && rt::script(cp) == it.value; break;
      case ClassItem::kAny: m = true; break;
      case ClassItem::kSub: m = class_base(cs, cs[it.value], cp); break;
    }
    if (m != it.negate) return true;
  }
  return false;
}

// Membership with folding and negation, without the ASCII cache.
bool class_base(const Classes& cs, const CharClass& c, uint32_t cp) {
  bool in = class_positive(cs, c, cp);
  if (!in && c.icase && cp != utf8::kInvalid) {
    std::vector<uint32_t> orbit;
    fold_orbit(cp, orbit);
    for (size_t i = 1; i < orbit.size() && !in; ++i) in = class_positive(cs, c, orbit[i]);
  }
  return in != c.negated;
}

inline bool class_has(const Classes& cs, const CharClass& c, uint32_t cp) {
  if (cp < 128) return (c.ascii[cp >> 6] >> (cp & 63)) & 1u;
  return class_base(cs, c, cp);
}

void finalize_class(const Classes& cs, CharClass& c) {
  std::sort(c.ranges.begin(), c.ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : c.ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  c.ranges.swap(merged);
  c.ascii[0] = c.ascii[1] = 0;
  for (uint32_t cp = 0; cp < 128; ++cp) {
    if (class_base(cs, c, cp)) c.ascii[cp >> 6] |= uint64_t{1} << (cp & 63);
  }
}

// ------------------------------------------------------------------------------------------------
// AST.

enum class Assert : uint8_t { kBol, kEol, kBot, kEot, kEotNl, kWordB, kNotWordB, kRustWordB, kRustNotWordB };

// Rust's Unicode \w (regex crate): Oniguruma's bracketed [\w] plus the two Join_Control characters.
inline bool is_rust_word(uint32_t cp) {
  return cp == 0x200C || cp == 0x200D || (props_of(cp) & rt::kWordInClass) != 0;
}

struct Node {
  enum Kind : uint8_t { kEmpty, kChar, kClass, kConcat, kAlt, kRepeat, kAtomic, kLook, kAssert };
  Kind kind = kEmpty;
  bool greedy = true, possessive = false;
  bool behind = false, negate = false;  // kLook
  Assert assert_kind = Assert::kBol;
  uint32_t cp = 0;   // kChar
  int cls = -1;      // kClass
  int min = 0, max = -1;  // kRepeat (-1 = unbounded)
  std::vector<int> kids;
};

struct Flags {
  bool icase = false;
  bool dotall = false;
};

// ------------------------------------------------------------------------------------------------
// Parser: recursive descent over the pattern bytes, depth bounded by kMaxNesting.

class Parser {
 public:
  Parser(std::string_view p, RegexDialect dialect, std::vector<Node>& nodes, Classes& classes)
      : p_(p), fancy_(dialect == RegexDialect::kFancyRegex), nodes_(nodes), classes_(classes) {}

  int parse() {
    const int root = parse_alt(Flags{}, 0);
    if (i_ < p_.size()) fail("unmatched close parenthesis");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(what, i_); }
  [[noreturn]] void fail_at(const std::string& what, size_t at) const {
    throw RegexError("regex: " + what + " at byte " + std::to_string(at) + " of pattern");
  }
  [[noreturn]] void unsupported(const std::string& what, size_t at) const {
    fail_at("unsupported construct " + what + (fancy_ ? " (crayon's engine refuses it in the fancy-regex dialect; use tiktoken)"
                                                       : " (crayon's engine refuses it; use tokenizers)"), at);
  }

  bool eof() const { return i_ >= p_.size(); }
  char peek(size_t k = 0) const { return i_ + k < p_.size() ? p_[i_ + k] : '\0'; }

  uint32_t next_cp() {
    const auto* s = reinterpret_cast<const uint8_t*>(p_.data());
    const utf8::Decoded d = utf8::decode(s + i_, s + p_.size());
    if (d.cp == utf8::kInvalid) fail("invalid UTF-8 in pattern");
    i_ += d.len;
    return d.cp;
  }

  int add(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }
  int add_class(CharClass c) {
    classes_.push_back(std::move(c));
    finalize_class(classes_, classes_.back());
    return static_cast<int>(classes_.size()) - 1;
  }

  int literal(uint32_t cp, const Flags& f, size_t at) {
    if (f.icase) {
      // Rust's regex folds by simple case folding only, so multi-character folds do not matter.
      if (!fancy_ && has_multi_fold(cp)) unsupported("case-insensitive character with a multi-character folding", at);
      std::vector<uint32_t> orbit;
      fold_orbit(cp, orbit);
      for (uint32_t m : orbit) {
        if (!fancy_ && has_multi_fold(m)) unsupported("case-insensitive character with a multi-character folding", at);
      }
      if (orbit.size() > 1) {
        CharClass c;
        for (uint32_t m : orbit) c.ranges.push_back({m, m});
        Node n;
        n.kind = Node::kClass;
        n.cls = add_class(std::move(c));
        n.cp = cp;  // remembered for the multi-fold pair check
        return add(std::move(n));
      }
    }
    Node n;
    n.kind = Node::kChar;
    n.cp = cp;
    return add(std::move(n));
  }

  int class_node(CharClass c) {
    Node n;
    n.kind = Node::kClass;
    n.cls = add_class(std::move(c));
    n.cp = utf8::kInvalid;
    return add(std::move(n));
  }

  int parse_alt(Flags f, int depth) {
    if (depth > Regex::kMaxNesting) fail("groups nested too deeply");
    std::vector<int> alts;
    alts.push_back(parse_concat(f, depth));
    while (peek() == '|') {
      ++i_;
      alts.push_back(parse_concat(f, depth));
    }
    if (alts.size() == 1) return alts[0];
    Node n;
    n.kind = Node::kAlt;
    n.kids = std::move(alts);
    return add(std::move(n));
  }

  int parse_concat(Flags f, int depth) {
    std::vector<int> items;
    while (!eof() && peek() != '|' && peek() != ')') {
      // An inline option group "(?i)" applies to the rest of the enclosing group, alternatives
      // included: Oniguruma parses a(?i)b|c as a(?i:b|c).
      if (peek() == '(' && peek(1) == '?') {
        Flags nf = f;
        size_t j = i_ + 2;
        if (parse_option_letters(j, nf) && j < p_.size() && p_[j] == ')') {
          // fancy-regex keeps a bare flag group's flags past the enclosing group and does not
          // swallow the alternatives; both readings agree only at the very start of the pattern.
          if (fancy_ && i_ != 0) unsupported("flag group (?flags) not at the start of the pattern", i_);
          i_ = j + 1;
          items.push_back(parse_alt(nf, depth + 1));
          break;
        }
      }
      int atom = parse_atom(f, depth);
      if (atom < 0) continue;  // comment
      atom = parse_quantifiers(atom);
      items.push_back(atom);
    }
    if (f.icase && !fancy_) check_multi_fold_pairs(items);
    if (items.empty()) return add(Node{});
    if (items.size() == 1) return items[0];
    Node n;
    n.kind = Node::kConcat;
    n.kids = std::move(items);
    return add(std::move(n));
  }

  // Parses option letters [im]*(-[im]*)? from j; false if something else follows "(?".
  bool parse_option_letters(size_t& j, Flags& f) const {
    bool on = true, any = false;
    while (j < p_.size()) {
      const char c = p_[j];
      if (c == 'i') {
        f.icase = on;
      } else if (c == 'P' && fancy_) {
        break;  // (?P<name>...) or (?P=name): not an option group, parse_group decides
      } else if (c == 'm' && fancy_) {
        unsupported("group option (?m) (multi-line in fancy-regex)", j);
      } else if (c == 'm') {
        f.dotall = on;  // Ruby's (?m) is "dot matches newline"
      } else if (c == '-' && on) {
        on = false;
      } else if (c == 'x' || c == 's' || c == 'a' || c == 'u' || c == 'd' || c == 'l' || c == 'W' ||
                 c == 'D' || c == 'S' || c == 'P' || c == 'y' || c == 'I' || c == 'L') {
        unsupported(std::string("group option (?") + c + ")", j);
      } else {
        break;
      }
      any = true;
      ++j;
    }
    if (fancy_ && any && !on && p_[j - 1] == '-') unsupported("group option (?-) without a flag", j);
    return any;
  }

  // (?i) literals are matched as strings in Oniguruma, which lets a pair such as "ss" or "st" match
  // one character (ß, ﬆ). The engine does not do that, so it refuses such pairs, looking through
  // groups, alternatives, quantifiers and zero-width items conservatively.
  void check_multi_fold_pairs(const std::vector<int>& items) const {
    for (size_t k = 0; k < items.size(); ++k) {
      std::vector<uint32_t> last;
      edge_literals(items[k], /*first=*/false, last);
      if (last.empty()) continue;
      for (size_t m = k + 1; m < items.size(); ++m) {
        std::vector<uint32_t> first;
        edge_literals(items[m], /*first=*/true, first);
        for (uint32_t a : last) {
          for (uint32_t b : first) {
            if (is_multi_fold_prefix(a, b)) {
              unsupported("case-insensitive literal pair that folds like a multi-character folding", i_);
            }
          }
        }
        if (!zero_width_or_empty(items[m])) break;
      }
    }
  }
  bool zero_width_or_empty(int id) const {
    const Node& n = nodes_[id];
    if (n.kind == Node::kEmpty || n.kind == Node::kAssert || n.kind == Node::kLook) return true;
    if (n.kind == Node::kRepeat) return n.max == 0 || zero_width_or_empty(n.kids[0]);
    if (n.kind == Node::kConcat) {
      for (int k : n.kids) if (!zero_width_or_empty(k)) return false;
      return true;
    }
    return false;
  }
  // Literal characters that can stand at the first (or last) edge of a node.
  void edge_literals(int id, bool first, std::vector<uint32_t>& out) const {
    const Node& n = nodes_[id];
    switch (n.kind) {
      case Node::kChar: out.push_back(n.cp); return;
      case Node::kClass:
        if (n.cp != utf8::kInvalid) out.push_back(n.cp);
        return;
      case Node::kAlt: for (int k : n.kids) edge_literals(k, first, out); return;
      case Node::kRepeat: case Node::kAtomic: edge_literals(n.kids[0], first, out); return;
      case Node::kConcat: {
        const size_t cnt = n.kids.size();
        for (size_t k = 0; k < cnt; ++k) {
          const int kid = n.kids[first ? k : cnt - 1 - k];
          edge_literals(kid, first, out);
          if (!zero_width_or_empty(kid) && !(nodes_[kid].kind == Node::kRepeat && nodes_[kid].min == 0)) return;
        }
        return;
      }
      default: return;
    }
  }

  // Reads one quantifier token at i_: ? * + {n} {n,} {,m} {n,m}. Returns false if none.
  struct Quant {
    int min, max;
    bool interval, exact;
  };
  bool read_quant(Quant& q) {
    const char c = peek();
    if (c == '?') { ++i_; q = {0, 1, false, false}; return true; }
    if (c == '*') { ++i_; q = {0, -1, false, false}; return true; }
    if (c == '+') { ++i_; q = {1, -1, false, false}; return true; }
    if (c != '{') return false;
    // A "{" that does not start a valid interval is a literal character (probed: "a{", "a{,}").
    size_t j = i_ + 1;
    auto number = [&](int& v) {
      const size_t s = j;
      long long x = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        x = x * 10 + (p_[j] - '0');
        if (x > kMaxRepeat) unsupported("repeat count above 100000", s);
        ++j;
      }
      v = static_cast<int>(x);
      return j > s;
    };
    int lo = 0, hi = 0;
    const bool has_lo = number(lo);
    if (j < p_.size() && p_[j] == '}') {
      if (!has_lo) return false;
      i_ = j + 1;
      q = {lo, lo, true, true};
      return true;
    }
    if (j >= p_.size() || p_[j] != ',') return false;
    ++j;
    const bool has_hi = number(hi);
    if (j >= p_.size() || p_[j] != '}') return false;
    if (!has_lo && !has_hi) {
      if (fancy_) unsupported("interval {,} (fancy-regex reads it as {0,})", i_);
      return false;
    }
    if (has_hi && has_lo && hi < lo) unsupported("interval {n,m} with n > m", i_);
    i_ = j + 1;
    q = {has_lo ? lo : 0, has_hi ? hi : -1, true, false};
    return true;
  }

  // fancy-regex: one quantifier, then an optional `?` (lazy) and an optional `+` (possessive, for
  // intervals too); another quantifier right after it is an error there.
  int parse_quantifier_fancy(int atom) {
    const size_t qat = i_;
    Quant q;
    if (!read_quant(q)) return atom;
    const Node::Kind k = nodes_[atom].kind;
    if (k == Node::kAssert || k == Node::kLook) unsupported("quantified assertion", qat);
    Node n;
    n.kind = Node::kRepeat;
    n.min = q.min;
    n.max = q.max;
    n.kids = {atom};
    if (peek() == '?') {
      ++i_;
      n.greedy = false;
    }
    if (peek() == '+') {
      if (!n.greedy) unsupported("lazy possessive quantifier", i_);
      ++i_;
      n.possessive = true;
    }
    const size_t next = i_;
    Quant again;
    if (peek() == '?' || peek() == '*' || peek() == '+' || (peek() == '{' && read_quant(again))) {
      unsupported("quantifier after a quantifier", next);
    }
    i_ = next;
    return add(std::move(n));
  }

  int parse_quantifiers(int atom) {
    if (fancy_) return parse_quantifier_fancy(atom);
    bool stackable = true;  // a quantifier may follow: only after an interval (probed as nesting)
    for (;;) {
      const size_t qat = i_;
      Quant q;
      if (!read_quant(q)) return atom;
      if (!stackable) unsupported("nested quantifier", qat);
      const Node::Kind k = nodes_[atom].kind;
      if (k == Node::kAssert || (k == Node::kLook)) unsupported("quantified assertion", qat);
      Node n;
      n.kind = Node::kRepeat;
      n.min = q.min;
      n.max = q.max;
      n.kids = {atom};
      if (!q.interval) {
        if (peek() == '?') {
          ++i_;
          n.greedy = false;
        } else if (peek() == '+') {
          ++i_;
          n.possessive = true;
        }
        stackable = false;
      } else if (!q.exact && peek() == '?') {
        ++i_;  // {n,m}? {n,}? {,m}? are lazy; {n}? is (?:X{n})? (Ruby syntax), read next round
        n.greedy = false;
        stackable = false;
      } else {
        stackable = true;  // X{n,m}+ is (?:X{n,m})+ in Ruby syntax: the next round reads it
      }
      atom = add(std::move(n));
    }
  }

  // Returns the atom's node, or -1 for a comment group.
  int parse_atom(Flags f, int depth) {
    const size_t at = i_;
    const char c = peek();
    switch (c) {
      case '(': return parse_group(f, depth);
      case '[': {
        CharClass cc = parse_class(f, depth);
        return class_node(std::move(cc));
      }
      case '.': {
        ++i_;
        CharClass cc;
        if (f.dotall) {
          cc.items.push_back({ClassItem::kAny, false, 0});
        } else {
          cc.negated = true;
          cc.ranges.push_back({'\n', '\n'});
        }
        return class_node(std::move(cc));
      }
      case '^': ++i_; return assert_node(fancy_ ? Assert::kBot : Assert::kBol);
      case '$': ++i_; return assert_node(fancy_ ? Assert::kEot : Assert::kEol);
      case '\\': return parse_escape(f);
      case '*': case '+': case '?':
        fail("target of repeat operator is not specified");
      case '{': {
        Quant q;
        const size_t save = i_;
        if (read_quant(q)) fail_at("target of repeat operator is not specified", save);
        i_ = save + 1;
        return literal('{', f, at);
      }
      default: break;
    }
    const uint32_t cp = next_cp();
    return literal(cp, f, at);
  }

  int assert_node(Assert a) {
    Node n;
    n.kind = Node::kAssert;
    n.assert_kind = a;
    return add(std::move(n));
  }

  int parse_group(Flags f, int depth) {
    const size_t at = i_;
    ++i_;  // (
    if (depth + 1 > Regex::kMaxNesting) fail("groups nested too deeply");
    if (peek() == '*') unsupported("verb (*...)", at);
    Node n;
    if (peek() != '?') {
      const int body = parse_alt(f, depth + 1);
      expect_close(at);
      return body;  // captures do not matter without backreferences
    }
    ++i_;  // ?
    const char c = peek();
    if (c == ':') {
      ++i_;
      const int body = parse_alt(f, depth + 1);
      expect_close(at);
      return body;
    }
    if (c == '#') {
      if (fancy_) unsupported("comment group (?#...)", at);
      while (!eof() && peek() != ')') ++i_;
      if (eof()) fail_at("end pattern in group", at);
      ++i_;
      return -1;
    }
    if (c == '=' || c == '!') {
      ++i_;
      n.kind = Node::kLook;
      n.negate = c == '!';
    } else if (c == '<' && (peek(1) == '=' || peek(1) == '!')) {
      n.kind = Node::kLook;
      n.behind = true;
      n.negate = peek(1) == '!';
      i_ += 2;
    } else if (c == '>') {
      ++i_;
      n.kind = Node::kAtomic;
    } else if (c == '<' || c == '\'' || (c == 'P' && peek(1) == '<')) {
      // Named group: like a plain group here (names only matter to backreferences).
      if (c == 'P') ++i_;
      const char close = peek() == '<' ? '>' : '\'';
      ++i_;
      const size_t s = i_;
      while (!eof() && peek() != close) {
        const char ch = peek();
        if (!(ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              static_cast<unsigned char>(ch) >= 0x80)) {
          unsupported("group name", i_);
        }
        ++i_;
      }
      if (eof() || i_ == s) unsupported("group name", s);
      if (fancy_ && p_[s] >= '0' && p_[s] <= '9') unsupported("group name starting with a digit", s);
      ++i_;
      const int body = parse_alt(f, depth + 1);
      expect_close(at);
      return body;
    } else {
      Flags nf = f;
      size_t j = i_;
      if (parse_option_letters(j, nf) && j < p_.size() && p_[j] == ':') {
        i_ = j + 1;
        const int body = parse_alt(nf, depth + 1);
        expect_close(at);
        return body;
      }
      unsupported(std::string("group (?") + (c ? std::string(1, c) : std::string()) + "...)", at);
    }
    const int body = parse_alt(f, depth + 1);
    expect_close(at);
    n.kids = {body};
    return add(std::move(n));
  }

  void expect_close(size_t open_at) {
    if (peek() != ')') fail_at("end pattern with unmatched parenthesis", open_at);
    ++i_;
  }

  // Escapes valid both inside and outside brackets that denote one code point. Returns false if
  // the escape at i_ (after the backslash) is not a code point escape.
  bool code_point_escape(uint32_t& cp, bool in_class) {
    const size_t at = i_ - 1;
    const char c = peek();
    auto hex = [](char h) -> int {
      if (h >= '0' && h <= '9') return h - '0';
      if (h >= 'a' && h <= 'f') return h - 'a' + 10;
      if (h >= 'A' && h <= 'F') return h - 'A' + 10;
      return -1;
    };
    switch (c) {
      case 't': cp = '\t'; break;
      case 'n': cp = '\n'; break;
      case 'r': cp = '\r'; break;
      case 'f': cp = '\f'; break;
      case 'v': cp = 0x0B; break;
      case 'a': cp = 0x07; break;
      case 'e': cp = 0x1B; break;
      case 'b':
        if (!in_class) return false;
        cp = 0x08;
        break;
      case '0': {
        if (fancy_) unsupported("escape \\0 (a backreference in fancy-regex)", at);
        ++i_;
        uint32_t v = 0;
        for (int k = 0; k < 2 && peek() >= '0' && peek() <= '7'; ++k) v = v * 8 + (peek() - '0'), ++i_;
        cp = v;
        return true;
      }
      case 'x': {
        ++i_;
        if (peek() == '{') {
          ++i_;
          uint32_t v = 0;
          int digits = 0;
          while (hex(peek()) >= 0) {
            v = v * 16 + hex(peek());
            ++i_;
            if (++digits > 8) unsupported("\\x{...} code point", at);
          }
          if (digits == 0 || peek() != '}') unsupported("\\x{...} code point", at);
          ++i_;
          if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) unsupported("\\x{...} code point", at);
          cp = v;
          return true;
        }
        uint32_t v = 0;
        int digits = 0;
        while (digits < 2 && hex(peek()) >= 0) v = v * 16 + hex(peek()), ++i_, ++digits;
        if (digits == 0) unsupported("\\x without hex digits", at);
        if (fancy_) {
          if (digits != 2) unsupported("\\x with one hex digit", at);
          cp = v;  // U+00HH
          return true;
        }
        if (v >= 0x80) unsupported("\\xHH above 7F (a raw byte in Oniguruma)", at);
        cp = v;
        return true;
      }
      case 'u': {
        ++i_;
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
          if (hex(peek()) < 0) unsupported("\\u without four hex digits", at);
          v = v * 16 + hex(peek());
          ++i_;
        }
        if (v >= 0xD800 && v <= 0xDFFF) unsupported("\\u surrogate", at);
        cp = v;
        return true;
      }
      default: return false;
    }
    ++i_;
    return true;
  }

  // Class-like escapes: \d \D \w \W \s \S \h \H \p{..} \P{..}. Appends an item; false if none.
  // Oniguruma's \w differs inside brackets (U+00B2 B3 B9 BC BD BE are word characters only
  // outside), so the caller says where the escape stands.
  bool class_escape(CharClass& into, bool& negated_single, bool in_class) {
    const uint16_t word = in_class ? rt::kWordInClass : rt::kWord;
    const size_t at = i_ - 1;
    const char c = peek();
    negated_single = false;
    if (fancy_) {
      switch (c) {
        case 'w': case 'W':
          ++i_;
          into.items.push_back({ClassItem::kSub, c == 'W', rust_word_class()});
          return true;
        case 'h': case 'H': unsupported(std::string("escape \\") + c, at);
        case 'p': case 'P':
          if (peek(1) == '{' && peek(2) == '^') unsupported("\\p{^...}", at);
          break;
        default: break;
      }
    }
    switch (c) {
      case 'd': case 'D':
        ++i_;
        into.items.push_back({ClassItem::kFlag, c == 'D', rt::kDigit});
        return true;
      case 'w': case 'W':
        ++i_;
        into.items.push_back({ClassItem::kFlag, c == 'W', word});
        return true;
      case 's': case 'S':
        ++i_;
        into.items.push_back({ClassItem::kFlag, c == 'S', rt::kSpace});
        return true;
      case 'h': case 'H': {
        ++i_;
        CharClass hexd;
        hexd.ranges = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
        classes_.push_back(std::move(hexd));
        finalize_class(classes_, classes_.back());
        into.items.push_back({ClassItem::kSub, c == 'H', static_cast<uint32_t>(classes_.size() - 1)});
        return true;
      }
      case 'p': case 'P': {
        ++i_;
        if (peek() != '{') unsupported("\\p without {name}", at);
        ++i_;
        bool neg = c == 'P';
        if (peek() == '^') {
          neg = !neg;
          ++i_;
        }
        std::string name;
        while (!eof() && peek() != '}') {
          const char ch = peek();
          ++i_;
          if (ch == ' ' || ch == '_' || ch == '-') continue;  // Oniguruma ignores these and case
          name.push_back(static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch));
        }
        if (eof()) unsupported("\\p{ without }", at);
        ++i_;
        ClassItem item{};
        if (!property(name, item)) unsupported("property \\p{" + name + "}", at);
        // fancy-regex: only general categories were probed (Rust resolves other names differently).
        if (fancy_ && item.kind != ClassItem::kCategories) unsupported("property \\p{" + name + "}", at);
        if (item.kind == ClassItem::kFlag && item.value == rt::kWord) item.value = word;
        item.negate = neg;
        into.items.push_back(item);
        return true;
      }
      default: return false;
    }
  }

  static bool property(const std::string& name, ClassItem& item) {
    struct Cat { const char* shortn; const char* longn; uint32_t mask; };
    auto bit = [](rt::Category k) { return uint32_t{1} << k; };
    const uint32_t L = bit(rt::kLu) | bit(rt::kLl) | bit(rt::kLt) | bit(rt::kLm) | bit(rt::kLo);
    const uint32_t M = bit(rt::kMn) | bit(rt::kMc) | bit(rt::kMe);
    const uint32_t N = bit(rt::kNd) | bit(rt::kNl) | bit(rt::kNo);
    const uint32_t P = bit(rt::kPc) | bit(rt::kPd) | bit(rt::kPs) | bit(rt::kPe) | bit(rt::kPi) | bit(rt::kPf) | bit(rt::kPo);
    const uint32_t S = bit(rt::kSm) | bit(rt::kSc) | bit(rt::kSk) | bit(rt::kSo);
    const uint32_t Z = bit(rt::kZs) | bit(rt::kZl) | bit(rt::kZp);
    const uint32_t C = bit(rt::kCc) | bit(rt::kCf) | bit(rt::kCs) | bit(rt::kCo) | bit(rt::kCn);
    const Cat cats[] = {
        {"l", "letter", L}, {"lu", "uppercaseletter", bit(rt::kLu)}, {"ll", "lowercaseletter", bit(rt::kLl)},
        {"lt", "titlecaseletter", bit(rt::kLt)}, {"lm", "modifierletter", bit(rt::kLm)},
        {"lo", "otherletter", bit(rt::kLo)}, {"lc", "casedletter", bit(rt::kLu) | bit(rt::kLl) | bit(rt::kLt)},
        {"m", "mark", M}, {"mn", "nonspacingmark", bit(rt::kMn)}, {"mc", "spacingmark", bit(rt::kMc)},
        {"me", "enclosingmark", bit(rt::kMe)}, {"n", "number", N}, {"nd", "decimalnumber", bit(rt::kNd)},
        {"nl", "letternumber", bit(rt::kNl)}, {"no", "othernumber", bit(rt::kNo)},
        {"p", "punctuation", P}, {"pc", "connectorpunctuation", bit(rt::kPc)},
        {"pd", "dashpunctuation", bit(rt::kPd)}, {"ps", "openpunctuation", bit(rt::kPs)},
        {"pe", "closepunctuation", bit(rt::kPe)}, {"pi", "initialpunctuation", bit(rt::kPi)},
        {"pf", "finalpunctuation", bit(rt::kPf)}, {"po", "otherpunctuation", bit(rt::kPo)},
        {"s", "symbol", S}, {"sm", "mathsymbol", bit(rt::kSm)}, {"sc", "currencysymbol", bit(rt::kSc)},
        {"sk", "modifiersymbol", bit(rt::kSk)}, {"so", "othersymbol", bit(rt::kSo)},
        {"z", "separator", Z}, {"zs", "spaceseparator", bit(rt::kZs)}, {"zl", "lineseparator", bit(rt::kZl)},
        {"zp", "paragraphseparator", bit(rt::kZp)}, {"c", "other", C}, {"cc", "control", bit(rt::kCc)},
        {"cf", "format", bit(rt::kCf)}, {"cs", "surrogate", bit(rt::kCs)}, {"co", "privateuse", bit(rt::kCo)},
        {"cn", "unassigned", bit(rt::kCn)},
    };
    for (const Cat& cat : cats) {
      if (name == cat.shortn || name == cat.longn) {
        item = {ClassItem::kCategories, false, cat.mask};
        return true;
      }
    }
    if (name == "any") {
      item = {ClassItem::kAny, false, 0};
      return true;
    }
    if (name == "word") {
      item = {ClassItem::kFlag, false, rt::kWord};
      return true;
    }
    static const char* const kShort[rt::kScriptCount] = {"latn", "grek", "cyrl", "armn", "hebr", "arab", "deva",
                                                         "beng", "thai", "geor", "hang", "hira", "kana", "hani",
                                                         "zyyy", "zinh"};
    for (int k = 0; k < rt::kScriptCount; ++k) {
      std::string lower;
      for (const char* s = rt::kScriptNames[k]; *s; ++s) lower.push_back(static_cast<char>(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s));
      if (name == lower || name == kShort[k] || (k == rt::kScriptCount - 1 && name == "qaai")) {
        item = {ClassItem::kScript, false, static_cast<uint32_t>(k + 1)};
        return true;
      }
    }
    return false;
  }

  int parse_escape(Flags f) {
    const size_t at = i_;
    ++i_;  // backslash
    if (eof()) fail_at("end pattern at escape", at);
    const char c = peek();
    CharClass cc;
    bool neg_single = false;
    if (class_escape(cc, neg_single, /*in_class=*/false)) {
      // A lone class escape: (?i) does not fold it (probed: (?i)\p{Lu} does not match "a").
      // Rust's regex does not fold \d \s \w either (closed under simple folding), but folds
      // \p{..} before negating it: not implemented, refused.
      if (fancy_ && f.icase && (c == 'p' || c == 'P')) unsupported("\\p{..} under (?i)", at);
      return class_node(std::move(cc));
    }
    uint32_t cp;
    if (code_point_escape(cp, /*in_class=*/false)) return literal(cp, f, at);
    switch (c) {
      case 'A': ++i_; return assert_node(Assert::kBot);
      case 'z': ++i_; return assert_node(Assert::kEot);
      case 'Z':
        if (fancy_) unsupported("escape \\Z", at);
        ++i_;
        return assert_node(Assert::kEotNl);
      case 'b': ++i_; return assert_node(fancy_ ? Assert::kRustWordB : Assert::kWordB);
      case 'B': ++i_; return assert_node(fancy_ ? Assert::kRustNotWordB : Assert::kNotWordB);
      default: break;
    }
    if (fancy_ && (c == '<' || c == '>')) unsupported(std::string("escape \\") + c + " (a word boundary in fancy-regex)", at);
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      unsupported(std::string("escape \\") + c, at);
    }
    return literal(next_cp(), f, at);
  }

  // Bracket class: [...] with ranges, negation, escapes and nested classes (union).
  CharClass parse_class(const Flags& f, int depth) {
    const size_t open = i_;
    if (depth > Regex::kMaxNesting) fail("classes nested too deeply");
    ++i_;  // [
    CharClass cc;
    if (peek() == '^') {
      cc.negated = true;
      ++i_;
    }
    bool first = true;
    // The pending single code point that may start a range.
    bool have_prev = false;
    uint32_t prev = 0;
    auto flush = [&]() {
      if (have_prev) cc.ranges.push_back({prev, prev});
      have_prev = false;
    };
    for (;;) {
      if (eof()) fail_at("premature end of char-class", open);
      const size_t at = i_;
      const char c = peek();
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      if (fancy_ && (c == '-' || c == '~') && peek(1) == c) unsupported("class set operator", at);
      if (fancy_ && c == '-' && !first && peek(1) != ']') unsupported("'-' after a range or class in a class", at);
      first = false;
      if (c == '[') {
        if (peek(1) == ':') unsupported("POSIX bracket [:...:]", at);
        flush();
        CharClass sub = parse_class(f, depth + 1);
        classes_.push_back(std::move(sub));
        finalize_class(classes_, classes_.back());
        cc.items.push_back({ClassItem::kSub, false, static_cast<uint32_t>(classes_.size() - 1)});
        continue;
      }
      if (c == '&' && peek(1) == '&') unsupported("class intersection &&", at);
      uint32_t cp;
      bool is_cp = true;
      if (c == '\\') {
        ++i_;
        if (eof()) fail_at("end pattern at escape", at);
        bool neg_single = false;
        flush();
        const char e0 = peek();
        if (class_escape(cc, neg_single, /*in_class=*/true)) {
          // Rust folds (then negates) each \p{..} item of a (?i) class: refused. The bracket as a
          // whole is folded like Oniguruma's (icase below), which covers \d \s \w members.
          if (fancy_ && f.icase && (e0 == 'p' || e0 == 'P')) unsupported("\\p{..} under (?i)", at);
          if (peek() == '-' && peek(1) != ']') unsupported("range from a class escape", at);
          continue;
        }
        if (!code_point_escape(cp, /*in_class=*/true)) {
          const char e = peek();
          if ((e >= '0' && e <= '9') || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
            unsupported(std::string("escape \\") + e + " in class", at);
          }
          cp = next_cp();
        }
      } else {
        flush();
        cp = next_cp();
      }
      (void)is_cp;
      // Range? (In Rust's class syntax "--" is set difference, also right after a character.)
      if (fancy_ && peek() == '-' && peek(1) == '-') unsupported("class set operator --", i_);
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        const size_t dash = i_;
        ++i_;
        uint32_t hi;
        if (peek() == '[') unsupported("range to a nested class", dash);
        if (peek() == '\\') {
          ++i_;
          CharClass tmp;
          bool ns = false;
          if (class_escape(tmp, ns, true)) fail_at("char-class value at end of range", dash);
          if (!code_point_escape(hi, true)) {
            const char e = peek();
            if ((e >= '0' && e <= '9') || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
              unsupported(std::string("escape \\") + e + " in class", dash);
            }
            hi = next_cp();
          }
        } else {
          hi = next_cp();
        }
        if (hi < cp) fail_at("empty range in char class", dash);
        cc.ranges.push_back({cp, hi});
        continue;
      }
      have_prev = true;
      prev = cp;
    }
    flush();
    if (f.icase && fancy_) {
      cc.icase = true;  // simple folding, then negation (regex-syntax's unicode_fold_and_negate)
    } else if (f.icase) {
      cc.icase = true;
      // Oniguruma lets a folded class match several characters (ß as "ss"); refuse classes that
      // contain such a character.
      CharClass probe = cc;
      probe.negated = false;
      finalize_class(classes_, probe);
      for (uint32_t m : rt::kMultiFold) {
        if (class_base(classes_, probe, m)) unsupported("case-insensitive class containing a multi-character folding", open);
      }
    }
    return cc;
  }

  // Rust's \w as a class (built once per pattern).
  uint32_t rust_word_class() {
    if (rust_word_ < 0) {
      CharClass w;
      w.ranges.push_back({0x200C, 0x200D});
      w.items.push_back({ClassItem::kFlag, false, rt::kWordInClass});
      classes_.push_back(std::move(w));
      finalize_class(classes_, classes_.back());
      rust_word_ = static_cast<int>(classes_.size()) - 1;
    }
    return static_cast<uint32_t>(rust_word_);
  }

  std::string_view p_;
  bool fancy_;
  size_t i_ = 0;
  std::vector<Node>& nodes_;
  Classes& classes_;
  int rust_word_ = -1;
};

// ------------------------------------------------------------------------------------------------
// Program.

enum class Op : uint8_t {
  kChar,       // x = code point
  kClass,      // x = class
  kRun,        // greedy run of one char/class: x = class or cp, flag kRunIsChar; min, max
  kRunPoss,    // possessive run
  kSplit,      // try x, then y
  kJmp,        // goto x
  kAssert,     // x = Assert
  kPeek,       // one-character lookahead: x = class or cp (kRunIsChar), negate
  kLook,       // x = body pc, negate, behind; min/max = lookbehind length in chars
  kAtomic,     // x = body pc
  kEmptyStart, // x = loop id
  kEmptyEnd,   // x = loop id, y = exit pc
  kMatch,      // end of the main program
  kSubMatch,   // end of a lookaround / atomic body
  kEndAt,      // lookbehind body: succeed only at the lookbehind's position
};

constexpr uint8_t kRunIsChar = 1;
constexpr uint8_t kNegate = 2;
constexpr uint8_t kBehind = 4;

struct Inst {
  Op op;
  uint8_t flags = 0;
  uint16_t nloops = 0;    // enclosing nullable loops (for the memo context)
  uint32_t x = 0, y = 0;
  uint32_t min = 0, max = 0;
  int32_t slot = -1;      // memo slot base, -1 if not memoized
  uint32_t loops_off = 0; // into Program::loop_lists (innermost first)
  int32_t first_x = -1, first_y = -1;  // kSplit: first-byte sets of both branches (-1: any)
};

using ByteSet = std::array<uint64_t, 4>;
inline bool byte_in(const ByteSet& b, uint8_t c) { return (b[c >> 6] >> (c & 63)) & 1u; }

}  // namespace

struct Regex::Program {
  std::vector<Inst> code;
  Classes classes;
  std::vector<uint32_t> loop_lists;
  std::vector<ByteSet> first_sets;  // for Inst::first_x / first_y
  uint32_t nloops = 0;
  uint32_t nslots = 0;
  bool nullable = false;
  bool anchored_start = false;   // begins with \A
  std::array<bool, 256> first{};  // bytes a non-empty match can start with
};

namespace {

using Program = Regex::Program;

// Static analysis helpers on the AST.
struct Analysis {
  const std::vector<Node>& nodes;
  const Classes& classes;

  bool nullable(int id) const {
    const Node& n = nodes[id];
    switch (n.kind) {
      case Node::kEmpty: case Node::kAssert: case Node::kLook: return true;
      case Node::kChar: case Node::kClass: return false;
      case Node::kConcat:
        for (int k : n.kids) if (!nullable(k)) return false;
        return true;
      case Node::kAlt:
        for (int k : n.kids) if (nullable(k)) return true;
        return false;
      case Node::kRepeat: return n.min == 0 || nullable(n.kids[0]);
      case Node::kAtomic: return nullable(n.kids[0]);
    }
    return true;
  }

  // Length range in characters; max = -1 when unbounded.
  void length(int id, long& lo, long& hi) const {
    const Node& n = nodes[id];
    switch (n.kind) {
      case Node::kEmpty: case Node::kAssert: case Node::kLook: lo = hi = 0; return;
      case Node::kChar: case Node::kClass: lo = hi = 1; return;
      case Node::kConcat: {
        lo = 0, hi = 0;
        for (int k : n.kids) {
          long a, b;
          length(k, a, b);
          lo = std::min(lo + a, kLengthCap);
          hi = (hi < 0 || b < 0) ? -1 : hi + b;
          if (hi > 1000000) hi = -1;
        }
        return;
      }
      case Node::kAlt: {
        lo = -2, hi = 0;
        for (int k : n.kids) {
          long a, b;
          length(k, a, b);
          lo = lo == -2 ? a : std::min(lo, a);
          hi = (hi < 0 || b < 0) ? -1 : std::max(hi, b);
        }
        if (lo == -2) lo = 0;
        return;
      }
      case Node::kRepeat: {
        long a, b;
        length(n.kids[0], a, b);
        // Saturating: nested counts (a{100000}{100000}{100000}) would overflow a long.
        lo = n.min == 0 ? 0 : (a > kLengthCap / n.min ? kLengthCap : std::min(a * n.min, kLengthCap));
        if (n.max < 0) hi = b == 0 ? 0 : -1;
        else hi = b < 0 ? -1 : b * n.max;
        if (hi > 1000000) hi = -1;
        return;
      }
      case Node::kAtomic: length(n.kids[0], lo, hi); return;
    }
  }

  // First-byte set of a non-empty match; returns whether the node is nullable.
  void first_bytes(int id, std::array<bool, 256>& out) const {
    const Node& n = nodes[id];
    switch (n.kind) {
      case Node::kEmpty: case Node::kAssert: case Node::kLook: return;
      case Node::kChar: {
        uint8_t buf[4];
        out[encode_first(n.cp, buf)] = true;
        return;
      }
      case Node::kClass: {
        const CharClass& c = classes[n.cls];
        for (uint32_t b = 0; b < 128; ++b) if ((c.ascii[b >> 6] >> (b & 63)) & 1u) out[b] = true;
        // Any non-ASCII byte could start a member (properties, negation, folding): be generous.
        bool non_ascii = c.negated || !c.items.empty() || c.icase;
        for (const auto& r : c.ranges) if (r.second >= 0x80) non_ascii = true;
        if (non_ascii) for (int b = 0x80; b < 256; ++b) out[b] = true;
        return;
      }
      case Node::kConcat:
        for (int k : n.kids) {
          first_bytes(k, out);
          if (!nullable(k)) return;
        }
        return;
      case Node::kAlt:
        for (int k : n.kids) first_bytes(k, out);
        return;
      case Node::kRepeat: case Node::kAtomic:
        first_bytes(n.kids[0], out);
        return;
    }
  }

  static uint8_t encode_first(uint32_t cp, uint8_t* buf) {
    if (cp < 0x80) return buf[0] = static_cast<uint8_t>(cp);
    if (cp < 0x800) return buf[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    if (cp < 0x10000) return buf[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    return buf[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  }
};

class Compiler {
 public:
  Compiler(const std::vector<Node>& nodes, Program& prog) : nodes_(nodes), prog_(prog), an_{nodes, prog.classes} {}

  void compile(int root) {
    emit_node(root);
    emit(Inst{Op::kMatch});
    // Bodies of lookarounds and atomic groups, appended after the main program (they may add more).
    for (size_t k = 0; k < pending_.size(); ++k) {
      const Pending pd = pending_[k];
      loop_stack_.clear();
      prog_.code[pd.inst].x = static_cast<uint32_t>(prog_.code.size());
      emit_node(pd.node);
      if (pd.behind) emit(Inst{Op::kEndAt});
      emit(Inst{Op::kSubMatch});
    }
    // Memo slots: one per (branch instruction, empty-loop context).
    uint32_t slots = 0;
    for (Inst& in : prog_.code) {
      if (in.op == Op::kSplit || in.op == Op::kRun) {
        in.slot = static_cast<int32_t>(slots);
        slots += 1u + in.nloops;
      }
    }
    prog_.nslots = slots;
    // Branch pruning: the bytes each branch of a split can start with, so that alternatives like
    // 's|'t|'re|... or [\p{L}]+|[\p{N}] cost one table lookup instead of a stack frame each.
    const size_t count = prog_.code.size();
    std::vector<int> state(count, 0);  // 0 unknown, 1 in progress, 2 done
    std::vector<ByteSet> sets(count);
    std::vector<bool> any(count, false);
    for (size_t pc = 0; pc < count; ++pc) {
      Inst& in = prog_.code[pc];
      if (in.op != Op::kSplit) continue;
      ByteSet bx{}, by{};
      const bool ax = first_of(in.x, state, sets, any, bx, 0);
      const bool ay = first_of(in.y, state, sets, any, by, 0);
      if (!ax) {
        in.first_x = static_cast<int32_t>(prog_.first_sets.size());
        prog_.first_sets.push_back(bx);
      }
      if (!ay) {
        in.first_y = static_cast<int32_t>(prog_.first_sets.size());
        prog_.first_sets.push_back(by);
      }
    }
  }

 private:
  // Bytes a path from pc can consume first; returns true for "any" (an empty path, a cycle, or
  // something not analysed). Results are cached per instruction.
  bool first_of(uint32_t pc, std::vector<int>& state, std::vector<ByteSet>& sets, std::vector<bool>& any,
                ByteSet& out, int depth) {
    if (pc >= prog_.code.size() || depth > 2000) return true;
    if (state[pc] == 1) return true;  // a cycle without consuming: be conservative
    if (state[pc] == 2) {
      if (any[pc]) return true;
      for (int k = 0; k < 4; ++k) out[k] |= sets[pc][k];
      return false;
    }
    state[pc] = 1;
    ByteSet mine{};
    bool is_any = false;
    const Inst& in = prog_.code[pc];
    auto add_matcher = [&](uint32_t x, bool is_char) {
      if (is_char) {
        uint8_t buf[4];
        const uint8_t b = Analysis::encode_first(x, buf);
        mine[b >> 6] |= uint64_t{1} << (b & 63);
        return;
      }
      const CharClass& c = prog_.classes[x];
      mine[0] |= c.ascii[0];
      mine[1] |= c.ascii[1];
      bool non_ascii = c.negated || !c.items.empty() || c.icase;
      for (const auto& r : c.ranges) if (r.second >= 0x80) non_ascii = true;
      if (non_ascii) mine[2] = mine[3] = ~uint64_t{0};
    };
    switch (in.op) {
      case Op::kChar: add_matcher(in.x, true); break;
      case Op::kClass: add_matcher(in.x, false); break;
      case Op::kRun: case Op::kRunPoss:
        add_matcher(in.x, (in.flags & kRunIsChar) != 0);
        if (in.min == 0) is_any = first_of(pc + 1, state, sets, any, mine, depth + 1);
        break;
      case Op::kSplit:
        is_any = first_of(in.x, state, sets, any, mine, depth + 1) ||
                 first_of(in.y, state, sets, any, mine, depth + 1);
        break;
      case Op::kJmp: is_any = first_of(in.x, state, sets, any, mine, depth + 1); break;
      case Op::kAssert: case Op::kPeek: case Op::kLook: case Op::kEmptyStart:
        // Zero-width: whatever follows consumes first.
        is_any = first_of(pc + 1, state, sets, any, mine, depth + 1);
        break;
      case Op::kEmptyEnd:
        is_any = first_of(in.y, state, sets, any, mine, depth + 1) ||
                 first_of(pc + 1, state, sets, any, mine, depth + 1);
        break;
      default: is_any = true; break;  // atomic bodies, match, end of a body
    }
    state[pc] = 2;
    any[pc] = is_any;
    sets[pc] = mine;
    if (is_any) return true;
    for (int k = 0; k < 4; ++k) out[k] |= mine[k];
    return false;
  }

 public:

 private:
  struct Pending {
    int node;
    size_t inst;
    bool behind;
  };

  size_t emit(Inst in) {
    if (prog_.code.size() >= kMaxInstructions) throw RegexError("regex: pattern compiles to too many instructions (repeat counts too large)");
    in.nloops = static_cast<uint16_t>(loop_stack_.size());
    in.loops_off = static_cast<uint32_t>(prog_.loop_lists.size());
    if (in.op == Op::kSplit || in.op == Op::kRun) {
      for (auto it = loop_stack_.rbegin(); it != loop_stack_.rend(); ++it) prog_.loop_lists.push_back(*it);
    } else {
      in.nloops = 0;
    }
    prog_.code.push_back(in);
    return prog_.code.size() - 1;
  }
  uint32_t here() const { return static_cast<uint32_t>(prog_.code.size()); }

  // Single-character matcher (char or class) for runs and peeks; false if the node is not one.
  bool single(int id, uint32_t& x, uint8_t& flags) const {
    const Node& n = nodes_[id];
    if (n.kind == Node::kChar) {
      x = n.cp;
      flags = kRunIsChar;
      return true;
    }
    if (n.kind == Node::kClass) {
      x = static_cast<uint32_t>(n.cls);
      flags = 0;
      return true;
    }
    return false;
  }

  void emit_node(int id) {
    const Node& n = nodes_[id];
    switch (n.kind) {
      case Node::kEmpty: return;
      case Node::kChar: { Inst in{Op::kChar}; in.x = n.cp; emit(in); return; }
      case Node::kClass: { Inst in{Op::kClass}; in.x = static_cast<uint32_t>(n.cls); emit(in); return; }
      case Node::kConcat: for (int k : n.kids) emit_node(k); return;
      case Node::kAlt: {
        std::vector<size_t> jumps;
        for (size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 < n.kids.size()) {
            const size_t sp = emit(Inst{Op::kSplit});
            prog_.code[sp].x = here();
            emit_node(n.kids[k]);
            jumps.push_back(emit(Inst{Op::kJmp}));
            prog_.code[sp].y = here();
          } else {
            emit_node(n.kids[k]);
          }
        }
        for (size_t j : jumps) prog_.code[j].x = here();
        return;
      }
      case Node::kAssert: { Inst in{Op::kAssert}; in.x = static_cast<uint32_t>(n.assert_kind); emit(in); return; }
      case Node::kLook: {
        uint32_t x;
        uint8_t fl;
        if (!n.behind && single(n.kids[0], x, fl)) {
          Inst in{Op::kPeek};
          in.x = x;
          in.flags = static_cast<uint8_t>(fl | (n.negate ? kNegate : 0));
          emit(in);
          return;
        }
        Inst in{Op::kLook};
        in.flags = static_cast<uint8_t>((n.negate ? kNegate : 0) | (n.behind ? kBehind : 0));
        if (n.behind) {
          long lo, hi;
          an_.length(n.kids[0], lo, hi);
          if (hi < 0 || hi > static_cast<long>(kMaxLookbehindChars)) {
            throw RegexError("regex: unsupported construct lookbehind of unbounded or long length (crayon's engine refuses it; use tokenizers)");
          }
          in.min = static_cast<uint32_t>(lo);
          in.max = static_cast<uint32_t>(hi);
        }
        pending_.push_back({n.kids[0], emit(in), n.behind});
        return;
      }
      case Node::kAtomic: {
        Inst in{Op::kAtomic};
        pending_.push_back({n.kids[0], emit(in), false});
        return;
      }
      case Node::kRepeat: emit_repeat(n); return;
    }
  }

  void emit_repeat(const Node& n) {
    const int body = n.kids[0];
    if (n.max == 0) return;  // X{0}: matches empty
    uint32_t x;
    uint8_t fl;
    if (single(body, x, fl) && (n.greedy || n.possessive)) {
      Inst in{n.possessive ? Op::kRunPoss : Op::kRun};
      in.x = x;
      in.flags = fl;
      in.min = static_cast<uint32_t>(n.min);
      in.max = n.max < 0 ? UINT32_MAX : static_cast<uint32_t>(n.max);
      emit(in);
      return;
    }
    if (n.possessive) throw RegexError("regex: internal error: possessive repeat not rewritten");
    const bool nul = an_.nullable(body);
    const bool popular = (n.min == 0 && (n.max == 1 || n.max < 0)) || (n.min == 1 && n.max < 0);
    if (nul && !popular) {
      throw RegexError("regex: unsupported construct counted repeat of a body that can match empty (crayon's engine refuses it; use tokenizers)");
    }
    for (int k = 0; k < n.min && !(nul && n.max < 0 && n.min == 1); ++k) emit_node(body);
    if (n.max < 0) {
      if (n.min >= 1 && nul) {
        // X+ with a nullable body: L: EmptyStart X EmptyEnd(exit) split(L, exit)
        const uint32_t loop = prog_.nloops++;
        const uint32_t head = here();
        loop_stack_.push_back(loop);
        Inst es{Op::kEmptyStart};
        es.x = loop;
        emit(es);
        emit_node(body);
        Inst ee{Op::kEmptyEnd};
        ee.x = loop;
        const size_t ee_at = emit(ee);
        loop_stack_.pop_back();
        const size_t sp = emit(Inst{Op::kSplit});
        const uint32_t exit = here();
        prog_.code[ee_at].y = exit;
        prog_.code[sp].x = n.greedy ? head : exit;
        prog_.code[sp].y = n.greedy ? exit : head;
        return;
      }
      // X*: L: split(body, exit) ... jmp L
      const uint32_t loop = nul ? prog_.nloops++ : 0;
      const size_t sp = emit(Inst{Op::kSplit});
      const uint32_t body_pc = here();
      if (nul) {
        loop_stack_.push_back(loop);
        Inst es{Op::kEmptyStart};
        es.x = loop;
        emit(es);
      }
      emit_node(body);
      size_t ee_at = 0;
      if (nul) {
        Inst ee{Op::kEmptyEnd};
        ee.x = loop;
        ee_at = emit(ee);
        loop_stack_.pop_back();
      }
      Inst j{Op::kJmp};
      j.x = static_cast<uint32_t>(sp);
      emit(j);
      const uint32_t exit = here();
      if (nul) prog_.code[ee_at].y = exit;
      prog_.code[sp].x = n.greedy ? body_pc : exit;
      prog_.code[sp].y = n.greedy ? exit : body_pc;
      return;
    }
    // Bounded optional copies: each is split(copy, exit); an empty copy exits (empty-loop check).
    const int optional = n.max - n.min;
    const uint32_t loop = nul ? prog_.nloops++ : 0;
    std::vector<size_t> splits, ends;
    for (int k = 0; k < optional; ++k) {
      splits.push_back(emit(Inst{Op::kSplit}));
      prog_.code[splits.back()].x = here();  // provisional: body first
      if (nul) {
        loop_stack_.push_back(loop);
        Inst es{Op::kEmptyStart};
        es.x = loop;
        emit(es);
      }
      emit_node(body);
      if (nul) {
        Inst ee{Op::kEmptyEnd};
        ee.x = loop;
        ends.push_back(emit(ee));
        loop_stack_.pop_back();
      }
    }
    const uint32_t exit = here();
    for (size_t s : splits) {
      const uint32_t body_pc = prog_.code[s].x;
      prog_.code[s].x = n.greedy ? body_pc : exit;
      prog_.code[s].y = n.greedy ? exit : body_pc;
    }
    for (size_t e : ends) prog_.code[e].y = exit;
  }

  const std::vector<Node>& nodes_;
  Program& prog_;
  Analysis an_;
  std::vector<Pending> pending_;
  std::vector<uint32_t> loop_stack_;
};

}  // namespace

namespace {

// fancy-regex constructs whose meaning differs from a backtracker's, refused on the parsed AST:
// a loop whose body can match empty (Rust's regex and fancy-regex's VM treat empty iterations
// differently from Oniguruma and from each other), and variable-length lookbehind (fancy-regex
// runs it as a reverse DFA search; only constant-length lookbehind was probed).
void check_fancy(const std::vector<Node>& nodes, const Classes& classes) {
  Analysis an{nodes, classes};
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    if (n.kind == Node::kRepeat && an.nullable(n.kids[0])) {
      throw RegexError("regex: unsupported construct repeat of a body that can match empty (crayon's engine refuses it in the fancy-regex dialect; use tiktoken)");
    }
    if (n.kind == Node::kLook && n.behind) {
      long lo, hi;
      an.length(n.kids[0], lo, hi);
      if (lo != hi) throw RegexError("regex: unsupported construct variable-length lookbehind (crayon's engine refuses it in the fancy-regex dialect; use tiktoken)");
    }
  }
}

// Rewrites X?+ X*+ X++ whose X is not a single character into (?>X?) etc. in the AST, so that the
// compiler never needs nodes it did not receive.
void prepare_possessive(std::vector<Node>& nodes) {
  const size_t count = nodes.size();
  for (size_t id = 0; id < count; ++id) {
    Node& n = nodes[id];
    if (n.kind != Node::kRepeat || !n.possessive) continue;
    const Node& body = nodes[n.kids[0]];
    if (body.kind == Node::kChar || body.kind == Node::kClass) continue;  // a possessive run
    Node inner = n;
    inner.possessive = false;
    nodes.push_back(inner);
    Node& outer = nodes[id];
    outer = Node{};
    outer.kind = Node::kAtomic;
    outer.kids = {static_cast<int>(nodes.size() - 1)};
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// The VM.

namespace {

struct Frame {
  enum Kind : uint32_t { kResume, kRestore, kRunBack };
  Kind kind;
  uint32_t pc;   // kResume/kRunBack: instruction; kRestore: loop id
  size_t pos;    // kResume: position; kRestore: old saved value; kRunBack: current end
  size_t aux;    // kRunBack: lowest end allowed
};

// Memo of visited (slot, pos) states for one (sub-)search.
class Memo {
 public:
  explicit Memo(uint32_t nslots) : nslots_(nslots) {}
  // True if the state was already visited; marks it otherwise.
  bool visit(uint32_t slot, size_t pos) {
    return !set_.insert(static_cast<uint64_t>(pos) * nslots_ + slot).second;
  }

 private:
  uint64_t nslots_;
  std::unordered_set<uint64_t> set_;
};

// The backtracking stack over a reusable vector: push and pop inline to a store and an index
// (std::vector::push_back was not inlined and cost 15% of a search).
class FrameStack {
 public:
  explicit FrameStack(std::vector<Frame>& storage) : v_(storage) {
    if (v_.size() < 64) v_.resize(64);
  }
  size_t size() const { return sp_; }
  Frame& back() { return v_[sp_ - 1]; }
  void pop_back() { --sp_; }
  void resize(size_t n) { sp_ = n; }  // shrink only
  void clear() { sp_ = 0; }
  void push_back(const Frame& f) {
    if (sp_ == v_.size()) v_.resize(v_.size() * 2);
    v_[sp_++] = f;
  }

 private:
  std::vector<Frame>& v_;
  size_t sp_ = 0;
};

// Per-thread scratch reused across searches (a find_matches over a document runs thousands).
struct Scratch {
  std::vector<Frame> stack;
  std::vector<size_t> saved;
};

class Machine {
 public:
  Machine(const Program& prog, std::string_view text, Scratch& scratch)
      : prog_(prog), s_(reinterpret_cast<const uint8_t*>(text.data())), n_(text.size()),
        saved_(scratch.saved), stack_(scratch.stack) {
    saved_.assign(prog.nloops, kNoMatch);
    stack_.clear();
  }

  // Leftmost match at or after `from`.
  bool search(size_t from, size_t& ms, size_t& me) {
    std::unique_ptr<Memo> memo;  // created on the first budget overrun, kept for later starts
    const bool nullable = prog_.nullable;
    size_t s = from;
    while (s <= n_) {
      if (!nullable) {
        // Skip positions whose first byte cannot start a match.
        while (s < n_ && !prog_.first[s_[s]]) s += step(s);
        if (s >= n_) return false;
      }
      if (prog_.anchored_start && s > 0) return false;
      size_t e;
      if (memo) {
        e = attempt(0, s, memo.get());
      } else {
        e = attempt(0, s, nullptr);
        if (e == kBudgetExceeded) {
          memo = std::make_unique<Memo>(prog_.nslots);
          e = attempt(0, s, memo.get());
        }
      }
      if (e != kNoMatch) {
        ms = s;
        me = e;
        return true;
      }
      if (s == n_) break;
      s += step(s);
    }
    return false;
  }

 private:
  size_t step(size_t pos) const { return s_[pos] < 0x80 ? 1 : utf8::decode(s_ + pos, s_ + n_).len; }

  // Runs the top-level program from (pc, pos); resets the step counter.
  size_t attempt(uint32_t pc, size_t pos, Memo* memo) {
    steps_ = 0;
    check_at_ = 1024;
    far_ = pos;
    start_ = pos;
    return run(pc, pos, memo, kNoMatch);
  }

  bool budget_exceeded() const {
    const size_t span = far_ - start_ + 1;
    return steps_ > 4096 + 8 * span * (prog_.code.size() + 4);
  }

  inline bool match_one(uint32_t x, uint8_t flags, size_t pos, size_t& len) const {
    if (pos >= n_) return false;
    const uint8_t b = s_[pos];
    uint32_t cp;
    if (b < 0x80) {
      cp = b;
      len = 1;
      if (flags & kRunIsChar) return cp == x;
      const CharClass& c = prog_.classes[x];
      return (c.ascii[cp >> 6] >> (cp & 63)) & 1u;
    }
    const utf8::Decoded d = utf8::decode(s_ + pos, s_ + n_);
    len = d.len;
    if (flags & kRunIsChar) return d.cp == x;
    return class_base(prog_.classes, prog_.classes[x], d.cp);
  }

  bool is_word_at(size_t pos) const {
    if (pos >= n_) return false;
    const utf8::Decoded d = decode_at(s_, n_, pos);
    return (props_of(d.cp) & rt::kWord) != 0;
  }
  bool is_word_before(size_t pos) const {
    if (pos == 0) return false;
    const size_t p = prev_boundary(s_, n_, 0, pos);
    return is_word_at(p);
  }
  bool is_rust_word_at(size_t pos) const {
    if (pos >= n_) return false;
    const utf8::Decoded d = decode_at(s_, n_, pos);
    return d.cp != utf8::kInvalid && is_rust_word(d.cp);
  }
  bool is_rust_word_before(size_t pos) const {
    return pos > 0 && is_rust_word_at(prev_boundary(s_, n_, 0, pos));
  }

  bool check_assert(Assert a, size_t pos) const {
    switch (a) {
      case Assert::kBol: return pos == 0 || (s_[pos - 1] == '\n' && pos < n_);
      case Assert::kEol: return pos == n_ || s_[pos] == '\n';
      case Assert::kBot: return pos == 0;
      case Assert::kEot: return pos == n_;
      case Assert::kEotNl: return pos == n_ || (pos + 1 == n_ && s_[pos] == '\n');
      case Assert::kWordB: return is_word_before(pos) != is_word_at(pos);
      case Assert::kNotWordB: return is_word_before(pos) == is_word_at(pos);
      case Assert::kRustWordB: return is_rust_word_before(pos) != is_rust_word_at(pos);
      case Assert::kRustNotWordB: return is_rust_word_before(pos) == is_rust_word_at(pos);
    }
    return false;
  }

  // Memo slot of the state (pc, pos): the instruction's base plus the empty-loop context j.
  uint32_t slot_of(const Inst& in, size_t pos) const {
    uint32_t j = 0;
    while (j < in.nloops && saved_[prog_.loop_lists[in.loops_off + j]] == pos) ++j;
    return static_cast<uint32_t>(in.slot) + j;
  }

  // Sub-search for a lookaround / atomic body at pos: end of its first success, or kNoMatch.
  size_t sub(const Inst& in, size_t pos, Memo* memo) {
    std::unique_ptr<Memo> own;
    if (memo) own = std::make_unique<Memo>(prog_.nslots);
    if (!(in.flags & kBehind)) return run(in.x, pos, own.get(), kNoMatch);
    // Lookbehind: some start q, min..max characters back, from which the body ends exactly at pos.
    // The body's states depend on the target pos only, so one memo serves every q.
    size_t q = pos;
    for (uint32_t k = 0; k < in.min; ++k) {
      if (q == 0) return kNoMatch;
      q = prev_boundary(s_, n_, 0, q);
    }
    for (uint32_t k = in.min;; ++k) {
      const size_t r = run(in.x, q, own.get(), pos);
      if (r == kBudgetExceeded) return r;
      if (r != kNoMatch) return pos;
      if (k == in.max || q == 0) return kNoMatch;
      q = prev_boundary(s_, n_, 0, q);
    }
  }

  // The backtracking loop. `target` is the lookbehind position for kEndAt (kNoMatch otherwise).
  size_t run(uint32_t pc, size_t pos, Memo* memo, size_t target) {
    const size_t base = stack_.size();
    const Inst* code = prog_.code.data();
    auto fail_to = [&](uint32_t& pc_out, size_t& pos_out) -> bool {
      // Pops frames until one resumes; false when the stack is back at base (no match).
      while (stack_.size() > base) {
        Frame& f = stack_.back();
        ++steps_;
        if (f.kind == Frame::kRestore) {
          saved_[f.pc] = f.pos;
          stack_.pop_back();
          continue;
        }
        if (f.kind == Frame::kResume) {
          pc_out = f.pc;
          pos_out = f.pos;
          stack_.pop_back();
          return true;
        }
        // kRunBack: give back one character of a greedy run.
        if (f.pos <= f.aux) {
          stack_.pop_back();
          continue;
        }
        const size_t np = prev_boundary(s_, n_, f.aux, f.pos);
        const uint32_t run_pc = f.pc;
        if (np <= f.aux) {
          stack_.pop_back();
        } else {
          f.pos = np;
        }
        if (memo && memo->visit(slot_of(code[run_pc], np), np)) continue;
        pc_out = run_pc + 1;
        pos_out = np;
        return true;
      }
      return false;
    };

    for (;;) {
      ++steps_;
      if (!memo && steps_ >= check_at_) {
        if (budget_exceeded()) {
          stack_.resize(base);
          return kBudgetExceeded;
        }
        check_at_ = steps_ + 1024;
      }
      if (pos > far_) far_ = pos;
      const Inst& in = code[pc];
      bool ok = true;
      switch (in.op) {
        case Op::kChar: {
          size_t len;
          ok = match_one(in.x, kRunIsChar, pos, len);
          if (ok) pos += len, ++pc;
          break;
        }
        case Op::kClass: {
          size_t len;
          ok = match_one(in.x, 0, pos, len);
          if (ok) pos += len, ++pc;
          break;
        }
        case Op::kRun:
        case Op::kRunPoss: {
          size_t p = pos, len = 0, min_end = pos;
          uint32_t count = 0;
          while (count < in.max && match_one(in.x, in.flags, p, len)) {
            p += len;
            ++count;
            if (count == in.min) min_end = p;
          }
          if (count < in.min) {
            ok = false;
            break;
          }
          if (in.min == 0) min_end = pos;
          if (p > far_) far_ = p;
          steps_ += count / 8;
          if (in.op == Op::kRun && p > min_end) stack_.push_back({Frame::kRunBack, pc, p, min_end});
          if (in.op == Op::kRun && memo && memo->visit(slot_of(in, p), p)) {
            ok = false;
            break;
          }
          pos = p;
          ++pc;
          break;
        }
        case Op::kSplit: {
          if (memo && memo->visit(slot_of(in, pos), pos)) {
            ok = false;
            break;
          }
          // Prune a branch whose first byte cannot be the one here (exact: it could not match).
          bool try_x = true, try_y = true;
          if (pos < n_) {
            const uint8_t b = s_[pos];
            if (in.first_x >= 0) try_x = byte_in(prog_.first_sets[in.first_x], b);
            if (in.first_y >= 0) try_y = byte_in(prog_.first_sets[in.first_y], b);
          } else {
            try_x = in.first_x < 0;
            try_y = in.first_y < 0;
          }
          if (try_x && try_y) {
            stack_.push_back({Frame::kResume, in.y, pos, 0});
            pc = in.x;
          } else if (try_x) {
            pc = in.x;
          } else if (try_y) {
            pc = in.y;
          } else {
            ok = false;
          }
          break;
        }
        case Op::kJmp: pc = in.x; break;
        case Op::kAssert:
          ok = check_assert(static_cast<Assert>(in.x), pos);
          if (ok) ++pc;
          break;
        case Op::kPeek: {
          size_t len;
          const bool m = match_one(in.x, in.flags & kRunIsChar, pos, len);
          ok = m != ((in.flags & kNegate) != 0);
          if (ok) ++pc;
          break;
        }
        case Op::kLook: {
          const size_t r = sub(in, pos, memo);
          if (r == kBudgetExceeded) {
            stack_.resize(base);
            return r;
          }
          ok = (r != kNoMatch) != ((in.flags & kNegate) != 0);
          if (ok) ++pc;
          break;
        }
        case Op::kAtomic: {
          const size_t r = sub(in, pos, memo);
          if (r == kBudgetExceeded) {
            stack_.resize(base);
            return r;
          }
          ok = r != kNoMatch;
          if (ok) pos = r, ++pc;
          break;
        }
        case Op::kEmptyStart:
          stack_.push_back({Frame::kRestore, in.x, saved_[in.x], 0});
          saved_[in.x] = pos;
          ++pc;
          break;
        case Op::kEmptyEnd:
          pc = saved_[in.x] == pos ? in.y : pc + 1;
          break;
        case Op::kEndAt:
          ok = pos == target;
          if (ok) ++pc;
          break;
        case Op::kMatch:
        case Op::kSubMatch:
          // Restore the empty-loop registers this run changed, then drop its frames.
          while (stack_.size() > base) {
            const Frame& f = stack_.back();
            if (f.kind == Frame::kRestore) saved_[f.pc] = f.pos;
            stack_.pop_back();
          }
          return pos;
      }
      if (!ok && !fail_to(pc, pos)) return kNoMatch;
    }
  }

  const Program& prog_;
  const uint8_t* s_;
  size_t n_;
  std::vector<size_t>& saved_;
  FrameStack stack_;
  size_t steps_ = 0, far_ = 0, start_ = 0, check_at_ = 0;
};

// The exact strings for which a hand-written scanner gives Oniguruma's matches (checked by
// tests/test_regex_oniguruma.py against tokenizers).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek-V3's Split patterns, in the order its tokenizer.json runs them. The last one holds a
// real CR and LF inside its brackets (so does the JSON), hence no raw string.
constexpr std::string_view kDeepSeekDigitsPattern = R"(\p{N}{1,3})";
// [一-龥぀-ゟ゠-ヿ]+ spelled as UTF-8 bytes, whatever the compiler's execution character set.
constexpr std::string_view kDeepSeekCjkPattern =
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+";
constexpr std::string_view kDeepSeekWordsPattern =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

}  // namespace

Regex::Regex(std::string_view pattern, RegexDialect dialect) : pattern_(pattern), dialect_(dialect) {
  if (pattern.size() > kMaxPatternBytes) throw RegexError("regex: pattern longer than 64 KiB");
  auto prog = std::make_unique<Program>();
  std::vector<Node> nodes;
  nodes.reserve(64);
  Parser parser(pattern, dialect, nodes, prog->classes);
  const int root = parser.parse();
  if (dialect == RegexDialect::kFancyRegex) check_fancy(nodes, prog->classes);
  prepare_possessive(nodes);
  Analysis an{nodes, prog->classes};
  prog->nullable = an.nullable(root);
  if (dialect == RegexDialect::kOniguruma) {
    long lo = 0, hi = 0;
    an.length(root, lo, hi);
    if (lo > kMaxMinMatchChars) {
      throw RegexError("regex: unsupported: repeat counts whose product needs a match of more than 2^26 characters "
                       "(Oniguruma refuses some of these as 'too big number for repeat range')");
    }
  }
  an.first_bytes(root, prog->first);
  {
    const Node* r = &nodes[root];
    while (r->kind == Node::kConcat && !r->kids.empty()) r = &nodes[r->kids[0]];
    prog->anchored_start = r->kind == Node::kAssert && r->assert_kind == Assert::kBot;
  }
  Compiler(nodes, *prog).compile(root);
  prog_ = std::move(prog);
  if (dialect != RegexDialect::kOniguruma) return;  // the scanners reproduce Oniguruma
  if (pattern == kGpt2Pattern) scanner_ = Scanner::kGpt2;
  if (pattern == kLlama3Pattern) scanner_ = Scanner::kLlama3;
  if (pattern == kQwen2Pattern) scanner_ = Scanner::kQwen2;
  if (pattern == kDeepSeekDigitsPattern) scanner_ = Scanner::kDeepSeekDigits;
  if (pattern == kDeepSeekCjkPattern) scanner_ = Scanner::kDeepSeekCjk;
  if (pattern == kDeepSeekWordsPattern) scanner_ = Scanner::kDeepSeekWords;
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

bool Regex::nullable() const { return prog_->nullable; }

bool Regex::tiles() const {
  return scanner_ == Scanner::kGpt2 || scanner_ == Scanner::kLlama3 || scanner_ == Scanner::kQwen2;
}

bool Regex::search(std::string_view text, size_t from, size_t& match_start, size_t& match_end) const {
  if (from > text.size()) return false;
  switch (scanner_) {
    case Scanner::kDeepSeekDigits: return search_deepseek_digits(text, from, match_start, match_end);
    case Scanner::kDeepSeekCjk: return search_deepseek_cjk(text, from, match_start, match_end);
    case Scanner::kDeepSeekWords: return search_deepseek_words(text, from, match_start, match_end);
    default: break;
  }
  if (tiles()) {
    // These patterns match a non-empty string at every position, so the leftmost match starts at
    // `from` and the scanner gives its end.
    if (from >= text.size()) return false;
    match_start = from;
    match_end = tiled_piece_end(scanner_, text, from);
    return true;
  }
  thread_local Scratch scratch;
  Machine m(*prog_, text, scratch);
  return m.search(from, match_start, match_end);
}

}  // namespace crayon
