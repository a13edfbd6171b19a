// A regex engine with Oniguruma's semantics (Ruby syntax, UTF-8), for the `Split` patterns of
// tokenizer.json and the ByteLevel pre-tokenizer, which `tokenizers` runs with Oniguruma; and, as a
// second dialect, fancy-regex's (tiktoken runs `pat_str` with fancy-regex over Rust's `regex`).
//
//   pattern --parse--> AST --compile--> Program (instructions + character classes)
//   text, from --search--> leftmost match [start, end) at or after `from`, like onig_search
//
// The matcher is a backtracking VM, because Oniguruma's answers are defined by backtracking
// (leftmost-first alternation, greedy/lazy/possessive quantifiers, atomic lookaround, the empty-loop
// check). Two things keep it polynomial:
//   * a step budget: a start position first runs without bookkeeping; if its work exceeds a bound
//     linear in (program size x distance scanned), it is re-run with memoization of visited
//     (instruction, position, empty-loop context) states (RE2's BitState idea), so that no state
//     is explored twice and a search costs O(program x text);
//   * recursion only for lookaround and atomic bodies, whose nesting depth is bounded by the
//     pattern (at most kMaxNesting); everything else uses an explicit heap stack.
// Patterns equal to one that a hand-written scanner reproduces exactly dispatch to that scanner:
// GPT-2, Llama 3, Qwen2 (pretokenize.cc; they match at every position) and DeepSeek-V3's three
// Split patterns (deepseek_split.cc; searches, since they skip characters).
//
// Anything the engine does not implement (backreferences, conditionals, \G, \K, \R, \X, absent
// operator, unknown properties, case-insensitive multi-character folds, ...) throws RegexError
// naming the construct and its byte offset: the caller then falls back to `tokenizers`, so refusing
// is always safe, while a silent mismatch never is. See docs/regex.md for the dialect notes.
//
// RegexDialect::kFancyRegex reads the same syntax the way fancy-regex 0.19 (tiktoken 0.14) does:
// `^`/`$` are start/end of text, `X{n,m}+` is possessive, `\w`/`\b` use Rust's Unicode word set,
// `(?i)` is simple case folding only. It accepts a narrower set (see docs/regex.md "Dialects"):
// whatever has not been probed against tiktoken throws RegexError.
//
// Bounds: pattern <= 64 KiB, program <= 200k instructions, repeat counts <= 100000, group nesting
// <= kMaxNesting. Invalid UTF-8 in the text never reads out of range: a byte that does not start a
// well-formed sequence is one character with no Unicode properties (general category Cn), so only
// negated classes, \P{..}, \S, \W, \D and `.` match it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "text/pretokenize.h"

namespace crayon {

class RegexError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Which reference library's reading of a pattern the engine reproduces.
enum class RegexDialect : uint8_t {
  kOniguruma,   // tokenizers (tokenizer.json Split, Replace, ByteLevel)
  kFancyRegex,  // tiktoken (pat_str): fancy-regex 0.19 on Rust's regex crate
};

class Regex {
 public:
  static constexpr int kMaxNesting = 64;

  // UTF-8 pattern in the given dialect. Throws RegexError for invalid or unsupported patterns.
  explicit Regex(std::string_view pattern, RegexDialect dialect = RegexDialect::kOniguruma);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // Leftmost match starting at or after `from` (a character boundary), like onig_search over the
  // whole subject: anchors and lookbehind see all of `text`. Thread-safe (const; per-call scratch).
  bool search(std::string_view text, size_t from, size_t& match_start, size_t& match_end) const;

  const std::string& pattern() const { return pattern_; }
  RegexDialect dialect() const { return dialect_; }
  // The hand-written scanner this pattern dispatches to, or kNone when the VM runs.
  enum class Scanner : uint8_t { kNone, kGpt2, kLlama3, kQwen2, kDeepSeekDigits, kDeepSeekCjk, kDeepSeekWords };
  Scanner scanner() const { return scanner_; }
  // True when the pattern matches a non-empty string at every position, so that successive
  // matches tile any text (the scanners of pretokenize.cc); callers may then stream pieces.
  bool tiles() const;
  // The end of the piece at pos < text.size() for a tiling scanner (kGpt2, kLlama3, kQwen2; pos
  // itself for any other). Inline, so that a caller naming the scanner as a constant calls the
  // scanner directly (HfEngine's streaming loop does, per piece).
  static size_t tiled_piece_end(Scanner scanner, std::string_view text, size_t pos) {
    switch (scanner) {
      case Scanner::kGpt2: return piece_end(SplitPattern::kR50k, text, pos);
      case Scanner::kLlama3: return piece_end(SplitPattern::kLlama3, text, pos);
      case Scanner::kQwen2: return piece_end_qwen2(text, pos);
      default: return pos;
    }
  }
  // True when the pattern can match the empty string (then searches never skip positions).
  bool nullable() const;

  struct Program;

 private:
  std::string pattern_;
  RegexDialect dialect_ = RegexDialect::kOniguruma;
  Scanner scanner_ = Scanner::kNone;
  std::unique_ptr<const Program> prog_;
};

}  // namespace crayon
