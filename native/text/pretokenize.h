// Pre-tokenization for the split patterns tiktoken ships, as hand-written scanners.
//
//   text segment (UTF-8) --piece_end(pattern, text, pos)--> [pos, end) one pre-token at a time
//
// Each scanner reproduces, byte for byte, what tiktoken 0.14 (fancy-regex, Unicode 16.0 classes)
// returns from `regex.find_iter(text)` for that pattern: leftmost-first alternation, the same
// greedy/possessive quantifiers and lookahead. `$` and `(?!\S)` look at the end of `text`, which is
// the segment between special tokens, exactly as tiktoken runs its regex on that segment only.
// The pieces of a segment are contiguous and cover it completely (every pattern here matches a
// non-empty string at every position).
//
// Bounds: O(length of the piece) per call except where a pattern must look ahead through a run of
// whitespace or letters (still linear over a whole segment). Invalid UTF-8 never reads out of
// range: a byte that does not start a valid sequence counts as one "other" character.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace crayon {

enum class SplitPattern : uint8_t {
  kNone = 0,    // the whole segment is one piece
  kR50k = 1,    // r50k_base / gpt2 / p50k
  kCl100k = 2,  // cl100k_base
  kO200k = 3,   // o200k_base / o200k_harmony
  kLlama3 = 4,  // Llama 3 (tiktoken-format tokenizer.model)
};

// The end (exclusive byte offset) of the pre-token that starts at `pos`. Requires pos < text.size().
size_t piece_end(SplitPattern pattern, std::string_view text, size_t pos);

// Appends every pre-token of `text` as [begin, end) byte offsets relative to `text`.
void split_pieces(SplitPattern pattern, std::string_view text,
                  std::vector<std::pair<uint32_t, uint32_t>>& out);

// Qwen2's Split pattern as Oniguruma runs it: Llama 3's pattern with \p{N} in place of \p{N}{1,3}
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Same contract as piece_end (every position starts a non-empty match). Used by regex.cc.
size_t piece_end_qwen2(std::string_view text, size_t pos);

}  // namespace crayon
