// The tokenizer.json engine: one sequence through the `tokenizers` pipeline up to the model.
//
//   text ──non-normalized added tokens──> [text | token | ...]           (original offsets)
//        each text split ──normalizer chain──> normalized text + per-byte alignment to the original
//                        ──normalized added tokens──> [text | token | ...]
//        each text split ──pre-tokenizer steps──> pieces (empty pieces dropped)
//                                                 ByteLevel: optional prefix space, GPT-2 split,
//                                                 then the piece is bytes for the model
//                                                 Metaspace (last step): spaces shown as U+2581,
//                                                 optional U+2581 prefix, optional split before each
//        each piece ──model (hf_model.h: BPE, WordPiece, Unigram, WordLevel)──> tokens
//   ──> ids, [start, end) byte offsets in the original, word index (= index of the split)
//
// What happens after the model (post-processing, truncation, padding, char offsets) is policy and
// lives in Python (crayon_hf/_hf). Decoding lives there too.
//
// Offsets follow tokenizers' alignment rule: every byte of a normalized string carries the
// original byte range of the character it came from, and a token covering normalized bytes
// [a, b) maps to [align[a].first, align[b - 1].second). Without a normalizer (or when the
// normalizer leaves a split unchanged) the alignment is implicit: a byte's range is its
// character's range, so no per-byte array is built on the hot path.
//
// Components the engine composes are small interfaces (TextNormalizer, PieceSplitter) built by
// hf_components.cc from a tokenizer.json description; anything not implemented there is refused
// at load and the Python face falls back to the real `tokenizers` for the whole tokenizer.
//
// Thread safety: immutable after construction; encode uses thread_local scratch only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engines/added_tokens.h"
#include "core/cartridge.h"
#include "models/hf_bpe.h"
#include "engines/tiktoken_engine.h"
#include "text/piece_blocks.h"

namespace crayon {

using ByteRanges = std::vector<std::pair<uint32_t, uint32_t>>;

// A normalizer chain. apply() rewrites `text` (whose byte i has original range align[i]) in place;
// returns false, touching nothing, when the text is already normalized (the common fast path).
class TextNormalizer {
 public:
  virtual ~TextNormalizer() = default;
  virtual bool apply(std::string& text, ByteRanges& align) const = 0;
  // Quick check on the original text: true when apply() would certainly change nothing.
  virtual bool is_identity(std::string_view text) const = 0;
  // The hot path for original text: when normalizing it maps every character to one character of
  // the same byte length (so every byte keeps its character's alignment), writes the result to
  // `out` and returns true; false: call apply(). The default never takes it.
  // `separators_left` (may be null): a BertNormalizer that puts spaces around CJK chars may leave them
  // out, setting *separators_left, when the caller then splits with PieceSplitter::split_isolating_cjk
  // (bert.h, normalize_bert_same_length).
  // `resume` (may be null): where it returns false, set to a position from which apply_text may
  // take the text up, `out` then holding the normalized bytes of what comes before (0: nowhere).
  virtual bool apply_same_length(std::string_view text, std::string& out, bool* separators_left = nullptr,
                                 size_t* resume = nullptr) const {
    if (resume != nullptr) *resume = 0;
    return false;
  }
  // For ids only: the normalized text of original text without its alignments, written to `out`
  // (true); false: call apply(). The default never takes it. `from`: the resume position a failed
  // apply_same_length gave on this text and `out` (its bytes before it are kept), or 0.
  virtual bool apply_text(std::string_view text, std::string& out, size_t from = 0) const { return false; }
};

// A pre-tokenizer that only splits: appends [start, end) sub-ranges of `text` (non-empty).
class PieceSplitter {
 public:
  virtual ~PieceSplitter() = default;
  virtual void split(std::string_view text, ByteRanges& pieces) const = 0;
  // BertPreTokenizer only (splits_bert()): split() with each CJK char a piece of its own, as the
  // spaces a BertNormalizer puts around them would make it.
  virtual bool splits_bert() const { return false; }
  virtual void split_isolating_cjk(std::string_view text, ByteRanges& pieces) const { split(text, pieces); }
  // Splitters whose pieces tile the text (a hand-written scanner) can also hand them out one at a
  // time: then streams() is true and piece_end(text, pos) is the end of the piece at pos.
  virtual bool streams() const { return false; }
  virtual size_t piece_end(std::string_view text, size_t pos) const { return text.size(); }
  // A streaming splitter whose pieces the block pre-tokenizer finds (text/piece_blocks.h): sets
  // `out` and returns true; HfEngine's streaming path then takes its pieces 64 bytes at a time.
  virtual bool block_pattern(PieceBlocks::Pattern& out) const { return false; }
  // The hand-written scanner of an Isolated, not inverted Split by a regex (kNone otherwise):
  // HfEngine recognises sequences of such Splits that stream together (DeepSeek-V3's).
  virtual Regex::Scanner isolated_scanner() const { return Regex::Scanner::kNone; }
};

struct PreTokenizerStep {
  enum class Kind : uint8_t { kSplit, kByteLevel, kMetaspace };
  // kUnconditional is not a tokenizers scheme: it stands for a Prepend normalizer (see
  // sentencepiece_shortcut in conversion/hf_json.py), which prepends even before a space.
  enum class Prepend : uint8_t { kAlways, kFirst, kNever, kUnconditional };
  Kind kind = Kind::kSplit;
  std::shared_ptr<const PieceSplitter> splitter;  // kSplit; for kByteLevel the GPT-2 split or null
  bool add_prefix_space = false;                  // kByteLevel
  std::string replacement;                        // kMetaspace: one character, UTF-8
  Prepend prepend_scheme = Prepend::kAlways;      // kMetaspace
  bool split = true;                              // kMetaspace
};

struct HfPipeline {
  std::shared_ptr<const TextNormalizer> normalizer;  // null: none
  // Byte-level BPE: exactly one kByteLevel step. Other models: no kByteLevel step, and a
  // kMetaspace step only as the last one.
  std::vector<PreTokenizerStep> pre_tokenizers;
  std::vector<AddedToken> added_raw;         // normalized=false tokens
  std::vector<AddedToken> added_normalized;  // normalized=true tokens, content normalized
  // Use the sets compiled into the cartridge (HADR, HADN) instead of the two lists, which are then
  // empty: set when no token was added or changed since the cartridge was written.
  bool added_from_cartridge = false;
};

// The result of one sequence. Token strings equal the vocabulary's except for added tokens,
// whose string is the matched text (with any stripped whitespace): those are listed in
// `token_text`.
//
// Two knobs set by the caller before encode() (clear() keeps them):
// - `with_offsets = false` asks for ids only: starts, ends, words and token_text stay empty and
//   the streaming loops skip the character-boundary work. The ids are the same; a caller that
//   later needs offsets encodes the text again with offsets (the engine is deterministic).
// - `limit`: the engine may stop once it has produced at least `limit` tokens. It stops only
//   between pieces (or added-token splits), and pieces are cut from the whole text, so the tokens
//   it produced are exactly the first ones of the full encoding (BPE encodes each piece alone).
//   Callers that truncate to k tokens pass k + 1, so "longer than k" is still decided exactly.
// The owners (process-unique, from new_memo_owner) under which an engine keeps whole words' ids
// in the thread's ShortPieceCache: words as they are, and words with a Metaspace replacement
// prepended. 0: the engine keeps none there.
struct WordOwners {
  uint64_t plain = 0;
  uint64_t prefixed = 0;
};

struct RawEncoding {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> starts;  // byte offsets in the original text
  std::vector<uint32_t> ends;
  std::vector<uint32_t> words;
  std::vector<std::pair<uint32_t, std::string>> token_text;  // (token index, string)
  bool with_offsets = true;
  size_t limit = static_cast<size_t>(-1);
  void clear() { ids.clear(); starts.clear(); ends.clear(); words.clear(); token_text.clear(); }
  // The string of the next token, where it is not the vocabulary's. Kept with offsets only: a
  // caller of ids alone encodes the text again, with offsets, for anything else it reads.
  void note_text(std::string_view text) {
    if (with_offsets) token_text.emplace_back(static_cast<uint32_t>(ids.size()), std::string(text));
  }
  bool full() const { return ids.size() >= limit; }
  // Room for `more` tokens past the current ones.
  void reserve_more(size_t more) {
    const size_t want = ids.size() + more;
    ids.reserve(want);
    if (!with_offsets) return;
    starts.reserve(want);
    ends.reserve(want);
    words.reserve(want);
  }
  void push(uint32_t id, uint32_t start, uint32_t end, uint32_t word) {
    ids.push_back(id);
    if (!with_offsets) return;
    starts.push_back(start);
    ends.push_back(end);
    words.push_back(word);
  }
};

// The model of a tokenizer.json cartridge.
enum class HfModelKind : uint32_t {
  kBpeBytes = 0,   // BPE behind a ByteLevel pre-tokenizer: the trie holds token bytes
  kBpeChars = 1,   // BPE over characters (SentencePiece style): the trie holds token strings
  kWordPiece = 2,
  kUnigram = 3,
  kWordLevel = 4,
};

// HFHD: fixed parameters of a tokenizer.json cartridge.
struct HfHeader {
  uint32_t engine;        // kEngineHfBpe (every tokenizer.json cartridge; the name is historical)
  uint32_t n_ids;         // every id is < n_ids
  int32_t unk_id;         // -1 when none
  uint32_t flags;         // kHfFuseUnk | kHfIgnoreMerges | kHfByteFallback
  uint64_t merge_capacity;  // BPE: entries of HMRG; 0 otherwise
  uint32_t model;         // HfModelKind (0 in cartridges written before there were others)
  uint32_t max_input_chars_per_word;  // WordPiece
};
static_assert(sizeof(HfHeader) == 32, "HFHD is 32 bytes");
constexpr uint32_t kEngineHfBpe = 2;
constexpr uint32_t kHfFuseUnk = 1u, kHfIgnoreMerges = 2u, kHfByteFallback = 4u;
// The fast path's rank table spells every token of the vocabulary: a piece that is a token is
// that token's rank, so ignore_merges needs no lookup of its own in front of it.
constexpr uint32_t kHfFastSpellsAll = 8u;

// What the converter hands over. Vocabulary tokens are given as bytes: for byte-level BPE the
// byte-level characters mapped back (tokens outside the byte-level alphabet have no bytes and are
// left out), for the other models their UTF-8.
struct HfSource {
  HfModelKind kind = HfModelKind::kBpeBytes;
  std::vector<std::pair<std::string, uint32_t>> byte_tokens;  // bytes -> id (one entry per key)
  std::vector<HfMerge> merges;                                 // BPE: in list order
  std::vector<double> scores;                                  // Unigram: one per id
  uint32_t max_input_chars_per_word = 0;                       // WordPiece
  uint32_t n_ids = 0;
  HfBpeOptions options;  // unk_id, fuse_unk, byte_fallback, ignore_merges, prefix, suffix
  std::string meta_json;       // META: the pipeline description for the Python face
  std::string tokenizer_json;  // TJSN: the source tokenizer.json, for save() and the fallback
  std::string vocab_strings;   // VSTR: token strings by id, a JSON array (null for gaps)
  // What the ByteLevel decoder makes of each id (HDTO offsets / HDTB bytes / HDPR presence);
  // byte-level BPE only.
  std::vector<std::string> decode_bytes;
  std::vector<uint8_t> decode_present;
  // The added tokens as the engine matches them (see HfPipeline), compiled into HADR / HADN.
  bool compile_added = false;
  std::vector<AddedToken> added_raw;
  std::vector<AddedToken> added_normalized;
  // Sections the converter prepared itself (the added tokens' JSON, Precompiled charsmaps),
  // written as given, with the required flag.
  std::vector<std::pair<uint32_t, std::string>> extra_sections;
};

// Builds the cartridge image. Throws std::invalid_argument on inconsistent input.
std::string build_hf_cartridge(const HfSource& source);

// An added token in a batch for the stages: its id, how many bytes of text it covers, and
// whether its token string is that text (RawEncoding::token_text).
struct HfAddedAt {
  uint32_t id;
  uint32_t len;
  bool text;
};

class HfEngine {
 public:
  // O(1) in the vocabulary (plus the added tokens it is given): checks HFHD and the sections'
  // sizes against it, keeps pointers into the mapping.
  HfEngine(std::shared_ptr<const Cartridge> cartridge, HfPipeline pipeline);
  // The work deferred from load, done once before the tables are first read: the checksum
  // (memoized per file identity), the O(n_ids) table checks, and the model's precomputations
  // that scan its tables. Throws CartridgeError on a damaged file, on this and every later call.
  // Thread-safe. Everything except n_ids / model_kind / is_byte_level needs it to have succeeded;
  // the Python binding calls it on first use, C++ callers call it themselves.
  void ready() const;
  // The O(n_ids) checks ready() runs (once per file identity): HRID ids in range, the nested
  // tiktoken tables, decode offsets in order, HGLU sorted, the compiled added tokens (HADR, HADN)
  // inside their sections.
  void check_tables() const;

  const Cartridge& cartridge() const { return *cartridge_; }
  const HfModel& model() const { return *model_; }
  HfModelKind model_kind() const { return kind_; }
  const HfBpeModel* bpe() const { return bpe_.get(); }  // null for the other models
  uint32_t n_ids() const { return model_->n_ids(); }
  bool has_fast_path() const { return bpe_ && bpe_->has_fast_path(); }
  int64_t fast_rank_step() const { return bpe_ ? bpe_->uniform_rank_step() : -1; }  // after ready()
  bool is_byte_level() const { return kind_ == HfModelKind::kBpeBytes; }

  // The string encodings show for `id` (VSTI: the model's token, else the added token's text),
  // read in place so that the first encode after a load parses no vocabulary. Returns false when
  // the cartridge has no VSTI (has_token_strings()) or `id` has no string. Each read is checked
  // against the section (CartridgeError on a damaged one).
  bool token_string(uint32_t id, std::string_view* out) const;
  bool has_token_strings() const { return vsti_offsets_ != nullptr; }
  uint32_t token_string_count() const { return vsti_n_; }

  // ByteLevel decoding (byte-level cartridges only): appends the bytes of every id that has a
  // token, skipping ids whose `skip` entry is 1 (skip may be empty). Ids without a token are
  // dropped, as in tokenizers.
  void decode_byte_level(const uint32_t* ids, size_t n, std::string_view skip, std::string& out) const;

  // One sequence up to the model. `encode_special_tokens`: special added tokens are text.
  void encode(std::string_view text, bool encode_special_tokens, RawEncoding& out) const;

  // The batch stages (engines/batch_stages.h, the CUDA engine) for this face: byte-level BPE on
  // the fast path whose text streams from a scanner (engines/hf_batch.cc runs them on a batch).
  //
  // The tiktoken engine whose ranks the stages produce, or null where this engine has no such
  // path (other models, merge lists that are not rank-BPE, pre-tokenizers that do not stream,
  // normalized added tokens, ignore_merges, bytes without a token).
  std::shared_ptr<const TiktokenEngine> piece_engine() const;
  // Writes text (normalized where the normalizer keeps every length) to text_out and one mark per
  // byte to marks; appends each added token as (byte offset in text, what it is). Returns false
  // when the document must go through encode() instead (its normalization changes lengths); then
  // every byte is marked kMarkDropped and nothing is appended.
  bool mark_pieces(std::string_view text, bool encode_special_tokens, uint8_t* text_out, uint8_t* marks,
                   std::vector<std::pair<uint32_t, HfAddedAt>>& added) const;
  // The raw encoding of `text` from what the stages made of it: values[0, n) are ranks of
  // piece_engine(), or n_ranks + k for added[k]. As encode() with out.with_offsets and out.limit,
  // except that word indexes are 0 (the batch that holds it is not complete).
  void raw_from_pieces(std::string_view text, const uint32_t* values, size_t n, const HfAddedAt* added,
                       size_t n_added, RawEncoding& out) const;

 private:
  void encode_text_split(std::string_view text, uint32_t base, bool encode_special_tokens,
                         RawEncoding& out, uint32_t& word) const;
  void encode_streaming(std::string_view text, uint32_t base, RawEncoding& out, uint32_t& word) const;
  // encode_streaming when the model is byte-level BPE on a fast path: each piece goes straight to
  // the tiktoken engine (and its piece cache), without HfToken vectors; same output.
  template <bool kOffsets>
  void encode_streaming_fast(std::string_view text, uint32_t base, RawEncoding& out, uint32_t& word) const;
  // Its loop over any pieces of `text`: next(start, end) gives the next piece or returns false.
  template <bool kOffsets, class NextPiece>
  void encode_pieces_fast(std::string_view text, uint32_t base, RawEncoding& out, uint32_t& word,
                          NextPiece&& next) const;

  std::shared_ptr<const Cartridge> cartridge_;
  HfPipeline pipeline_;
  HfModelKind kind_ = HfModelKind::kBpeBytes;
  std::unique_ptr<HfBpeModel> bpe_;
  std::unique_ptr<HfModel> other_;  // WordPiece, Unigram, WordLevel
  const HfModel* model_ = nullptr;
  AddedTokenSet added_raw_;
  AddedTokenSet added_normalized_;
  size_t byte_level_step_ = 0;  // index of the kByteLevel step; pre_tokenizers.size() when none
  const PreTokenizerStep* metaspace_ = nullptr;  // the kMetaspace step, when there is one
  int64_t unk_text_ = -1;  // Unigram: the unk id, whose tokens show the text they cover
  // The one splitter of a pipeline that is just "scanner, then bytes" (no prefix space, no other
  // step): then text splits without a normalizer change stream straight into the model.
  const PieceSplitter* streaming_ = nullptr;
  std::shared_ptr<const PieceSplitter> sequence_stream_;  // owns streaming_ for a sequence of Splits
  bool streaming_blocks_ = false;  // streaming_->block_pattern(streaming_pattern_) holds
  PieceBlocks::Pattern streaming_pattern_ = PieceBlocks::Pattern::kR50k;
  std::shared_ptr<const TiktokenEngine> fast_;  // set when the merge list is tiktoken-equivalent
  const uint32_t* decode_offsets_ = nullptr;  // n_ids + 1 entries into decode_bytes_
  const uint8_t* decode_bytes_ = nullptr;
  const uint8_t* decode_present_ = nullptr;
  const uint32_t* rank_to_id_ = nullptr;  // HRID, fast_->n_ids() entries
  const uint32_t* vsti_offsets_ = nullptr;  // VSTI: vsti_n_ + 1 offsets into vsti_blob_
  const uint8_t* vsti_present_ = nullptr;
  const char* vsti_blob_ = nullptr;
  uint32_t vsti_n_ = 0;
  uint32_t vsti_blob_size_ = 0;
  FirstUse first_use_;
  WordOwners word_owners_;  // set for models other than byte-level BPE (encode_text_split's words)
  // The normalizer may leave out the spaces around CJK chars (TextNormalizer::apply_same_length):
  // the only pre-tokenizer is BertPreTokenizer and no added token is matched on normalized text.
  bool separators_ok_ = false;
  // A Metaspace step prepends "first" by the original offset of a piece: ids then depend on the
  // alignment, and text a normalizer changes keeps it (TextNormalizer::apply_text is not taken).
  bool ids_read_alignment_ = false;
};

}  // namespace crayon
