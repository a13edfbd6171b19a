// The Unigram model of HuggingFace `tokenizers` (models::Unigram), as used by T5 and XLM-R.
//
//   piece ──Viterbi over char starts──▶ best path of nodes (token, or unk for one char)
//         ──fuse runs of unk-id nodes──▶ strings
//         ──string -> id──────────────▶ token | <0xXX> per byte (byte_fallback) | unk
//
// This is tokenizers' `encode_optimized` followed by `Model::tokenize`, step for step:
//
// * Viterbi. best[0] is "not reached", score 0. For each character start s, left to right, with
//   here = best[s].score: every key that is a prefix of piece[s..] (the trie's common-prefix
//   search, shortest first) offers best[s + len] the score scores[id] + here; then, when no key is
//   exactly the character at s, the unk node offers best[s + char_len] unk_score + here. An offer
//   is taken when the target is not reached yet or the offer is STRICTLY greater, so on ties the
//   earliest offer stays: the one from the leftmost start, and at one start the shortest key, with
//   the unk offer last. unk_score = min(scores of ALL ids) - 10.0, in f64 as tokenizers computes it.
// * Fusing. tokenizers' Unigram always fuses: walking back from the end, consecutive nodes whose id
//   is unk_id are concatenated into one string. That includes a vocabulary token whose id is
//   unk_id ("<unk>" written in the text is matched by the trie like any token).
// * Lookup. Each string is looked up again as a whole (tokenizers' token_to_ids). A fused run can
//   spell a real token; otherwise, with byte_fallback and when every byte of the run has its
//   <0xXX> token, each byte becomes that token, all of them with the offsets of the whole run;
//   otherwise the run is one unk token.
// * Empty-string tokens never match (the common-prefix search yields only non-empty keys), so the
//   trie need not hold them; they still count towards min_score through `scores`.
//
// Performance. The cost is one common-prefix walk per character start, and what dominates it is
// mispredicted branches (where each walk ends, whether a node holds a key, whether an offer wins),
// not cache misses: the 1 MB trie of T5 and the 9 MB trie of XLM-R run at about the same speed.
// Tried and rejected (model_driver --bench, cachegrind on 150k English pieces):
//   * branch-free offers (conditional moves): more instructions, barely fewer mispredictions, slower;
//   * walking four character starts in lock step, offers applied afterwards in order (to overlap
//     the trie loads): about 1.5x slower, the bookkeeping costs more than the overlap saves.
// Kept: a per-thread cache of whole results for pieces of up to 24 bytes. Real text repeats its
// words (T5 and XLM-R pre-tokens are words with a leading U+2581); a hit is one hash and one
// 64-byte line. 16384 entries hit 83% of English pieces in one pass (4096: 73%); against 4096
// they cut the model's instructions and mispredictions by about 30% on English, 8% on the
// multilingual UDHR. (WordPiece measured slower with the same cache: see wordpiece.h.) On the
// ids-only path HfEngine answers most words before this cache, from the thread's ShortPieceCache.
//
// Bounds: time O(n * L) per piece of n bytes, L the longest token in bytes (one common-prefix walk
// per character start, each at most min(n - s, L) steps), plus O(n) for the back-trace. Memory:
// per-thread scratch of 20 bytes per piece byte, kept between calls (grown, never shrunk), and a
// 1 MiB per-thread word cache. Trie values >= n_ids count as absent and every table read is
// checked, so a damaged table gives wrong tokens, never a bad read. Pieces must be shorter than
// 2^32 - 1 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/double_array.h"
#include "models/hf_model.h"
#include "models/word_cache.h"

namespace crayon {

struct UnigramOptions {
  int32_t unk_id = -1;  // -1: no unk token
  bool byte_fallback = false;
};

// Thrown where tokenizers returns UnigramError::MissingUnkId: a character no token covers (or a
// fused run no token spells) while the model has no unk id.
class UnigramMissingUnk : public std::runtime_error {
 public:
  UnigramMissingUnk() : std::runtime_error("Encountered an unknown token but `unk_id` is missing") {}
};

class UnigramModel final : public HfModel {
 public:
  // vocab: token UTF-8 -> id (for duplicated strings, the id tokenizers' token_to_ids keeps: the
  // last); scores[id] for every id < n_ids. Throws std::invalid_argument when unk_id >= n_ids.
  UnigramModel(DoubleArrayView vocab, const double* scores, uint32_t n_ids, UnigramOptions options);

  uint32_t n_ids() const override { return n_ids_; }
  const UnigramOptions& options() const { return options_; }
  double min_score() const { return min_score_; }
  // Finds the smallest score (one pass over the scores); the owner calls it once before the first
  // encode (HfEngine::ready), so loading stays O(1).
  void prepare();

  // May throw UnigramMissingUnk (only when options.unk_id is -1).
  void encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const override;
  // The same without the per-thread word cache.
  void encode_word_uncached(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const;
  // The test oracle: tokenizers' loops as written, every substring looked up whole, strings built
  // and fused back to front, then looked up again.
  void encode_word_reference(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const;

 private:
  // The id of exactly this key, or -1 (absent, or an id >= n_ids).
  int64_t lookup(const uint8_t* s, size_t n) const;
  // Appends the tokens of the fused unk run piece[start, end).
  void emit_unknown(const uint8_t* piece, uint32_t start, uint32_t end, std::vector<HfToken>& out) const;

  DoubleArrayView vocab_;
  const double* scores_ = nullptr;
  uint32_t n_ids_ = 0;
  UnigramOptions options_;
  double min_score_ = 0;
  double unk_score_ = 0;
  int64_t byte_id_[256];     // id of "<0xXX>" per byte, -1 when absent
  WordCache<16384> cache_;  // 1 MiB per thread
};

}  // namespace crayon
