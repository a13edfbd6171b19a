// The tiktoken-compatible engine: a cartridge holding a rank table, a split pattern and special
// tokens, encoded and decoded with tiktoken 0.14's exact semantics.
//
//   text --special tokens (allowed set)--> segments and special ids
//        segment --pre-tokenize (pattern scanner, or the fancy-regex VM: successive matches,
//                 unmatched text dropped, as tiktoken's find_iter)--> pieces
//        piece --whole piece in vocab? else BPE--> ids
//   ids --token bytes--> bytes
//
// Immutable after construction; every method is safe to call from many threads at once.
// Cartridge sections used (see docs/cartridge.md): TKHD, TOKO, TOKB, TOKK, BPE trie (BTRI),
// special trie (STRI), SPID, SPTO/SPTB, the split regex TKRX (when TKHD.pattern is 5), the
// backtracking encoder's BSPL/BSPR/BSLW/BPAR (optional), and META (read by Python only).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/bpe.h"
#include "models/bpe_backtrack.h"
#include "models/safe_cuts.h"
#include "models/piece_cache.h"
#include "models/short_piece_cache.h"
#include "models/short_token_index.h"
#include "core/cartridge.h"
#include "core/once.h"
#include "text/piece_blocks.h"
#include "text/pretokenize.h"
#include "text/regex.h"
#include "engines/batch_stages.h"
#include "engines/special_tokens.h"

namespace crayon {

enum class TokenKind : uint8_t { kAbsent = 0, kMergeable = 1, kSpecial = 2 };

struct TiktokenSource {
  std::vector<std::pair<std::string, uint32_t>> mergeable;  // token bytes -> rank (== id)
  std::vector<std::pair<std::string, uint32_t>> specials;   // UTF-8 text -> id
  SplitPattern pattern = SplitPattern::kNone;
  // With pattern == kNone: a split regex (tiktoken's pat_str) for the fancy-regex VM, stored in
  // TKRX; empty means no split at all. It must pass tiktoken_regex_refusal.
  std::string regex;
  std::string meta_json;  // stored verbatim in META
};

// Why the engine cannot split with `pat_str` natively (fancy-regex dialect), or "" when it can:
// the RegexError text, or that the pattern can match the empty string (tiktoken then BPE-encodes
// an empty piece and panics; refusing keeps that behaviour on tiktoken).
std::string tiktoken_regex_refusal(std::string_view pat_str);

// Compiles a rank table into a cartridge image. Throws std::invalid_argument on bad input
// (duplicate ids, ids out of range, empty tokens).
std::string build_tiktoken_cartridge(const TiktokenSource& src);

// The largest id space a cartridge may declare (ids are dense array indexes).
constexpr uint32_t kMaxIds = 1u << 26;

class TiktokenEngine {
 public:
  // O(1) in the vocabulary: checks TKHD and every section's size against it, keeps pointers.
  explicit TiktokenEngine(std::shared_ptr<const Cartridge> cartridge);
  // The checks deferred from load, run once before the engine's tables are first read: the file's
  // checksum (memoized per file identity, see check_cartridge_once) and check_tables().
  // Throws CartridgeError on a damaged file, on this and every later call. Thread-safe. Everything
  // but n_ids, pattern, meta_json and the special-token accessors needs it to have succeeded; the
  // Python binding calls it on first use, C++ callers (fuzz targets, tests) call it themselves.
  void ready() const {
    // Guarded like loading: the file may be truncated under the mapping before its first use.
    first_use_.run([this] {
      guard_mapped_reads(cartridge_->label(), [this] { check_cartridge_once(*cartridge_, [this] { check_tables(); }); });
    });
  }
  // The O(n_ids) checks that make the encoders' reads safe: TOKO in order, BSPL/BSPR consistent
  // with the token table. Called by ready(); also by an HfEngine for its nested tiktoken tables.
  void check_tables() const;

  const Cartridge& cartridge() const { return *cartridge_; }
  SplitPattern pattern() const { return pattern_; }
  // True when segments are split by the fancy-regex VM (no hand-written scanner for the pattern).
  bool uses_regex() const { return regex_ != nullptr; }
  uint32_t n_ids() const { return bpe_.n_ids; }
  // Bytes of token `id` < n_ids() without token_bytes()'s checks: after check_tables() every
  // length is a real range of the token bytes (0 for an absent id).
  uint32_t token_length(uint32_t id) const { return bpe_.token_offsets[id + 1] - bpe_.token_offsets[id]; }
  uint32_t n_specials() const { return n_specials_; }
  uint32_t special_id(uint32_t index) const { return special_ids_[index]; }
  // The text of special token `index` (several specials may share one id).
  std::string_view special_text(uint32_t index) const;
  std::string_view meta_json() const;

  // Token bytes of `id`; false when id is not a token.
  bool token_bytes(uint32_t id, std::string_view* out) const;
  TokenKind kind(uint32_t id) const {
    return id < bpe_.n_ids ? static_cast<TokenKind>(kinds_[id]) : TokenKind::kAbsent;
  }

  // Ordinary encoding: the whole text is ordinary text. cached = false bypasses the PieceCache
  // (the tests compare the two).
  void encode_ordinary(std::string_view text, std::vector<uint32_t>& out, bool cached = true) const;
  // Special tokens whose index has allowed[index] != 0 are encoded as themselves; everything else
  // is ordinary text. Returns how many ids the last pre-token produced (0 when the text ends with
  // a special token), which encode_with_unstable needs.
  size_t encode(std::string_view text, const std::vector<uint8_t>& allowed, std::vector<uint32_t>& out) const;
  // The first special token occurrence whose index is flagged in `set` (all when set is empty and
  // all_specials is true).
  SpecialMatch find_special(std::string_view text, const std::vector<uint8_t>& set) const;

  // Pre-tokenization alone, for the batch stages (engines/batch_stages.h): one mark per byte of
  // text (marks[i] for text[i]: kMarkPiece where a piece starts, kMarkSpecial where an allowed
  // special token does, kMarkDropped on text no piece covers, kMarkInside elsewhere), and each
  // special token's (base + offset, id) appended to `specials`.
  void mark_pieces(std::string_view text, const std::vector<uint8_t>& allowed, uint8_t* marks, uint64_t base,
                   std::vector<SpecialAt>& specials) const;

  // One piece, no pre-tokenization: the whole piece if it is a token, else BPE (short pieces of
  // several tokens go through the calling thread's PieceCache first). `not_a_token`: the caller
  // knows the piece is no token (ShortTokenIndex::kNoToken), so the whole-piece walk is skipped.
  // `cache_key`: the piece's PieceCache key when the caller made it (and prefetched its slot).
  // `caches` and `hot`: PieceCache::local() and ShortPieceCache::local(), where the caller has them
  // (a thread-local lookup per piece saved; `hot` serves the parts of CJK pieces, encode_cut).
  void encode_piece(const uint8_t* piece, size_t n, std::vector<uint32_t>& out, bool not_a_token = false,
                    const PieceCache::Key* cache_key = nullptr, PieceCache* caches = nullptr,
                    ShortPieceCache* hot = nullptr) const;
  // The same without the cache (the slow twin the cache is tested against).
  void encode_piece_uncached(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const;
  // The thread's ShortPieceCache in front of encode_piece. Callers find pieces ahead, ask
  // short_cached whether a piece goes through the cache (`keyable`: ShortPieceCache::kMaxLen
  // readable bytes at `piece`), make its key with their tag (hot.tag_of(memo_owner()), once per
  // call) and prefetch its slot, then call encode_piece_keyed. ASCII-led pieces, and other pieces
  // of up to kWideLimit bytes (0: none; see kR50kWideLimit): long runs of CJK characters rarely
  // fit a slot and rarely repeat within a slot's lifetime (measured: probing them cost Chinese
  // text 3-5%).
  template <size_t kWideLimit = 0>
  static bool short_cached(const uint8_t* piece, size_t n, bool keyable) {
    if constexpr (kWideLimit == 0) return n <= ShortPieceCache::kMaxLen && keyable && piece[0] < 0x80;
    return keyable && n <= (piece[0] < 0x80 ? ShortPieceCache::kMaxLen : kWideLimit);
  }
  // The wide limit under r50k's pattern (GPT-2 and the folders that share its pre-tokenizer),
  // which cuts combining marks and other non-letters off the letters of most scripts into short
  // pieces of their own, mostly repeats (two thirds of gpt2's pieces on the 39 scripts); none
  // under the others, whose letter runs keep the marks (keyed too, Qwen2's Chinese and Llama 3's
  // 39 scripts were 0.6-0.7% slower, docs/benchmarks.md). A template argument, so that the loop
  // of the other patterns keeps its one test per piece.
  static constexpr size_t kR50kWideLimit = 8;
  // `tokens`: short_tokens(), or null to skip it.
  // `long_key`: the piece's PieceCache key, its slot prefetched, when the caller made one;
  // `caches` as for encode_piece.
  void encode_piece_keyed(ShortPieceCache& hot, uint16_t tag, const ShortTokenIndex* tokens,
                          const ShortPieceCache::Key& key, const uint8_t* piece, size_t n,
                          std::vector<uint32_t>& out, const PieceCache::Key* long_key = nullptr,
                          PieceCache* caches = nullptr) const {
    if (hot.find(tag, key, out)) return;
    encode_piece_missed(hot, tag, tokens, key, piece, n, out, long_key, caches);
  }
  // encode_piece_keyed after its probe of `hot` missed.
  void encode_piece_missed(ShortPieceCache& hot, uint16_t tag, const ShortTokenIndex* tokens,
                           const ShortPieceCache::Key& key, const uint8_t* piece, size_t n,
                           std::vector<uint32_t>& out, const PieceCache::Key* long_key = nullptr,
                           PieceCache* caches = nullptr) const {
    const int64_t id = tokens != nullptr ? tokens->find(key) : ShortTokenIndex::kNotHeld;
    if (id >= 0) {
      const uint32_t token = static_cast<uint32_t>(id);
      out.push_back(token);
      hot.put(tag, key, &token, 1);
      return;
    }
    const size_t before = out.size();
    encode_piece(piece, n, out, id == ShortTokenIndex::kNoToken, long_key, caches, &hot);
    hot.put(tag, key, out.data() + before, out.size() - before);
  }
  // The vocabulary's short tokens by their bytes (models/short_token_index.h), built on first use;
  // null when it has none or no split tables. Callers fetch it once per call, not per piece.
  const ShortTokenIndex* short_tokens() const;
  // short_tokens() for a call encoding `text_bytes` through the caches, once this engine's calls
  // have brought kShortTokensAfter bytes or more (this one's included), or once something built
  // it (the short_token_index binding); null before. The index is a counting sort over the whole
  // token table, 5-13 ms and 40% of the instructions of a fresh process's first encode
  // (qwen2_5), worth it over megabytes of new text (+10-16% on English and code in turns with
  // other libraries) but not over a few sentences; a 16 KiB document builds it at once. Pieces
  // encode to the same ids either way (the index only skips walks).
  static constexpr uint64_t kShortTokensAfter = 16 * 1024;
  const ShortTokenIndex* short_tokens_for(size_t text_bytes) const;
  bool short_tokens_in_use() const { return short_tokens_due_.load(std::memory_order_relaxed); }
  uint64_t memo_owner() const { return owner_; }
  // The tables of the per-piece encoder (models/piece_encoder.h), for the batch stages and the
  // CUDA module. Valid once ready() has succeeded.
  const piece::PieceTables& piece_tables() const { return pieces_; }
  const BpeTables& bpe_tables() const { return bpe_; }
  const uint8_t* token_kinds() const { return kinds_; }  // TokenKind per id (n_ids entries)
  // BPE merge loop without the whole-piece shortcut (tiktoken's byte_pair_encode).
  void byte_pair_encode(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const;

  // The ranks of text's pieces under a block pattern, through the thread's caches, appended to
  // out (the tokenizer.json face's byte-level path, ids only, whose pattern is not this engine's
  // own). Stops between pieces soon after out holds `limit` ids. Returns the number of pieces.
  size_t encode_blocks(PieceBlocks::Pattern pattern, std::string_view text, std::vector<uint32_t>& out,
                       size_t limit = static_cast<size_t>(-1)) const;

  // Appends the bytes of `ids` to out; on an unknown id returns false and sets *bad.
  bool decode(const uint32_t* ids, size_t n, std::string& out, uint32_t* bad) const;

  // Mergeable rank of exactly these bytes, else special id, else -1.
  int64_t encode_single_token(std::string_view bytes) const;

  // All mergeable token bytes, sorted bytewise (tiktoken's token_byte_values order).
  std::vector<std::string_view> sorted_mergeable() const;
  // Ids of every mergeable token whose bytes start with `prefix`.
  void tokens_with_prefix(std::string_view prefix, std::vector<uint32_t>& out) const;

  // tiktoken's encode_with_unstable: stable ids and the set of possible completions.
  std::pair<std::vector<uint32_t>, std::vector<std::vector<uint32_t>>> encode_with_unstable(
      std::string_view text, const std::vector<uint8_t>& allowed) const;

 private:
  // The safe cuts for a piece they take apart (null: encode it whole).
  const SafeCuts* cuts_for(const uint8_t* piece, size_t n) const;
  // A piece cuts_for() takes apart: its parts, each named or encoded alone (encode_part).
  // `hot`: ShortPieceCache::local(), or null to look it up.
  void encode_cut(const SafeCuts& cuts, const uint8_t* piece, size_t n, std::vector<uint32_t>& out,
                  ShortPieceCache* hot = nullptr) const;
  // BPE of one part of a cut piece (no whole-piece shortcut), through the ShortPieceCache.
  void encode_part(const SafeCuts& cuts, ShortPieceCache& hot, uint16_t tag, const uint8_t* part, size_t n,
                   std::vector<uint32_t>& out) const;
  void encode_part_uncached(const SafeCuts& cuts, const uint8_t* part, size_t n, std::vector<uint32_t>& out) const;
  // The vocabulary's safe cuts, built on first use (null: no cuts, see SafeCuts::build).
  const SafeCuts* safe_cuts() const;
  void encode_segment(std::string_view seg, std::vector<uint32_t>& out, size_t* last_piece_len, bool cached) const;
  // BPE of a piece of several tokens through the thread's LongPieceCache (pieces up to 256 bytes).
  void encode_long(const uint8_t* piece, size_t n, std::vector<uint32_t>& out, LongPieceCache& cache) const;
  // bpe_encode_multi with this engine's tables (byte pairs built at the first call).
  void bpe(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const;
  // The pieces for_each(f) hands to f(bytes, n), encoded through the ShortPieceCache in a pipeline
  // of three batches of kAhead (encode_segment's and encode_blocks' loop).
  template <size_t kWideLimit, class ForEachPiece>
  void encode_cached(std::string_view seg, std::vector<uint32_t>& out, size_t* last_piece_len,
                     ForEachPiece&& for_each) const;
  // encode_cached with the wide limit of r50k's pattern or none.
  template <class ForEachPiece>
  void encode_cached_for(bool r50k, std::string_view seg, std::vector<uint32_t>& out, size_t* last_piece_len,
                         ForEachPiece&& for_each) const {
    if (r50k) return encode_cached<kR50kWideLimit>(seg, out, last_piece_len, for_each);
    encode_cached<0>(seg, out, last_piece_len, for_each);
  }
  // Calls f(bytes, n) for every piece of a segment (no special tokens inside).
  template <class F>
  void for_each_piece(std::string_view seg, F&& f) const;
  // Splits text at its allowed special tokens: segment(text between them), special(match).
  template <class Segment, class Special>
  void for_each_segment(std::string_view text, const std::vector<uint8_t>& allowed, Segment&& segment,
                        Special&& special) const;

  std::shared_ptr<const Cartridge> cartridge_;
  uint64_t owner_;  // unique per engine: keys the per-thread memo caches
  mutable Once cuts_once_;
  mutable std::unique_ptr<const SafeCuts> cuts_;
  mutable Once short_tokens_once_;
  mutable std::unique_ptr<const ShortTokenIndex> short_tokens_;
  mutable std::atomic<uint64_t> bytes_before_short_tokens_{0};  // short_tokens_for's count
  mutable std::atomic<bool> short_tokens_due_{false};            // that count reached the bound
  mutable Once byte_pairs_once_;
  mutable std::vector<uint32_t> byte_pairs_;  // build_byte_pairs(pieces_), at the first BPE
  SplitPattern pattern_ = SplitPattern::kNone;
  std::unique_ptr<const Regex> regex_;  // set when TKHD.pattern is kPatternRegex
  BpeTables bpe_;
  const uint8_t* kinds_ = nullptr;
  SpecialTokenMatcher specials_;
  const uint32_t* special_ids_ = nullptr;
  uint32_t n_specials_ = 0;
  BacktrackTables backtrack_;
  bool use_backtrack_ = false;
  piece::PieceTables pieces_;  // what models/piece_encoder.h reads: bpe_ and backtrack_'s tables
  const uint32_t* special_text_offsets_ = nullptr;
  const char* special_text_ = nullptr;
  size_t special_text_size_ = 0;
  FirstUse first_use_;
};

}  // namespace crayon
