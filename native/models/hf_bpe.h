// The BPE model of HuggingFace `tokenizers` (models::BPE), in two alphabets.
//
//   piece --ignore_merges and piece is a token?---------------> [token]
//         --piece is a token that encodes to itself (SELF)?--> [token]   (exact shortcut)
//         --otherwise--> symbols: one per byte (byte-level) or per character (SentencePiece
//                        style), continuing_subword_prefix on all but the first, end_of_word_suffix
//                        on the last; an unknown character becomes <0xXX> tokens (byte_fallback),
//                        or unk (fused when fuse_unk), or vanishes when there is no unk token
//                    --> merge loop: repeatedly merge the adjacent pair of symbols that is in the
//                        merge table with the lowest rank, leftmost on ties
//
// Byte-level vocabularies. With a ByteLevel pre-tokenizer every character the model sees is one of
// 256 stand-ins for one byte, so "one symbol per character" is "one symbol per byte", and a
// token's characters map back to bytes one to one. Working on bytes lets the vocabulary live in
// the same double-array trie as the tiktoken engine's, and keeps the byte-level alphabet out of
// the hot loop. Tokens with a character outside the alphabet can never be produced from a
// byte-level piece and are left out of the trie.
//
// Character vocabularies (Llama 2, Mistral, Gemma, Phi-3: `char_level`). The piece is the UTF-8 of
// the normalized text and the trie holds every token's UTF-8. SentencePiece-style pipelines hand
// the model whole sentences (no pre-tokenizer splits them), so the merge loop would run over
// thousands of symbols. It does not have to: a merge joins a symbol ending in character c to one
// starting with U+2581 only if the merge list has such a pair (A, B), A ending in c, B starting
// with U+2581. When c is a known single-character token outside that "glue" set, nothing ever
// merges across the boundary c|U+2581, so the sentence splits there into words whose results
// concatenate to the sentence's (merge order within each word is unchanged). The same holds on
// both sides of an "inert" ASCII character, one whose symbol (its token, or its <0xXX> byte token)
// is in no merge at all: Llama 2's digits and its newline's <0x0A>, for instance, so numbers and
// hard-wrapped lines do not glue words together. The cartridge stores the glue set (HGLU); inert
// characters are found at load from the merge table. Segmenting is off when characters can be
// dropped (no unk token and no complete byte fallback: tokenizers then shifts every later offset
// of the sentence), with ignore_merges, or with prefixes and suffixes.
//
// Why this differs from tiktoken's BPE (bpe.h). tiktoken merges any adjacent pair whose
// concatenation is a token, by that token's rank. `tokenizers` merges only the pairs listed in
// `merges`, by list position: a vocabulary may list several merges for one token (transformers'
// TikTokenConverter does) or none, and tokens need not encode to themselves. So this model keeps
// the merge table itself and follows its order exactly; the shortcut for whole-token pieces is
// taken only for tokens whose own encoding was checked at build time (the SELF bitmap).
//
// Merge table: open addressing (linear probing from pair_slot(left, right, capacity), the same
// fixed hash as the backtracking encoder's pair table), at most 3/4 full. When `merges` lists a
// pair twice, the later entry wins, as in `tokenizers`.
//
// Pieces (or words) of up to 24 bytes are remembered in a per-thread cache (4096 entries of 64
// bytes, tagged with the model), as `tokenizers` caches words: real text repeats its words, and a
// hit costs one hash and one cache line instead of trie walks.
//
// Bounds: the merge loop is O(n log n) in the piece length (a binary heap with stale entries
// skipped); short pieces use a simple scan, which gives the same result. Every id read from the
// tables is checked against n_ids, so a damaged cartridge gives wrong ids, never a bad read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/double_array.h"
#include "core/rank_step.h"
#include "models/hf_model.h"
#include "models/word_cache.h"

namespace crayon {

class TiktokenEngine;
struct Symbols;  // the merge loop's working list (hf_bpe.cc)

struct HfMergeEntry {
  uint32_t left;
  uint32_t right;
  uint32_t rank;    // position in the merge list; kEmpty marks a free slot
  uint32_t merged;  // id of the token the merge produces
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
};
static_assert(sizeof(HfMergeEntry) == 16, "HfMergeEntry is stored in cartridges as 16 bytes");

// One merge of the list, in list order (rank = index).
struct HfMerge {
  uint32_t left;
  uint32_t right;
  uint32_t merged;
};

// In a character vocabulary's fast-path rank map (HRID): a rank that stands for no token (a byte
// or the start of a character the vocabulary lacks, see build_fast_path in hf_engine.cc).
constexpr uint32_t kSyntheticRank = 0xFFFFFFFEu;

// Builds the merge table; later duplicates of a pair replace earlier ones.
std::vector<HfMergeEntry> build_hf_merge_table(const std::vector<HfMerge>& merges);

struct HfBpeOptions {
  int32_t unk_id = -1;         // -1: no unk token (unknown bytes are dropped)
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::string prefix;          // continuing_subword_prefix, as bytes
  std::string suffix;          // end_of_word_suffix, as bytes
  bool char_level = false;     // symbols are UTF-8 characters, the trie holds token strings
  bool byte_fallback = false;  // char_level: unknown characters become <0xXX> tokens
};

// Where a character vocabulary may cut a piece before U+2581 (see the top of this file): never
// after a character in `glue` (sorted code points) or after an unknown one.
struct HfSegmentation {
  bool enabled = false;
  const uint32_t* glue = nullptr;
  size_t n_glue = 0;
};

class HfBpeModel final : public HfModel {
 public:
  HfBpeModel() = default;
  // `self_encodes` may be null (no shortcut). Computes the per-byte symbol tables.
  HfBpeModel(DoubleArrayView vocab, const HfMergeEntry* merges, uint64_t merge_capacity,
             const uint8_t* self_encodes, uint32_t n_ids, HfBpeOptions options,
             HfSegmentation segmentation = {});

  uint32_t n_ids() const override { return n_ids_; }
  const HfBpeOptions& options() const { return options_; }
  const DoubleArrayView& vocab() const { return vocab_; }

  // Appends the tokens of piece[0, n) (n >= 1) to out.
  void encode_word(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const override;
  // Character vocabularies that segment sentences (see the top of this file): whether a word may
  // end with the character c[0, n) (valid UTF-8), i.e. a cut is allowed between it and U+2581; and
  // one word's tokens (no segmentation inside it).
  bool segments() const { return seg_.enabled; }
  const HfSegmentation& segmentation() const { return seg_; }
  // Precomputes what needs a pass over the merge or rank tables (the inert ASCII characters,
  // id_of_rank's step); the owner calls it once, after the cartridge's checks, before the first
  // encode (HfEngine::ready), so loading stays O(1).
  void prepare();
  bool may_end_word(const uint8_t* c, size_t n) const;
  // Whether a word boundary may sit on either side of the character led by byte b (an inert
  // ASCII character, see the top of this file); false for every non-ASCII lead byte.
  bool inert(uint8_t b) const { return b < 0x80 && ascii_inert_[b]; }
  void encode_one_word(const uint8_t* word, size_t n, std::vector<HfToken>& out) const { encode_cached(word, n, out); }
  // The ids of encode_one_word(word, n), appended to `ids`, for callers that need no offsets:
  // straight from the fast path's ranks where they alone say the ids (a character the vocabulary
  // lacks comes back as synthetic ranks, whose bytes' <0xXX> tokens are its ids when the
  // vocabulary has all 256), else through encode_one_word.
  void encode_word_ids(const uint8_t* word, size_t n, std::vector<uint32_t>& ids) const;
  // The same without the per-thread word cache (nor segmentation).
  void encode_word_uncached(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const;
  // The same without the whole-token shortcuts: the plain algorithm (the test oracle, and what
  // computes the SELF bitmap).
  void encode_word_merging(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const;

  // Routes the merge loop through a tiktoken engine whose ranks reproduce this merge list exactly
  // (see hf_engine.cc, build_fast_path); rank_to_id maps its ranks back to ids. The engine must
  // outlive the model.
  // In a byte vocabulary, bytes without a token of their own never take the fast path; in a
  // character vocabulary, characters it lacks show as kSyntheticRank (see encode_fast).
  // `spells_all`: every token of the vocabulary has a rank, so with ignore_merges the engine's own
  // whole-piece lookup answers for the vocabulary's.
  void set_fast_path(const TiktokenEngine* engine, const uint32_t* rank_to_id, uint32_t n_ranks, bool spells_all);
  bool has_fast_path() const { return fast_ != nullptr; }
  // The fast path's parts, for engines that stream pieces through it without HfToken (see
  // HfEngine::encode_streaming_fast): the engine, its rank -> id map (n_ranks entries), and
  // whether some byte has no token (pieces holding one must take encode_word).
  const TiktokenEngine* fast_engine() const { return fast_; }
  const uint32_t* rank_to_id() const { return rank_to_id_; }
  uint32_t n_ranks() const { return n_ranks_; }
  // rank_to_id()[r] for r < n_ranks(). Above the single bytes most vocabularies number their
  // tokens in merge order, so ranks and ids run in step there: prepare() finds where, and those
  // ranks map by an addition instead of a load from a table of up to 800 KB (a cache miss per
  // token on new text).
  uint32_t id_of_rank(uint32_t r) const { return r < rank_step_from_ ? rank_to_id_[r] : r + rank_step_; }
  // Every id is its rank plus one step (after prepare()): ids_of_ranks adds it, reading no table.
  // The step, or -1 where some ranks map through the table.
  int64_t uniform_rank_step() const { return fast_ != nullptr && rank_step_from_ == 0 ? int64_t{rank_step_} : -1; }
  // id_of_rank over ids[0, n) in place, for the fast path's ids-only loops; false (ids then
  // partly mapped) when some rank is n_ranks() or more, which only a damaged cartridge gives.
  // Without a branch per token: single bytes (in the table) and merged tokens (the step) mix
  // in text without a pattern a predictor learns, and the branch cost 2-3 ns per token.
  bool ids_of_ranks(uint32_t* ids, size_t n) const {
    const uint32_t from = rank_step_from_, step = rank_step_, n_ranks = n_ranks_;
    // Every id is its rank plus the step (build_fast_path numbers byte ranks by id where it can).
    if (from == 0) return add_rank_step(ids, n, step, n_ranks);
    const uint32_t* const table = rank_to_id_;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = ids[i];
      bad |= static_cast<uint32_t>(r >= n_ranks);
      const uint32_t in_table = 0u - static_cast<uint32_t>(r < from);  // all ones or zero
      const uint32_t t = table[r & in_table];  // table[0] where r is past the table (n_ranks > 0)
      ids[i] = (t & in_table) | ((r + step) & ~in_table);
    }
    return bad == 0;
  }
  bool fast_needs_check() const { return fast_needs_check_; }
  // ignore_merges, and the fast path does not make the vocabulary lookup itself.
  bool lookup_before_fast() const { return options_.ignore_merges && !(fast_ != nullptr && fast_spells_all_); }
  bool byte_missing(uint8_t b) const { return byte_missing_[b]; }

  // The merge of (left, right), or nullptr.
  const HfMergeEntry* find_merge(uint32_t left, uint32_t right) const;

 private:
  int32_t lookup(const std::string& key) const;
  // The fast path's answer for the piece (runs of a character vocabulary's synthetic ranks become
  // their byte-fallback or unk symbols); false, with nothing appended, when a character would be
  // dropped (the merge loop then takes the piece) or the tables are damaged.
  bool encode_fast(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const;
  void encode_cached(const uint8_t* piece, size_t n, std::vector<HfToken>& out) const;
  // Initial symbols (see Symbols in .cc); true when some byte or character was dropped.
  bool byte_symbols(const uint8_t* piece, size_t n, Symbols& sym) const;
  bool char_symbols(const uint8_t* piece, size_t n, Symbols& sym) const;
  // char_level segmentation: may the piece be cut before the U+2581 at `pos` (> 0)?
  bool cut_before(const uint8_t* piece, size_t pos) const;

  DoubleArrayView vocab_;
  const HfMergeEntry* merges_ = nullptr;
  uint64_t merge_capacity_ = 0;
  const uint8_t* self_encodes_ = nullptr;
  uint32_t n_ids_ = 0;
  HfBpeOptions options_;
  const TiktokenEngine* fast_ = nullptr;
  const uint32_t* rank_to_id_ = nullptr;
  uint32_t n_ranks_ = 0;
  uint32_t rank_step_from_ = 0xFFFFFFFFu;  // ranks from here on have id rank + rank_step_ (mod 2^32)
  uint32_t rank_step_ = 0;
  bool fast_needs_check_ = false;  // some byte has no token: scan pieces for one first
  bool fast_spells_all_ = false;
  bool byte_missing_[256] = {};
  WordCache<16384> cache_;     // 1 MiB per thread
  bool plain_symbols_ = true;  // no prefix and no suffix: the shortcut tables apply
  // Symbol id of a byte by position in the piece: [0] only byte, [1] first, [2] middle, [3] last.
  int32_t symbol_[4][256];
  // char_level: the <0xXX> token of each byte (-1: none), and what may precede a segment cut
  // for ASCII characters (other characters are looked up).
  int32_t byte_token_[256];
  bool all_bytes_ = false;
  HfSegmentation seg_;
  bool ascii_cut_[128] = {};
  bool ascii_inert_[128] = {};
};

// The glue set of a character vocabulary (see the top of this file): the last character of every
// merge's left token whose right token starts with U+2581, sorted; `ok` is false when segmenting
// is impossible (U+2581 is not a token, or a left token is not valid UTF-8).
std::vector<uint32_t> compute_glue(const std::vector<HfMerge>& merges, const std::vector<std::string>& token_bytes,
                                   bool* ok);

// The SELF bitmap (one bit per id): bit set when encode_word_merging(bytes of id) == [id].
// `token_bytes[id]` is empty for ids that are not byte-level tokens.
std::vector<uint8_t> compute_self_encodes(const HfBpeModel& model,
                                          const std::vector<std::string>& token_bytes);

}  // namespace crayon
