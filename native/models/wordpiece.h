// The WordPiece model of HuggingFace `tokenizers` (models::WordPiece), as used by BERT.
//
//   piece ──more than max_input_chars_per_word chars?──────────────────▶ [unk (0, n)]
//         ──greedy longest match from the left: w0, ##w1, ##w2, ... ───▶ [w0, ##w1, ...]
//                           └─ some position matches no token at all ──▶ [unk (0, n)]
//
// Greedy longest match. tokenizers tries every end from the last character down and looks each
// candidate up in a hash map: O(n) lookups, each hashing O(n) bytes, per position. The tokens that
// can start at a position are exactly the keys passed by one walk down the trie from that position,
// and the last key passed is the longest. Vocabulary keys are whole UTF-8 strings, so on a
// well-formed piece every key the walk passes ends on a character boundary, and the walk finds
// the same token as the character-by-character search. Tokens after the first are looked up with
// continuing_subword_prefix ("##") in front: their walks start at the node the prefix bytes reach,
// found once at construction.
//
// Why there is no word cache (unlike hf_bpe.h and unigram.h): BERT's pre-tokens are short (4 bytes
// on average in English) and most are one token, found by one walk of a few steps. A cache probe
// (hash, compare, copy) costs more than that walk: with unigram.h's cache in front, model_driver
// --bench measured 30-40% slower and cachegrind counted more instructions and mispredictions.
// (On the ids-only path HfEngine puts whole words' ids in the thread's ShortPieceCache in front of
// every word-level model: a branch-free key and one slot, with no token records to rebuild, which
// made bert_base_uncased's English 15-30% faster on new text.)
//
// Bounds: time O(n * L) per piece of n bytes, L the longest token in bytes (one walk per emitted
// token, each at most min(n, L) steps); no memory beyond the output. Trie values >= n_ids count as
// absent, so a damaged table can give wrong tokens, never an out-of-range id or read. Pieces must
// be shorter than 2^32 bytes (offsets are 32-bit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/double_array.h"
#include "models/hf_model.h"

namespace crayon {

struct WordPieceOptions {
  uint32_t unk_id = 0;                   // the id of unk_token; must be < n_ids
  std::string prefix = "##";             // continuing_subword_prefix, as bytes (may be empty)
  uint32_t max_input_chars_per_word = 100;
};

class WordPieceModel final : public HfModel {
 public:
  // vocab: token UTF-8 -> id; ids >= n_ids in the trie are ignored (treated as absent).
  // Throws std::invalid_argument when options.unk_id >= n_ids (tokenizers has no model without
  // an unk token to fall back to).
  WordPieceModel(DoubleArrayView vocab, uint32_t n_ids, WordPieceOptions options);

  uint32_t n_ids() const override { return n_ids_; }
  const WordPieceOptions& options() const { return options_; }

  void encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const override;

  // The test oracle: tokenizers' loop as written (every end from the longest down, each candidate
  // prefix + substring looked up whole).
  void encode_word_reference(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const;

 private:
  // The id of exactly this key, or -1 (absent, or an id >= n_ids).
  int64_t lookup(const uint8_t* s, size_t n) const;

  DoubleArrayView vocab_;
  uint32_t n_ids_ = 0;
  WordPieceOptions options_;
  int32_t continuing_root_ = -1;  // node reached by the prefix bytes; -1: no key starts with it
};

}  // namespace crayon
