#include "models/wordlevel.h"

#include <stdexcept>

namespace crayon {

WordLevelModel::WordLevelModel(DoubleArrayView vocab, uint32_t n_ids, uint32_t unk_id)
    : vocab_(vocab), n_ids_(n_ids), unk_id_(unk_id) {
  if (unk_id_ >= n_ids_) throw std::invalid_argument("WordLevel: unk_id is not a vocabulary id");
}

void WordLevelModel::encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const {
  const uint32_t v = vocab_.size() == 0 ? ~0u : static_cast<uint32_t>(vocab_.find(piece, n));
  out.push_back({v < n_ids_ ? v : unk_id_, 0, static_cast<uint32_t>(n)});
}

}  // namespace crayon
