// tokenizers' Split machinery and its char-class pre-tokenizers, on byte offsets.
//
//   text --find_matches(regex) / find_matches_literal / char predicate--> segments
//        (contiguous, cover the text, each flagged match / not match)
//   segments --split_pieces_by(behavior, invert)--> pieces [start, end), empty pieces dropped
//
// find_matches reproduces `impl Pattern for &onig::Regex` (tokenizers/src/utils/onig.rs) over
// `onig::Regex::find_iter`: successive onig_search calls from the end of the previous match; an
// empty match advances the next search by one character, and an empty match found right after a
// non-empty one is skipped (rust-onig's skip_next_empty). Empty matches still produce (empty)
// match segments, which split the text around them. An empty text gives one empty non-match.
// split_pieces_by reproduces NormalizedString::split (tokenizers/src/tokenizer/normalizer.rs) and
// the empty-piece filter of PreTokenizedString::split.
//
// The char-class pre-tokenizers use tables probed from tokenizers itself (regex_tables.h):
// Whitespace = matches of \w+|[^\w\s]+, WhitespaceSplit = runs of non-char::is_whitespace,
// Digits = char::is_numeric, Punctuation = tokenizers' is_punc (older Unicode tables than its
// regex classes: U+2E42 is punctuation there, U+2E45 is not).
//
// Bounds: output is O(text) segments; time is that of the regex searches (see regex.h) or linear
// for the char-class pre-tokenizers. Offsets are uint32 (texts must be < 4 GiB). Invalid UTF-8 is
// walked one byte per invalid character and never read out of range.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "text/regex.h"

namespace crayon {

struct MatchSpan {
  uint32_t start, end;  // byte offsets
  bool is_match;
};

using Pieces = std::vector<std::pair<uint32_t, uint32_t>>;

// Segments covering the whole text, like tokenizers' Pattern::find_matches for a Regex pattern.
void find_matches(const Regex& re, std::string_view text, std::vector<MatchSpan>& out);

// Split with {"String": needle}: tokenizers escapes it and runs it as an Oniguruma regex, so an
// empty needle matches the empty string at every character boundary.
void find_matches_literal(std::string_view needle, std::string_view text, std::vector<MatchSpan>& out);

enum class SplitBehavior : uint8_t { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Applies the behaviour (after `invert`, which flips every segment's flag) and appends the
// resulting non-empty pieces as [start, end) byte ranges.
void split_pieces_by(const std::vector<MatchSpan>& matches, SplitBehavior behavior, bool invert, Pieces& pieces);

// pre_tokenizers.Whitespace: the matches of \w+|[^\w\s]+.
void pretokenize_whitespace(std::string_view text, Pieces& pieces);
// pre_tokenizers.WhitespaceSplit: runs of characters that are not char::is_whitespace.
void pretokenize_whitespace_split(std::string_view text, Pieces& pieces);
// pre_tokenizers.Digits: char::is_numeric runs (or single digits) isolated from the rest.
void pretokenize_digits(std::string_view text, bool individual_digits, Pieces& pieces);
// pre_tokenizers.Punctuation(behavior): each is_punc character is a match.
void pretokenize_punctuation(std::string_view text, SplitBehavior behavior, Pieces& pieces);

}  // namespace crayon
