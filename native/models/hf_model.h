// The model step of a tokenizer.json pipeline: one pre-token in, its tokens out.
//
//   pre-token bytes ──HfModel::encode_word──▶ [(id, start, end)]   offsets in bytes of the pre-token
//
// Implementations, one file each: BPE (hf_bpe.h; over raw bytes behind a ByteLevel pre-tokenizer,
// or over the UTF-8 of the normalized text for SentencePiece-style vocabularies), WordPiece
// (wordpiece.h), Unigram (unigram.h) and WordLevel (wordlevel.h). Each reproduces the `tokenize` of
// its `tokenizers` model exactly, including the offsets of unknown and byte-fallback tokens.
//
// Thread safety: models are immutable after construction and read only memory-mapped tables;
// encode_word may use thread_local scratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace crayon {

// A token of a pre-token: id and [start, end) byte offsets within the pre-token.
struct HfToken {
  uint32_t id;
  uint32_t start;
  uint32_t end;
};

class HfModel {
 public:
  virtual ~HfModel() = default;
  // Every id the model produces is < n_ids().
  virtual uint32_t n_ids() const = 0;
  // Appends the tokens of piece[0, n) to out (n >= 1; the piece is valid UTF-8 except for
  // byte-level BPE, whose pieces are raw bytes).
  virtual void encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const = 0;
};

}  // namespace crayon
