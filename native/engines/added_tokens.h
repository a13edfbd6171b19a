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
//
// A set is always held in its serialized form, so the set built from a list at load (tokens
// added after load) and the set a cartridge carries (HADR / HADN, docs/cartridge.md) run the same
// code: a cartridge's set is used in place, and loading costs O(1) however many tokens it has.
//
//   offset  size      field
//   0       4         n_tokens
//   4       4         n_units: slots of the trie (0 when n_tokens is 0)
//   8       4         blob_size: bytes of the token contents
//   12      4         single_first_byte: the only first byte of all contents, or -1
//   16      32        first_bytes: bitmap of the contents' first bytes
//   48      16        reserved, 0
//   64      16 x n    records {u32 id, u32 offset, u32 length, u32 flags} (kAdded* flags), in
//                     de-duplicated order; content i is blob[offset, offset + length)
//   ...     8 x u     trie units {i32 base, i32 check} (double_array.h), keys = contents
//   ...     4 x u     trie values: record index, or -1
//   ...     blob_size the contents
//
// view() checks that these sizes add up to the section (O(1)); check() (first use, once per
// file) that every record lies inside the blob and every trie value names a record. A set that
// passed both is read without further checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

constexpr uint32_t kAddedSpecial = 1u, kAddedLstrip = 2u, kAddedRstrip = 4u, kAddedSingleWord = 8u,
                   kAddedShowText = 16u;

// One token of a set, as split() and its callers read it (content points into the set).
struct AddedEntry {
  uint32_t id;
  std::string_view content;
  uint32_t flags;
  bool special() const { return flags & kAddedSpecial; }
  bool show_text() const { return flags & kAddedShowText; }
};

class AddedTokenSet {
 public:
  AddedTokenSet() = default;
  // Contents must be non-empty; duplicates keep the first token.
  explicit AddedTokenSet(std::vector<AddedToken> tokens);
  // The serialized form of AddedTokenSet(tokens): what a cartridge stores.
  static std::string serialize(std::vector<AddedToken> tokens);
  // A set over serialized bytes that outlive it (a cartridge section). Returns false, with the
  // reason in *error, when the header's sizes do not add up to the section; O(1).
  static bool view(std::string_view image, AddedTokenSet* out, std::string* error);
  // The pass over the tables that view() leaves to first use; false with the reason in *error.
  bool check(std::string* error) const;

  bool empty() const { return n_ == 0; }
  size_t size() const { return n_; }
  AddedEntry token(size_t i) const;  // i < size()

  // Appends the splits of `sentence`. An empty sentence gives no splits.
  void split(std::string_view sentence, bool encode_special_tokens, std::vector<AddedSplit>& out) const;

 private:
  struct Record {
    uint32_t id, offset, length, flags;
  };
  std::shared_ptr<const std::string> owned_;  // the image of a set built from a list; null for views
  uint32_t n_ = 0;
  const Record* records_ = nullptr;
  const char* blob_ = nullptr;
  uint32_t blob_size_ = 0;
  DoubleArrayView trie_;
  uint64_t first_bytes_[4] = {0, 0, 0, 0};
  int single_first_byte_ = -1;  // the only first byte of all tokens, or -1
};

}  // namespace crayon
