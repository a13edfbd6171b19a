// tokenizers' Split machinery; see split.h for the contract and where each rule comes from.
#include "text/split.h"

#include <algorithm>
#include <cstring>

#include "core/swar.h"
#include "core/utf8.h"
#include "tables/regex_tables.h"

namespace crayon {
namespace {

namespace rt = regex_tables;

inline utf8::Decoded char_at(std::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  if (s[pos] < 0x80) return {s[pos], 1};
  return utf8::decode(s + pos, s + text.size());
}

inline uint16_t props_at(std::string_view text, size_t pos, uint32_t& len) {
  const utf8::Decoded d = char_at(text, pos);
  len = d.len;
  return d.cp == utf8::kInvalid ? 0 : rt::props(d.cp);
}

// rust-onig's FindMatches + tokenizers' find_matches, over any "leftmost match from" function.
template <typename Search>
void find_matches_with(std::string_view text, Search&& search, std::vector<MatchSpan>& out) {
  const size_t n = text.size();
  if (n == 0) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last_end = 0, prev = 0;
  bool skip_next_empty = false;
  while (last_end <= n) {
    size_t s, e;
    if (!search(last_end, s, e)) break;
    last_end = e;
    if (e == s) {
      last_end += e < n ? char_at(text, e).len : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    if (prev != s) out.push_back({static_cast<uint32_t>(prev), static_cast<uint32_t>(s), false});
    out.push_back({static_cast<uint32_t>(s), static_cast<uint32_t>(e), true});
    prev = e;
  }
  if (prev != n) out.push_back({static_cast<uint32_t>(prev), static_cast<uint32_t>(n), false});
}

// tokenizers' `impl<F: Fn(char) -> bool> Pattern for F`: each matching character is its own match.
template <typename Pred>
void find_matches_chars(std::string_view text, Pred&& pred, std::vector<MatchSpan>& out) {
  const size_t n = text.size();
  if (n == 0) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0, pos = 0;
  while (pos < n) {
    uint32_t len;
    const uint16_t p = props_at(text, pos, len);
    if (pred(p)) {
      if (last < pos) out.push_back({static_cast<uint32_t>(last), static_cast<uint32_t>(pos), false});
      out.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + len), true});
      last = pos + len;
    }
    pos += len;
  }
  if (pos > last) out.push_back({static_cast<uint32_t>(last), static_cast<uint32_t>(pos), false});
}

}  // namespace

void find_matches(const Regex& re, std::string_view text, std::vector<MatchSpan>& out) {
  find_matches_with(
      text, [&](size_t from, size_t& s, size_t& e) { return re.search(text, from, s, e); }, out);
}

void find_matches_literal(std::string_view needle, std::string_view text, std::vector<MatchSpan>& out) {
  find_matches_with(
      text,
      [&](size_t from, size_t& s, size_t& e) {
        const size_t at = text.find(needle, from);
        if (at == std::string_view::npos) return false;
        s = at;
        e = at + needle.size();
        return true;
      },
      out);
}

void split_pieces_by(const std::vector<MatchSpan>& matches, SplitBehavior behavior, bool invert, Pieces& pieces) {
  auto flag = [&](const MatchSpan& m) { return m.is_match != invert; };
  auto keep = [&](uint32_t a, uint32_t b) {
    if (b > a) pieces.emplace_back(a, b);  // PreTokenizedString::split drops empty pieces
  };
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const MatchSpan& m : matches) keep(m.start, m.end);
      return;
    case SplitBehavior::kRemoved:
      for (const MatchSpan& m : matches) {
        if (!flag(m)) keep(m.start, m.end);
      }
      return;
    default: break;
  }
  // The merging behaviours fold segments into their neighbours before any empty piece is dropped,
  // exactly as NormalizedString::split does (an empty match still separates or joins).
  std::vector<std::pair<uint32_t, uint32_t>> segs;
  segs.reserve(matches.size());
  bool previous = false;
  if (behavior == SplitBehavior::kMergedWithNext) {
    for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
      const bool f = flag(*it);
      if (f && !previous && !segs.empty()) {
        segs.back().first = it->start;
      } else {
        segs.emplace_back(it->start, it->end);
      }
      previous = f;
    }
    std::reverse(segs.begin(), segs.end());
  } else {
    const bool contiguous = behavior == SplitBehavior::kContiguous;
    for (const MatchSpan& m : matches) {
      const bool f = flag(m);
      const bool merge = contiguous ? f == previous : (f && !previous);
      if (merge && !segs.empty()) {
        segs.back().second = m.end;
      } else {
        segs.emplace_back(m.start, m.end);
      }
      previous = f;
    }
  }
  for (const auto& s : segs) keep(s.first, s.second);
}

void pretokenize_whitespace(std::string_view text, Pieces& pieces) {
  // \w+|[^\w\s]+ : a run of word characters, or a run of characters that are neither.
  const size_t n = text.size();
  size_t pos = 0;
  while (pos < n) {
    uint32_t len;
    const uint16_t p = props_at(text, pos, len);
    if (p & rt::kWsSpace) {
      pos += len;
      continue;
    }
    const bool word = (p & rt::kWsWord) != 0;
    const size_t start = pos;
    pos += len;
    while (pos < n) {
      const uint16_t q = props_at(text, pos, len);
      if (word ? !(q & rt::kWsWord) : (q & (rt::kWsWord | rt::kWsSpace)) != 0) break;
      pos += len;
    }
    pieces.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(pos));
  }
}

void pretokenize_whitespace_split(std::string_view text, Pieces& pieces) {
  // What find_matches_chars + kRemoved give for char::is_whitespace: the maximal runs of other
  // characters. Only bytes up to 0x20 and four lead bytes can start a whitespace character
  // (swar::may_start_whitespace), so inside a word every other byte, of any script, is skipped
  // eight at a time (a skip may stop inside a character: its continuation bytes then go one at a
  // time below, each an invalid char that is no whitespace, as they are inside the word anyway);
  // the rest is decided per character, as find_matches_chars does.
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  constexpr size_t kNone = ~size_t{0};
  size_t word = kNone;  // start of the current run, if any
  size_t pos = 0;
  while (pos < n) {
    if (word != kNone && s[pos] > 0x20 && s[pos] < 0x80) {  // ASCII letters: the cheaper test first
      pos = swar::skip(s, pos, n, [](uint64_t x) { return swar::non_ascii_or_at_most(x, 0x20); });
      if (pos >= n) break;
    }
    if (word != kNone && s[pos] >= 0x80 && s[pos] != 0xC2 && (s[pos] < 0xE1 || s[pos] > 0xE3)) {
      pos = swar::skip(s, pos, n, swar::may_start_whitespace);
      if (pos >= n) break;
    }
    uint32_t len = 1;
    const uint8_t b = s[pos];
    const bool space = b < 0x80 ? (b == ' ' || (b >= '\t' && b <= '\r')) : (props_at(text, pos, len) & rt::kRustWhitespace) != 0;
    if (space) {
      if (word != kNone) pieces.emplace_back(static_cast<uint32_t>(word), static_cast<uint32_t>(pos));
      word = kNone;
    } else if (word == kNone) {
      word = pos;
    }
    pos += len;
  }
  if (word != kNone) pieces.emplace_back(static_cast<uint32_t>(word), static_cast<uint32_t>(n));
}

void pretokenize_digits(std::string_view text, bool individual_digits, Pieces& pieces) {
  std::vector<MatchSpan> m;
  find_matches_chars(text, [](uint16_t p) { return (p & rt::kRustNumeric) != 0; }, m);
  split_pieces_by(m, individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false, pieces);
}

void pretokenize_punctuation(std::string_view text, SplitBehavior behavior, Pieces& pieces) {
  std::vector<MatchSpan> m;
  find_matches_chars(text, [](uint16_t p) { return (p & rt::kPunc) != 0; }, m);
  split_pieces_by(m, behavior, false, pieces);
}

}  // namespace crayon
