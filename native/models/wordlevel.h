// The WordLevel model of HuggingFace `tokenizers` (models::WordLevel): a whole-piece lookup.
//
//   piece ──is a token?──▶ [token (0, n)]
//         ──otherwise────▶ [unk (0, n)]
//
// Bounds: time O(n) per piece (one trie walk), no memory beyond the output. Trie values >= n_ids
// count as absent. tokenizers errors when a piece is unknown and the unk token is missing; the
// caller falls back to tokenizers for such vocabularies, so this model always has an unk id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/double_array.h"
#include "models/hf_model.h"

namespace crayon {

class WordLevelModel final : public HfModel {
 public:
  // vocab: token UTF-8 -> id. Throws std::invalid_argument when unk_id >= n_ids.
  WordLevelModel(DoubleArrayView vocab, uint32_t n_ids, uint32_t unk_id);

  uint32_t n_ids() const override { return n_ids_; }
  void encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const override;

 private:
  DoubleArrayView vocab_;
  uint32_t n_ids_ = 0;
  uint32_t unk_id_ = 0;
};

}  // namespace crayon
