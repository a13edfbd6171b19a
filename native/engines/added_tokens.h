// Added tokens of a tokenizer.json (`added_tokens`), found in text exactly as `tokenizers` finds
// them (AddedVocabulary::find_matches).
//
//   sentence --leftmost-longest occurrences, non-overlapping, left to right-->
//            for each occurrence:  skip it when encode_special_tokens and it is special;
//                                  single_word: skip it when a word character touches it;
//                                  lstrip: extend left over whitespace (not past the previous split)
//                                  rstrip: extend right over whitespace
//            --> [text | token | text | token ...] splits covering the sentence
//
// tokenizers keeps two such sets: tokens with normalized=false are found in the original text
// first, tokens with normalized=true are found afterwards in each normalized text split (their
// content normalized by the tokenizer's normalizer). One AddedTokenSet is one of those sets.
//
// A skipped occurrence still consumes its span (the automaton's iterator moves past it), and an
// rstrip extension does not move the iterator: the next occurrence can start inside the stripped
// whitespace, and then the splits overlap, as they do in tokenizers.
//
// single_word: an occurrence is rejected when the character before it or the character after it
// (within this sentence) is a word character, which tokenizers tests with the Rust regex crate's
// `\w$` / `^\w` (Alphabetic | Mark | Nd | Pc | Join_Control; word_char_table.h, probed). The
// test comes before lstrip/rstrip, and a rejected occurrence is consumed like a skipped one.
//
// Bounds: O(n x longest token) trie steps per sentence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/double_array.h"

namespace crayon {

struct AddedToken {
  uint32_t id = 0;
  std::string content;  // the string matched (normalized already for the normalized set)
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  // Report the matched text as the token's string even when it equals `content` (set where the
  // id is also a model token with another string, which the model's own matches show).
  bool show_text = false;
};

// One split of a sentence: an added token (token >= 0) or text (token == -1), [start, end) bytes.
struct AddedSplit {
  int32_t token;  // index into the set's tokens, or -1
  uint32_t start;
  uint32_t end;
};

class AddedTokenSet {
 public:
  AddedTokenSet() = default;
  // Contents must be non-empty; duplicates keep the first token.
  explicit AddedTokenSet(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }
  const AddedToken& token(size_t i) const { return tokens_[i]; }
  size_t size() const { return tokens_.size(); }

  // Appends the splits of `sentence`. An empty sentence gives no splits.
  void split(std::string_view sentence, bool encode_special_tokens, std::vector<AddedSplit>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  DoubleArrayData trie_;
  uint64_t first_bytes_[4] = {0, 0, 0, 0};
  int single_first_byte_ = -1;  // the only first byte of all tokens, or -1
};

}  // namespace crayon
