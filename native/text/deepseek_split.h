// DeepSeek-V3's three Split patterns as hand-written searches.
//
//   piece (UTF-8), from --search_deepseek_*--> leftmost match [start, end) at or after `from`
//
// tokenizer.json runs them one after another (each on the pieces of the one before), all with
// behavior Isolated, as Oniguruma patterns:
//   digits  \p{N}{1,3}
//   cjk     [一-龥぀-ゟ゠-ヿ]+                  (U+4E00..U+9FA5, U+3040..U+309F, U+30A0..U+30FF)
//   words   [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//           | ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Unlike the tiktoken-style patterns of pretokenize.h, none of them matches at every position
// (digits and CJK match only their characters; `words` matches nothing at a lone digit or control
// character), so these are searches with Regex::search's contract, not piece ends: each returns
// exactly what the regex VM (regex.cc) returns for the pattern, character classes from the same
// tables (regex_tables.h), `(?!\S)` looking at the end of `text`.
//
// Bounds: O(bytes scanned) per call, each byte of a match read at most twice. `from` must be a
// character boundary as the VM steps (decode length), like Regex::search. Invalid UTF-8 never
// reads out of range and behaves as in the VM: a byte that does not start a well-formed sequence
// is one character of category Cn with no flags (so it is in [^\r\n\p{L}\p{P}\p{S}] and in \S).
#pragma once

#include <cstddef>
#include <string_view>

namespace crayon {

bool search_deepseek_digits(std::string_view text, size_t from, size_t& match_start, size_t& match_end);
bool search_deepseek_cjk(std::string_view text, size_t from, size_t& match_start, size_t& match_end);
bool search_deepseek_words(std::string_view text, size_t from, size_t& match_start, size_t& match_end);

// The three Splits in sequence, each Isolated, as tokenizer.json runs them (each on the pieces of
// the one before): the end of the final piece that starts at pos < text.size(), where pos is 0 or
// the end of the piece before. Streams what the three rounds of splits produce, in one pass: a
// piece costs about one `words` search plus a look for a digit or cjk character among the
// characters that search read.
size_t deepseek_piece_end(std::string_view text, size_t pos);

}  // namespace crayon
