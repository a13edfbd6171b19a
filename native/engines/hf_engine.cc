#include "engines/hf_engine.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <map>
#include <unordered_map>

#include "core/double_array.h"
#include "core/swar.h"
#include "core/thread_scratch.h"
#include "core/utf8.h"
#include "engines/batch_stages.h"
#include "models/bpe_backtrack.h"
#include "models/short_piece_cache.h"
#include "models/unigram.h"
#include "models/wordlevel.h"
#include "models/wordpiece.h"
#include "text/deepseek_split.h"
#include "text/piece_blocks.h"

namespace crayon {
namespace {

// The model of a hostile cartridge (a valid checksum proves nothing) can return tokens that do
// not tile the word: a trie that maps bytes to an id whose stored bytes are longer, merges whose
// results disagree with the token table. Offsets index the text, so every token the model adds
// is checked here, once, for all models: ids below n_ids, 0 <= start < end <= n, in order.
// Consistent cartridges never fail this; a failure raises CartridgeError (ValueError in Python).
void encode_word_checked(const HfModel& model, const uint8_t* piece, size_t n, std::vector<HfToken>& out) {
  const size_t first = out.size();
  model.encode_word(piece, n, out);
  const uint32_t n_ids = model.n_ids();  // (a virtual call: once, not per token)
  uint32_t prev_start = 0;
  for (size_t i = first; i < out.size(); ++i) {
    const HfToken& t = out[i];
    if (t.id >= n_ids || t.start > t.end || t.end > n || t.start < prev_start) {
      throw CartridgeError("invalid cartridge: its model produced token id " + std::to_string(t.id) +
                           " at bytes [" + std::to_string(t.start) + ", " + std::to_string(t.end) +
                           ") of a " + std::to_string(n) +
                           "-byte word; the vocabulary, merge and trie sections disagree (rebuild the cartridge)");
    }
    prev_start = t.start;
  }
}


constexpr uint32_t kHFHD = fourcc("HFHD");
constexpr uint32_t kMETA = fourcc("META");
constexpr uint32_t kTJSN = fourcc("TJSN");
constexpr uint32_t kVSTR = fourcc("VSTR");
constexpr uint32_t kHVTR = fourcc("HVTR");  // vocabulary trie (byte-level tokens as bytes): units
constexpr uint32_t kHVVA = fourcc("HVVA");  //   and values
constexpr uint32_t kHMRG = fourcc("HMRG");  // merge table
constexpr uint32_t kHSLF = fourcc("HSLF");  // SELF bitmap
constexpr uint32_t kHPFX = fourcc("HPFX");  // continuing_subword_prefix bytes
constexpr uint32_t kHSFX = fourcc("HSFX");  // end_of_word_suffix bytes
constexpr uint32_t kHTKE = fourcc("HTKE");  // tiktoken-equivalent ranks as a nested cartridge
constexpr uint32_t kHRID = fourcc("HRID");  //   and the id of each of its ranks
constexpr uint32_t kHDTO = fourcc("HDTO");  // ByteLevel decode table: offsets (n_ids + 1)
constexpr uint32_t kHDTB = fourcc("HDTB");  //   bytes
constexpr uint32_t kHDPR = fourcc("HDPR");  //   presence (1 when the id has a token)
constexpr uint32_t kHGLU = fourcc("HGLU");  // character BPE: the glue set (hf_bpe.h), u32 code points
constexpr uint32_t kHSCR = fourcc("HSCR");  // Unigram: f64 score per id
constexpr uint32_t kHADR = fourcc("HADR");  // compiled added tokens (added_tokens.h): normalized=false
constexpr uint32_t kHADN = fourcc("HADN");  //   and normalized=true, contents normalized
constexpr uint32_t kVSTI = fourcc("VSTI");  // token strings as encodings show them, indexed by id

// The byte-level alphabet: byte b is shown as this code point (GPT-2's bytes_to_unicode).
uint32_t byte_level_char(uint8_t b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
  // The other 68 bytes map to U+0100.. in byte order.
  uint32_t k = 0;
  for (uint32_t c = 0; c < b; ++c) {
    if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++k;
  }
  return 0x100 + k;
}

struct ByteLevelTable {
  char utf8[256][2];
  uint8_t len[256];
  ByteLevelTable() {
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = byte_level_char(static_cast<uint8_t>(b));
      if (cp < 0x80) {
        utf8[b][0] = static_cast<char>(cp);
        len[b] = 1;
      } else {
        utf8[b][0] = static_cast<char>(0xC0 | (cp >> 6));
        utf8[b][1] = static_cast<char>(0x80 | (cp & 0x3F));
        len[b] = 2;
      }
    }
  }
};
const ByteLevelTable& byte_level() {
  static const ByteLevelTable table;
  return table;
}

using utf8::is_continuation;
using utf8::sequence_length;

// A piece of a normalized text split: bytes [start, end), preceded by an inserted space when
// `prefix` (ByteLevel's add_prefix_space).
struct Piece {
  uint32_t start;
  uint32_t end;
  bool prefix;
};

// Where the bytes of the normalized text came from in the original.
class Alignment {
 public:
  // Implicit: the normalized text is the original text at `base`.
  Alignment(std::string_view text, uint32_t base) : text_(text), base_(base) {}
  Alignment(std::string_view text, const ByteRanges* align) : text_(text), align_(align) {}

  uint32_t start_of(uint32_t k) const {
    if (align_) return (*align_)[k].first;
    while (k > 0 && is_continuation(static_cast<uint8_t>(text_[k]))) --k;
    return base_ + k;
  }
  uint32_t end_of(uint32_t k) const {
    if (align_) return (*align_)[k].second;
    ++k;
    while (k < text_.size() && is_continuation(static_cast<uint8_t>(text_[k]))) ++k;
    return base_ + k;
  }

 private:
  std::string_view text_;
  uint32_t base_ = 0;
  const ByteRanges* align_ = nullptr;
};



// The fast path. tiktoken's BPE merges any adjacent pair whose concatenation is a token, by that
// token's rank; tokenizers' merges only the listed pairs, by list position. By the restriction
// argument in bpe_backtrack.h, tiktoken only ever forms a token t through split(t), the last merge
// of BPE(bytes(t)), and any adjacent pair of parts that concatenates to t is that split (such a
// pair covers a span whose history is BPE(bytes(t)) cut short). So rank every merged token by the
// position of the first merge that makes it (the symbols below all merges) and build that rank
// table. The two encoders then take the same step every time when
//   (a) the merges making one token are adjacent in the effective list (later duplicates of a
//       pair replace earlier ones), so list position orders pairs as rank orders tokens, and
//   (b) every reachable token's split is one of the merges listed for it.
// Induction on the steps: tokenizers' candidates are tiktoken candidates (a listed merge makes
// the token its two sides spell); tiktoken's choice, split(t) for the lowest-ranked t, is listed
// by (b) and comes before every merge for a later token by (a); every candidate for t is split(t)
// itself, so both break the tie at the leftmost one. A list with one merge per token
// (gpt2-style) passes when each merge is its token's split; transformers' TikTokenConverter lists
// every two-token cut of every token, in blocks by rank, and passes too (llama3_1).
//
// Unreachable tokens (BPE(bytes) != [token]) are formed by neither merge loop, and leaving them
// out of the table changes no run (they are never a run's lowest pair). They stay in only with
// ignore_merges, where tokenizers also takes a piece that spells one whole, as tiktoken does.
//
// Character vocabularies (SentencePiece-style) start from characters, not bytes. The table gives
// every byte a rank, then every prefix of a multi-byte character in the vocabulary and the
// character itself, by length, all below the merges. In UTF-8 such a prefix only matches at the
// start of a character, so tiktoken first rebuilds every character the vocabulary has, and then
// runs the merge list over characters as above. A character the vocabulary lacks stays as
// synthetic ranks (a byte or a prefix), which no merged token can absorb (merged tokens are made
// of the vocabulary's characters); rank_to_id marks those ranks kSyntheticRank. Such a character
// parts the piece for both encoders (its <0xXX> tokens or unk merge with nothing, checked here),
// so the model gives each run of synthetic ranks to the merge loop, which knows unk and byte
// fallback, and keeps the rest.
//
// Anything else (a byte missing from a byte vocabulary, prefixes or suffixes, a token made in two
// places of the list, a split that is not listed) keeps the merge-list encoder.
bool build_fast_path(const HfSource& src, const std::vector<std::string>& bytes_by_id, std::string& image,
                     std::vector<uint32_t>& rank_to_id, bool& spells_all) {
  if (!src.options.prefix.empty() || !src.options.suffix.empty()) return false;
  constexpr uint32_t kNone = 0xFFFFFFFFu;
  const bool chars = src.kind == HfModelKind::kBpeChars;
  std::vector<uint32_t> rank_of(src.n_ids, kNone);
  rank_to_id.assign(256, chars ? kSyntheticRank : kNone);
  std::vector<std::string> rank_bytes(256);
  for (int b = 0; b < 256; ++b) rank_bytes[b] = std::string(1, static_cast<char>(b));
  for (uint32_t id = 0; id < src.n_ids; ++id) {
    if (bytes_by_id[id].size() == 1) {
      const uint8_t b = static_cast<uint8_t>(bytes_by_id[id][0]);
      rank_to_id[b] = id;
      rank_of[id] = b;
    }
  }
  // Where the 256 byte tokens are the ids first..first + 255 (0-255 in GPT-2's, Qwen2's and Llama
  // 3's alphabets; 3-258 in DeepSeek-V3's, after its special tokens), each byte ranks by its
  // token's id less `first` instead of by its value: the ranks of single bytes are never compared
  // (a merge's rank is its product's), so BPE is the same, and with merged tokens numbered in merge
  // order after them, every id is its rank plus `first`, which the ids-only loops add instead of
  // reading a table (HfBpeModel::ids_of_ranks: 16 instructions per token, 6% of `encode(d).ids`
  // on qwen2_5). Every entry is set, so the 256 ids are distinct and min + 255 == max means
  // contiguous.
  if (!chars && std::find(rank_to_id.begin(), rank_to_id.end(), kNone) == rank_to_id.end()) {
    const auto [lo, hi] = std::minmax_element(rank_to_id.begin(), rank_to_id.end());
    const uint32_t first = *lo;
    if (*hi - first == 255) {
      std::vector<std::string> by_rank(256);
      for (int b = 0; b < 256; ++b) by_rank[rank_to_id[b] - first] = rank_bytes[b];
      rank_bytes = std::move(by_rank);
      for (uint32_t r = 0; r < 256; ++r) {
        rank_to_id[r] = r + first;
        rank_of[r + first] = r;
      }
    }
  }
  // A byte with no token of its own cannot be part of any token of a byte vocabulary either, so
  // pieces without it never meet the difference; the model sends pieces that contain one to the
  // merge loop, which drops it (or makes it unk) as tokenizers does. Its rank stays unused.
  if (chars) {
    // Multi-byte characters of the vocabulary and their proper prefixes, shortest first.
    std::map<std::string, uint32_t> by_length[5];
    for (uint32_t id = 0; id < src.n_ids; ++id) {
      const std::string& b = bytes_by_id[id];
      if (b.size() < 2 || b.size() > 4) continue;
      const auto* p = reinterpret_cast<const uint8_t*>(b.data());
      const utf8::Decoded d = utf8::decode(p, p + b.size());
      if (d.cp == utf8::kInvalid || d.len != b.size()) continue;
      by_length[b.size()][b] = id;
      for (size_t k = 2; k < b.size(); ++k) by_length[k].emplace(b.substr(0, k), kSyntheticRank);
    }
    for (const auto& level : by_length) {
      for (const auto& [bytes, id] : level) {
        if (id != kSyntheticRank) rank_of[id] = static_cast<uint32_t>(rank_to_id.size());
        rank_to_id.push_back(id);
        rank_bytes.push_back(bytes);
      }
    }
  }
  if (chars) {
    // What the merge loop makes of a character the vocabulary lacks (its <0xXX> tokens, or unk)
    // must merge with nothing, so such characters part the piece (see HfBpeModel::encode_fast).
    auto stand_in = [&](uint32_t id) {
      const std::string& b = bytes_by_id[id];
      return static_cast<int32_t>(id) == src.options.unk_id ||
             (b.size() == 6 && b.compare(0, 3, "<0x") == 0 && b[5] == '>');
    };
    for (const HfMerge& m : src.merges) {
      if (m.left >= src.n_ids || m.right >= src.n_ids || stand_in(m.left) || stand_in(m.right)) return false;
    }
  }
  const uint32_t first_merged = static_cast<uint32_t>(rank_to_id.size());
  // The effective list: the last occurrence of each pair, in list order.
  std::vector<HfMergeEntry> table = build_hf_merge_table(src.merges);
  std::vector<const HfMerge*> effective;
  for (const HfMergeEntry& e : table) {
    if (e.rank != HfMergeEntry::kEmpty) effective.push_back(&src.merges[e.rank]);
  }
  std::sort(effective.begin(), effective.end());
  uint32_t block = kNone;  // the token the merges just read make
  for (const HfMerge* m : effective) {
    if (m->merged == block) continue;  // (a): another cut of the same token, in the same block
    if (rank_of[m->merged] != kNone || bytes_by_id[m->merged].empty()) return false;  // a symbol, or a second block
    block = m->merged;
    rank_of[m->merged] = static_cast<uint32_t>(rank_to_id.size());
    rank_to_id.push_back(m->merged);
    rank_bytes.push_back(bytes_by_id[m->merged]);
  }
  // (b)'s table: (left rank, right rank) -> the rank it makes, for merges whose sides are ranked
  // (any other merge never fires: every symbol and every merge's product is ranked).
  std::unordered_map<uint64_t, uint32_t> listed;
  listed.reserve(effective.size() * 2);
  for (const HfMerge* m : effective) {
    const uint32_t a = rank_of[m->left], b = rank_of[m->right];
    if (a != kNone && b != kNone) listed.emplace(uint64_t{a} << 32 | b, rank_of[m->merged]);
  }
  std::vector<bool> dropped(rank_to_id.size(), false);
  for (int attempt = 0; attempt < 2; ++attempt) {
    TiktokenSource ts;
    ts.mergeable.reserve(rank_to_id.size());
    for (uint32_t r = 0; r < rank_to_id.size(); ++r) {
      if ((rank_to_id[r] != kNone || chars) && !dropped[r]) ts.mergeable.emplace_back(rank_bytes[r], r);
    }
    ts.pattern = SplitPattern::kNone;
    ts.meta_json = "{}";
    try {
      image = build_tiktoken_cartridge(ts);
    } catch (const std::exception&) {
      return false;
    }
    const std::shared_ptr<Cartridge> c = Cartridge::from_bytes(image, "fast path", false);
    if (!c->find(fourcc("BSPL")) || !c->find(fourcc("BSPR"))) return false;
    size_t nl, nr;
    const uint32_t* left = c->array<uint32_t>(fourcc("BSPL"), &nl);
    const uint32_t* right = c->array<uint32_t>(fourcc("BSPR"), &nr);
    if (nl != nr) return false;
    bool unreachable = false;
    for (uint32_t t = first_merged; t < rank_to_id.size(); ++t) {
      if (dropped[t]) continue;
      if (t >= nl) return false;
      if (left[t] == BpeSplits::kNoSplit && right[t] == BpeSplits::kNoSplit) {
        if (attempt > 0) return false;  // leaving a never-formed token out changed a run: damaged
        if (!src.options.ignore_merges) dropped[t] = unreachable = true;
        continue;
      }
      const auto it = listed.find(uint64_t{left[t]} << 32 | right[t]);  // (b)
      if (it == listed.end() || it->second != t) return false;
    }
    if (!unreachable) {
      rank_to_id.resize(nl);  // ranks left out at the end are not in the table
      break;
    }
  }
  spells_all = true;
  for (uint32_t id = 0; id < src.n_ids; ++id) {
    const uint32_t r = rank_of[id];
    spells_all &= bytes_by_id[id].empty() || (r != kNone && r < rank_to_id.size() && !dropped[r]);
  }
  for (uint32_t r = 0; r < rank_to_id.size(); ++r) {
    if (dropped[r]) rank_to_id[r] = chars ? kSyntheticRank : kNone;
    if (rank_to_id[r] == kNone) rank_to_id[r] = 0;  // a byte with no token, or a rank left out: never produced
  }
  return true;
}

// An added token found in the text: its id, original offsets, and its string when that is not
// the token's content (stripped whitespace included, as tokenizers shows it).
void emit_added(const AddedEntry& t, std::string_view matched, uint32_t start, uint32_t end, RawEncoding& out,
                uint32_t& word) {
  if (t.show_text() || matched != t.content) out.note_text(matched);
  out.push(t.id, start, end, word++);
}

}  // namespace

std::string build_hf_cartridge(const HfSource& src) {
  if (src.n_ids == 0) throw std::invalid_argument("the vocabulary is empty");
  const bool bpe = src.kind == HfModelKind::kBpeBytes || src.kind == HfModelKind::kBpeChars;
  std::vector<std::pair<std::string_view, int32_t>> keys;
  std::vector<std::string> bytes_by_id(src.n_ids);
  keys.reserve(src.byte_tokens.size());
  for (const auto& [b, id] : src.byte_tokens) {
    if (id >= src.n_ids) throw std::invalid_argument("token id out of range");
    if (b.empty()) continue;
    keys.emplace_back(b, static_cast<int32_t>(id));
    bytes_by_id[id] = b;
  }
  for (const HfMerge& m : src.merges) {
    if (m.left >= src.n_ids || m.right >= src.n_ids || m.merged >= src.n_ids) {
      throw std::invalid_argument("merge refers to an id out of range");
    }
  }
  if (!bpe && !src.merges.empty()) throw std::invalid_argument("only BPE models have merges");
  if (src.kind == HfModelKind::kUnigram && src.scores.size() != src.n_ids) {
    throw std::invalid_argument("Unigram scores do not cover the vocabulary");
  }
  if ((src.kind == HfModelKind::kWordPiece || src.kind == HfModelKind::kWordLevel) &&
      (src.options.unk_id < 0 || static_cast<uint32_t>(src.options.unk_id) >= src.n_ids)) {
    throw std::invalid_argument("WordPiece and WordLevel cartridges need an unk token");
  }
  const DoubleArrayData trie = build_double_array(keys);

  HfHeader h{};
  h.engine = kEngineHfBpe;
  h.n_ids = src.n_ids;
  h.unk_id = src.options.unk_id;
  h.flags = (src.options.fuse_unk ? kHfFuseUnk : 0) | (src.options.ignore_merges ? kHfIgnoreMerges : 0) |
            (src.options.byte_fallback ? kHfByteFallback : 0);
  h.model = static_cast<uint32_t>(src.kind);
  h.max_input_chars_per_word = src.max_input_chars_per_word;

  CartridgeWriter w;
  w.add(kMETA, src.meta_json, kSectionRequired);
  w.add(kTJSN, src.tokenizer_json);
  w.add(kVSTR, src.vocab_strings, kSectionRequired);
  w.add_array(kHVTR, trie.units, kSectionRequired);
  w.add_array(kHVVA, trie.value, kSectionRequired);
  if (bpe) {
    const std::vector<HfMergeEntry> table = build_hf_merge_table(src.merges);
    HfBpeOptions options = src.options;
    options.char_level = src.kind == HfModelKind::kBpeChars;
    const HfBpeModel probe(DoubleArrayView(trie), table.data(), table.size(), nullptr, src.n_ids, options);
    const std::vector<uint8_t> self = compute_self_encodes(probe, bytes_by_id);
    h.merge_capacity = table.size();
    w.add_array(kHMRG, table, kSectionRequired);
    w.add_array(kHSLF, self, kSectionRequired);
    w.add(kHPFX, src.options.prefix, kSectionRequired);
    w.add(kHSFX, src.options.suffix, kSectionRequired);
    std::string fast_image;
    std::vector<uint32_t> rank_to_id;
    bool spells_all = false;
    if (build_fast_path(src, bytes_by_id, fast_image, rank_to_id, spells_all)) {
      w.add(kHTKE, std::move(fast_image), kSectionRequired);
      w.add_array(kHRID, rank_to_id, kSectionRequired);
      if (spells_all) h.flags |= kHfFastSpellsAll;
    }
    if (options.char_level) {
      bool ok = false;
      const std::vector<uint32_t> glue = compute_glue(src.merges, bytes_by_id, &ok);
      if (ok) w.add_array(kHGLU, glue, kSectionRequired);
    }
  }
  if (src.kind == HfModelKind::kWordPiece) w.add(kHPFX, src.options.prefix, kSectionRequired);
  if (src.kind == HfModelKind::kUnigram) w.add_array(kHSCR, src.scores, kSectionRequired);
  if (src.kind == HfModelKind::kBpeBytes) {
    if (src.decode_bytes.size() != src.n_ids || src.decode_present.size() != src.n_ids) {
      throw std::invalid_argument("decode table does not cover the vocabulary");
    }
    std::vector<uint32_t> offsets{0};
    std::string blob;
    for (const std::string& b : src.decode_bytes) {
      blob += b;
      if (blob.size() >= 0xFFFFFFFFull) throw std::length_error("decode table too large");
      offsets.push_back(static_cast<uint32_t>(blob.size()));
    }
    w.add_array(kHDTO, offsets, kSectionRequired);
    w.add(kHDTB, blob, kSectionRequired);
    w.add_array(kHDPR, src.decode_present, kSectionRequired);
  }
  if (src.compile_added) {
    w.add(kHADR, AddedTokenSet::serialize(src.added_raw), kSectionRequired);
    w.add(kHADN, AddedTokenSet::serialize(src.added_normalized), kSectionRequired);
  }
  for (const auto& [id, bytes] : src.extra_sections) w.add(id, bytes, kSectionRequired);
  w.add(kHFHD, std::string(reinterpret_cast<const char*>(&h), sizeof h), kSectionRequired);
  return w.finish();
}

namespace {

// DeepSeek-V3's pre-tokenizer, three Isolated Splits (digits, cjk runs, words) and a ByteLevel
// step that only maps bytes, streamed as one scanner (text/deepseek_split.h).
class DeepSeekSequenceSplitter final : public PieceSplitter {
 public:
  bool streams() const override { return true; }
  size_t piece_end(std::string_view text, size_t pos) const override { return deepseek_piece_end(text, pos); }
  bool block_pattern(PieceBlocks::Pattern& out) const override {
    out = PieceBlocks::Pattern::kDeepSeekV3;
    return true;
  }
  void split(std::string_view text, ByteRanges& pieces) const override {
    PieceBlocks scan(PieceBlocks::Pattern::kDeepSeekV3, text);
    for (size_t start = 0, end = 0; scan.next(start, end);) {
      pieces.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(end));
    }
  }
};

bool is_deepseek_sequence(const std::vector<PreTokenizerStep>& steps) {
  using S = Regex::Scanner;
  const S want[3] = {S::kDeepSeekDigits, S::kDeepSeekCjk, S::kDeepSeekWords};
  if (steps.size() != 4 || steps[3].kind != PreTokenizerStep::Kind::kByteLevel || steps[3].splitter ||
      steps[3].add_prefix_space) {
    return false;
  }
  for (int i = 0; i < 3; ++i) {
    if (steps[i].kind != PreTokenizerStep::Kind::kSplit || !steps[i].splitter ||
        steps[i].splitter->isolated_scanner() != want[i]) {
      return false;
    }
  }
  return true;
}

}  // namespace

HfEngine::HfEngine(std::shared_ptr<const Cartridge> cartridge, HfPipeline pipeline)
    : cartridge_(std::move(cartridge)), pipeline_(std::move(pipeline)) {
  const Cartridge& c = *cartridge_;
  const std::string_view hb = c.bytes(kHFHD);
  if (hb.size() != sizeof(HfHeader)) c.fail("section HFHD has the wrong size");
  HfHeader h;
  std::memcpy(&h, hb.data(), sizeof h);
  if (h.engine != kEngineHfBpe) c.fail("this cartridge is not a tokenizer.json cartridge");
  if (h.n_ids == 0) c.fail("HFHD declares an empty vocabulary");
  if (h.model > static_cast<uint32_t>(HfModelKind::kWordLevel)) c.fail("HFHD names an unknown model");
  kind_ = static_cast<HfModelKind>(h.model);
  if (!is_byte_level()) word_owners_ = WordOwners{new_memo_owner(), new_memo_owner()};
  const int32_t unk = h.unk_id >= 0 && static_cast<uint32_t>(h.unk_id) < h.n_ids ? h.unk_id : -1;
  const DoubleArrayView vocab = load_trie(c, kHVTR, kHVVA);

  switch (kind_) {
    case HfModelKind::kBpeBytes:
    case HfModelKind::kBpeChars: {
      size_t n_merges, n_self;
      const HfMergeEntry* merges = c.array<HfMergeEntry>(kHMRG, &n_merges);
      if (n_merges != h.merge_capacity || n_merges == 0) c.fail("merge table size does not match HFHD");
      const uint8_t* self = c.array<uint8_t>(kHSLF, &n_self);
      if (n_self != (h.n_ids + 7) / 8) c.fail("SELF bitmap size does not match the vocabulary");
      HfBpeOptions opts;
      opts.unk_id = unk;
      opts.fuse_unk = h.flags & kHfFuseUnk;
      opts.ignore_merges = h.flags & kHfIgnoreMerges;
      opts.byte_fallback = h.flags & kHfByteFallback;
      opts.char_level = kind_ == HfModelKind::kBpeChars;
      opts.prefix = std::string(c.bytes(kHPFX));
      opts.suffix = std::string(c.bytes(kHSFX));
      HfSegmentation seg;
      if (opts.char_level && c.find(kHGLU)) {
        seg.enabled = true;
        seg.glue = c.array<uint32_t>(kHGLU, &seg.n_glue);  // sorted: checked by ready()
      }
      bpe_ = std::make_unique<HfBpeModel>(vocab, merges, n_merges, self, h.n_ids, std::move(opts), seg);
      model_ = bpe_.get();
      break;
    }
    case HfModelKind::kWordPiece: {
      if (unk < 0) c.fail("a WordPiece cartridge needs an unk token");
      WordPieceOptions opts;
      opts.unk_id = static_cast<uint32_t>(unk);
      opts.prefix = std::string(c.bytes(kHPFX));
      opts.max_input_chars_per_word = h.max_input_chars_per_word;
      other_ = std::make_unique<WordPieceModel>(vocab, h.n_ids, std::move(opts));
      break;
    }
    case HfModelKind::kUnigram: {
      size_t n_scores;
      const double* scores = c.array<double>(kHSCR, &n_scores);
      if (n_scores != h.n_ids) c.fail("HSCR does not hold one score per id");
      UnigramOptions opts;
      opts.unk_id = unk;
      opts.byte_fallback = h.flags & kHfByteFallback;
      other_ = std::make_unique<UnigramModel>(vocab, scores, h.n_ids, opts);
      break;
    }
    case HfModelKind::kWordLevel:
      if (unk < 0) c.fail("a WordLevel cartridge needs an unk token");
      other_ = std::make_unique<WordLevelModel>(vocab, h.n_ids, static_cast<uint32_t>(unk));
      break;
  }
  if (other_) model_ = other_.get();
  if (kind_ == HfModelKind::kUnigram) unk_text_ = unk;

  if (kind_ == HfModelKind::kBpeBytes || kind_ == HfModelKind::kBpeChars) {
    if (c.find(kHTKE)) {
      fast_ = std::make_shared<const TiktokenEngine>(Cartridge::nested(cartridge_, kHTKE));
      size_t n_ranks;
      const uint32_t* rank_to_id = c.array<uint32_t>(kHRID, &n_ranks);
      if (n_ranks != fast_->n_ids()) c.fail("HRID does not match the nested rank table");
      rank_to_id_ = rank_to_id;  // ids in range: checked by ready()
      bpe_->set_fast_path(fast_.get(), rank_to_id, static_cast<uint32_t>(n_ranks), h.flags & kHfFastSpellsAll);
    }
  }
  // The sections read for every piece, for huge pages (core/huge_pages.h): the nested fast
  // engine marks its own; the vocabulary trie where whole pieces are looked up (every model but
  // the fast path, and the fast path of ignore_merges), the merge table where words take the
  // merge loop, the scores of Unigram.
  const bool fast_alone = fast_ && !bpe_->lookup_before_fast() && !bpe_->fast_needs_check();
  if (!fast_alone) {
    c.mark_hot(kHVTR);
    c.mark_hot(kHVVA);
    c.mark_hot(kHMRG);
    c.mark_hot(kHSLF);
    c.mark_hot(kHSCR);
  }
  if (fast_) c.mark_hot(kHRID);
  if (kind_ == HfModelKind::kBpeBytes) {
    size_t n_off, n_blob, n_present;
    decode_offsets_ = c.array<uint32_t>(kHDTO, &n_off);
    decode_bytes_ = c.array<uint8_t>(kHDTB, &n_blob);
    decode_present_ = c.array<uint8_t>(kHDPR, &n_present);
    if (n_off != size_t{h.n_ids} + 1 || n_present != h.n_ids || decode_offsets_[0] != 0 ||
        decode_offsets_[h.n_ids] != n_blob) {
      c.fail("the decode table does not match the vocabulary");
    }
  }

  const auto& steps = pipeline_.pre_tokenizers;
  byte_level_step_ = steps.size();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == PreTokenizerStep::Kind::kByteLevel && byte_level_step_ == steps.size()) byte_level_step_ = i;
    if (steps[i].kind == PreTokenizerStep::Kind::kMetaspace) {
      if (i + 1 != steps.size() || is_byte_level()) {
        throw std::invalid_argument("Metaspace must be the last pre-tokenizer, and not with byte-level BPE");
      }
      metaspace_ = &steps[i];
    }
  }
  if (is_byte_level() && byte_level_step_ == steps.size()) {
    throw std::invalid_argument("the pipeline has no ByteLevel pre-tokenizer");
  }
  if (!is_byte_level() && byte_level_step_ != steps.size()) {
    throw std::invalid_argument("a ByteLevel pre-tokenizer needs a byte-level BPE vocabulary");
  }
  if (is_byte_level()) {
    if (steps.size() == 1 && steps[0].splitter && steps[0].splitter->streams() && !steps[0].add_prefix_space) {
      streaming_ = steps[0].splitter.get();
    } else if (steps.size() == 2 && steps[0].kind == PreTokenizerStep::Kind::kSplit && steps[0].splitter->streams() &&
               !steps[1].splitter && !steps[1].add_prefix_space) {
      streaming_ = steps[0].splitter.get();
    } else if (is_deepseek_sequence(steps)) {
      sequence_stream_ = std::make_shared<DeepSeekSequenceSplitter>();
      streaming_ = sequence_stream_.get();
    }
    streaming_blocks_ = streaming_ != nullptr && streaming_->block_pattern(streaming_pattern_);
  }
  if (c.find(kVSTI) != nullptr) {
    // {u32 n, u32 blob_size, u32 offsets[n + 1], u8 present[n], blob}: sizes checked here, each
    // string's offsets where it is read.
    const std::string_view v = c.bytes(kVSTI);
    uint32_t head[2] = {0, 0};
    if (v.size() >= 8) std::memcpy(head, v.data(), 8);
    if (v.size() < 8 || 8 + 4 * (uint64_t{head[0]} + 1) + head[0] + head[1] != v.size()) {
      c.fail("VSTI's size does not match its counts");
    }
    vsti_n_ = head[0];
    vsti_blob_size_ = head[1];
    vsti_offsets_ = reinterpret_cast<const uint32_t*>(v.data() + 8);
    vsti_present_ = reinterpret_cast<const uint8_t*>(v.data() + 8 + 4 * (uint64_t{vsti_n_} + 1));
    vsti_blob_ = reinterpret_cast<const char*>(vsti_present_ + vsti_n_);
  }
  // Added-token ids are only copied to the output (tokens added after load lie past n_ids).
  if (pipeline_.added_from_cartridge) {
    // Used in place: the matcher was built when the cartridge was compiled.
    std::string error;
    if (!AddedTokenSet::view(c.bytes(kHADR), &added_raw_, &error) ||
        !AddedTokenSet::view(c.bytes(kHADN), &added_normalized_, &error)) {
      c.fail(error);
    }
  } else {
    added_raw_ = AddedTokenSet(pipeline_.added_raw);
    added_normalized_ = AddedTokenSet(pipeline_.added_normalized);
  }
  separators_ok_ = steps.size() == 1 && steps[0].kind == PreTokenizerStep::Kind::kSplit && steps[0].splitter &&
                   steps[0].splitter->splits_bert() && added_normalized_.empty();
  ids_read_alignment_ = std::any_of(steps.begin(), steps.end(), [](const PreTokenizerStep& st) {
    return st.kind == PreTokenizerStep::Kind::kMetaspace && st.prepend_scheme == PreTokenizerStep::Prepend::kFirst;
  });
}

void HfEngine::ready() const {
  first_use_.run([this] {
    const Cartridge& c = *cartridge_;
    // Guarded like loading: the file may be truncated under the mapping before its first use.
    guard_mapped_reads(c.label(), [&] { check_cartridge_once(c, [&] { check_tables(); }); });
    // Precomputations that scan tables (safe once the checks passed; per engine, not per file).
    if (bpe_) bpe_->prepare();  // unique_ptr: a non-const model inside this const engine, run once
    if (kind_ == HfModelKind::kUnigram) static_cast<UnigramModel*>(other_.get())->prepare();
  });
}

void HfEngine::check_tables() const {
  {
    const Cartridge& c = *cartridge_;
    const uint32_t n_ids = model_->n_ids();
    if (fast_) {
      fast_->check_tables();
      for (uint32_t r = 0; r < fast_->n_ids(); ++r) {
        const bool synthetic = rank_to_id_[r] == kSyntheticRank && kind_ == HfModelKind::kBpeChars;
        if (rank_to_id_[r] >= n_ids && !synthetic) c.fail("HRID maps a rank to an id out of range");
      }
    }
    if (decode_offsets_ != nullptr) {
      for (uint32_t i = 0; i < n_ids; ++i) {
        if (decode_offsets_[i] > decode_offsets_[i + 1]) c.fail("the decode table's offsets are not sorted");
      }
    }
    if (bpe_) {
      const HfSegmentation& seg = bpe_->segmentation();
      for (size_t i = 1; i < seg.n_glue; ++i) {
        if (seg.glue[i - 1] >= seg.glue[i]) c.fail("HGLU is not sorted");
      }
    }
    // The file's compiled added tokens, whether or not this engine uses them: the file is
    // remembered as good for every later engine over it.
    for (const uint32_t id : {kHADR, kHADN}) {
      if (c.find(id) == nullptr) continue;
      AddedTokenSet set;
      std::string error;
      if (!AddedTokenSet::view(c.bytes(id), &set, &error) || !set.check(&error)) c.fail(error);
    }
  }
}

bool HfEngine::token_string(uint32_t id, std::string_view* out) const {
  if (vsti_offsets_ == nullptr || id >= vsti_n_ || !vsti_present_[id]) return false;
  const uint32_t a = vsti_offsets_[id], b = vsti_offsets_[id + 1];
  if (a > b || b > vsti_blob_size_) cartridge_->fail("VSTI's offsets are out of order or out of range");
  *out = std::string_view(vsti_blob_ + a, b - a);
  return true;
}

void HfEngine::decode_byte_level(const uint32_t* ids, size_t n, std::string_view skip, std::string& out) const {
  if (decode_offsets_ == nullptr) throw std::logic_error("decode_byte_level needs a byte-level cartridge");
  const uint32_t n_ids = model_->n_ids();
  for (size_t i = 0; i < n; ++i) {
    const uint32_t id = ids[i];
    if (id >= n_ids || !decode_present_[id] || (id < skip.size() && skip[id] != 0)) continue;
    out.append(reinterpret_cast<const char*>(decode_bytes_) + decode_offsets_[id], decode_offsets_[id + 1] - decode_offsets_[id]);
  }
}

void HfEngine::encode(std::string_view text, bool encode_special_tokens, RawEncoding& out) const {
  out.clear();
  if (text.size() >= 0xFFFFFFFFull) throw std::length_error("text longer than 4 GiB");
  cartridge_->note_encoded(text.size());
  uint32_t word = 0;
  thread_local std::vector<AddedSplit> splits;
  splits.clear();
  added_raw_.split(text, encode_special_tokens, splits);
  for (const AddedSplit& s : splits) {
    if (out.full()) return;
    if (s.end <= s.start) continue;
    if (s.token >= 0) {
      emit_added(added_raw_.token(static_cast<size_t>(s.token)), text.substr(s.start, s.end - s.start), s.start,
                 s.end, out, word);
    } else {
      encode_text_split(text.substr(s.start, s.end - s.start), s.start, encode_special_tokens, out, word);
    }
  }
}

// The common case in one pass: the original text, pieces from a scanner, the model, offsets from
// character boundaries. Same output as the general path (tests compare every folder).
namespace {

// Original offsets of the characters around byte k of a streamed text: tokens of byte-level BPE
// may split a character, and offsets always cover whole characters.
struct CharBounds {
  const uint8_t* bytes;
  size_t n;
  uint32_t base;
  uint32_t start(size_t k) const {  // start of the character holding byte k
    while (k > 0 && is_continuation(bytes[k])) --k;
    return static_cast<uint32_t>(base + k);
  }
  uint32_t end(size_t k) const {  // end of the character holding byte k
    ++k;
    while (k < n && is_continuation(bytes[k])) ++k;
    return static_cast<uint32_t>(base + k);
  }
};

struct StreamingScratch {
  std::vector<uint32_t> ranks;
  std::vector<HfToken> tokens;
};

}  // namespace

template <bool kOffsets, class NextPiece>
void HfEngine::encode_pieces_fast(std::string_view text, uint32_t base, RawEncoding& out, uint32_t& word,
                                  NextPiece&& next) const {
  const HfBpeModel& model = *bpe_;
  const TiktokenEngine& fast = *model.fast_engine();
  const uint32_t* rank_to_id = model.rank_to_id();
  const uint32_t n_ranks = model.n_ranks();
  const uint32_t n_ids = model.n_ids();
  const bool ignore_merges = model.lookup_before_fast();
  const bool needs_check = model.fast_needs_check();
  StreamingScratch& scratch = thread_scratch<StreamingScratch>();
  std::vector<uint32_t>& ranks = scratch.ranks;
  std::vector<HfToken>& tokens = scratch.tokens;
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  const CharBounds chars{bytes, n, base};
  // Short pieces go through the thread's first-level cache of the fast engine's ranks, as on
  // the tiktoken face (pieces starting before keyable_end have its 16 readable bytes in text).
  ShortPieceCache& hot = ShortPieceCache::local();
  const uint16_t hot_tag = hot.tag_of(fast.memo_owner());
  PieceCache& pieces = PieceCache::local();  // for encode_piece: one thread-local lookup per call
  const ShortTokenIndex* const short_tokens = fast.short_tokens_for(n);  // its tokens, for first sightings
  const size_t keyable_end = n >= ShortPieceCache::kMaxLen ? n - ShortPieceCache::kMaxLen + 1 : 0;
  auto damaged = [&](size_t len) {
    throw CartridgeError("invalid cartridge: its fast path's tokens do not tile a " + std::to_string(len) +
                         "-byte word; the vocabulary, rank and trie sections disagree (rebuild the cartridge)");
  };
  // Ids only: one push per token and no character-boundary walks (kOffsets is out.with_offsets).
  auto push = [&](uint32_t id, size_t from, size_t to, bool whole) {
    if constexpr (kOffsets) {
      if (whole) out.push(id, static_cast<uint32_t>(base + from), static_cast<uint32_t>(base + to), word);
      else out.push(id, chars.start(from), chars.end(to - 1), word);
    } else {
      out.ids.push_back(id);
    }
  };
  // Pieces come from `next` kAhead at a time, their cache slots prefetched before the first is
  // encoded, so that cold slots miss together (as in TiktokenEngine::encode_segment).
  constexpr size_t kAhead = 32;
  size_t starts[kAhead], ends[kAhead];
  ShortPieceCache::Key keys[kAhead];
  bool keyed[kAhead];
  size_t queued = 0, taken = 0;
  bool more = true;
  auto next_queued = [&](size_t& start, size_t& stop) {
    if (taken == queued) {
      queued = taken = 0;
      while (more && queued < kAhead) {
        if (!next(starts[queued], ends[queued])) {
          more = false;
          break;
        }
        const uint8_t* p = bytes + starts[queued];
        const size_t k = ends[queued] - starts[queued];
        keyed[queued] = TiktokenEngine::short_cached(p, k, starts[queued] < keyable_end);
        if (keyed[queued]) {
          keys[queued] = ShortPieceCache::make_key(p, k, hot_tag);
          hot.prefetch(keys[queued]);
          if (short_tokens != nullptr) short_tokens->prefetch(keys[queued]);
        }
        ++queued;
      }
      if (queued == 0) return false;
    }
    start = starts[taken];
    stop = ends[taken];
    ++taken;
    return true;
  };
  for (size_t pos = 0, end = 0; next_queued(pos, end);) {
    if (out.full()) return;
    const uint8_t* piece = bytes + pos;
    const size_t len = end - pos;
    // The fast engine's ranks of this piece, through the cache with the key made when it was queued.
    auto encode_ranks = [&](std::vector<uint32_t>& v) {
      const size_t q = taken - 1;
      if (keyed[q]) {
        fast.encode_piece_keyed(hot, hot_tag, short_tokens, keys[q], piece, len, v, nullptr, &pieces);
      } else {
        fast.encode_piece(piece, len, v, false, nullptr, &pieces, &hot);
      }
    };
    // What HfBpeModel::encode_word_uncached does before its fast path: ignore_merges looks the
    // whole piece up in the vocabulary, and a byte without a token sends the piece to the merge loop.
    bool general = false;
    if (ignore_merges) {
      const int32_t id = model.vocab().find(piece, len);
      if (id >= 0 && static_cast<uint32_t>(id) < n_ids) {
        push(static_cast<uint32_t>(id), pos, end, true);
        ++word;
        continue;
      }
    }
    if (needs_check) {
      for (size_t i = 0; i < len && !general; ++i) general = model.byte_missing(piece[i]);
    }
    if (general) {
      tokens.clear();
      encode_word_checked(model, piece, len, tokens);
      for (const HfToken& t : tokens) push(t.id, pos + t.start, pos + t.end, false);
      ++word;
      continue;
    }
    if constexpr (!kOffsets) {
      // Ids only, as the tiktoken face pushes them: the encoder appends ranks to the ids, which
      // become ids in place. Ranks are trie values below n_ranks and HRID's ids were checked by
      // ready(), so no token's bytes need reading here.
      std::vector<uint32_t>& ids = out.ids;
      const size_t first = ids.size();
      encode_ranks(ids);
      if (!model.ids_of_ranks(ids.data() + first, ids.size() - first)) damaged(len);
      ++word;
      continue;
    }
    ranks.clear();
    encode_ranks(ranks);
    // Token lengths from the checked offset table (an absent rank has length 0, which tiles
    // nothing): they place each token's offsets, and a damaged table shows as tokens that do not
    // tile the piece.
    if (ranks.size() == 1) {
      const uint32_t r = ranks[0];
      if (r >= n_ranks || rank_to_id[r] >= n_ids || fast.token_length(r) != len) damaged(len);
      push(rank_to_id[r], pos, end, true);
      ++word;
      continue;
    }
    size_t at = 0;
    for (const uint32_t r : ranks) {
      const size_t k = r < n_ranks ? fast.token_length(r) : 0;
      if (k == 0 || rank_to_id[r] >= n_ids || k > len - at) damaged(len);
      push(rank_to_id[r], pos + at, pos + at + k, false);
      at += k;
    }
    if (at != len) damaged(len);
    ++word;
  }
}

template <bool kOffsets>
void HfEngine::encode_streaming_fast(std::string_view text, uint32_t base, RawEncoding& out, uint32_t& word) const {
  // Once per text (~4 bytes per token on most text). Not in encode_pieces_fast: the split path
  // calls it once per added-token split, and exact reserves there would reallocate every time.
  out.reserve_more(text.size() / 3 + 16);
  // The scanner is called straight where the splitter is one of the hand-written ones (no virtual
  // call, nor the regex's dispatch, per piece).
  auto stream = [&](auto&& piece_end_at) {
    size_t cursor = 0;
    encode_pieces_fast<kOffsets>(text, base, out, word, [&](size_t& start, size_t& end) {
      if (cursor >= text.size()) return false;
      start = cursor;
      end = piece_end_at(cursor);
      if (end <= start || end > text.size()) end = text.size();  // a scanner always advances; guard anyway
      cursor = end;
      return true;
    });
  };
  // GPT-2's, Llama 3's, Qwen2's and DeepSeek-V3's patterns: pieces found 64 bytes at a time.
  // Ids only, where the model sends every piece to the fast engine (no ignore_merges lookup, no
  // byte without a token): the fast engine's own loop over the blocks appends ranks, which
  // become ids in place, as in encode_pieces_fast.
  if constexpr (!kOffsets) {
    const HfBpeModel& model = *bpe_;
    if (streaming_blocks_ && !model.lookup_before_fast() && !model.fast_needs_check()) {
      std::vector<uint32_t>& ids = out.ids;
      const size_t first = ids.size();
      word += static_cast<uint32_t>(model.fast_engine()->encode_blocks(streaming_pattern_, text, ids, out.limit));
      if (!model.ids_of_ranks(ids.data() + first, ids.size() - first)) {
        throw CartridgeError("invalid cartridge: its fast path gave a rank of " + std::to_string(model.n_ranks()) +
                             " or more (rebuild the cartridge)");
      }
      return;
    }
  }
  if (streaming_blocks_) {
    PieceBlocks scan(streaming_pattern_, text);
    encode_pieces_fast<kOffsets>(text, base, out, word, [&](size_t& start, size_t& end) { return scan.next(start, end); });
    return;
  }
  stream([&](size_t at) { return streaming_->piece_end(text, at); });
}

void HfEngine::encode_streaming(std::string_view text, uint32_t base, RawEncoding& out, uint32_t& word) const {
  if (bpe_ && bpe_->has_fast_path() && !bpe_->segments() && !bpe_->options().char_level) {
    if (out.with_offsets) encode_streaming_fast<true>(text, base, out, word);
    else encode_streaming_fast<false>(text, base, out, word);
    return;
  }
  thread_local std::vector<HfToken> tl_tokens;
  std::vector<HfToken>& tokens = tl_tokens;
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const size_t n = text.size();
  const CharBounds chars{bytes, n, base};
  out.reserve_more(n / 3 + 16);  // ~4 bytes per token on most text
  for (size_t pos = 0; pos < n;) {
    if (out.full()) return;
    size_t end = streaming_->piece_end(text, pos);
    if (end <= pos || end > n) end = n;  // a scanner always advances; guard anyway
    tokens.clear();
    encode_word_checked(*model_, bytes + pos, end - pos, tokens);
    if (tokens.size() == 1 && tokens[0].start == 0 && tokens[0].end == end - pos) {
      // One token for the whole piece (pieces start and end on character boundaries).
      out.push(tokens[0].id, static_cast<uint32_t>(base + pos), static_cast<uint32_t>(base + end), word++);
      pos = end;
      continue;
    }
    for (const HfToken& t : tokens) {
      out.push(t.id, chars.start(pos + t.start), chars.end(pos + t.end - 1), word);
    }
    ++word;
    pos = end;
  }
}

// Metaspace on one piece (tokenizers' Metaspace::pre_tokenize): its spaces become the replacement
// (applied when the model reads the piece, see encode_text_pieces), a replacement is prepended
// unless the piece already starts with one (always; first: only where the piece starts at original
// offset 0), and with `split` the piece is cut before every replacement (merged with the next).
namespace {

void metaspace_split(const PreTokenizerStep& st, std::string_view text, const Alignment& where, const Piece& p,
                     std::vector<Piece>& next) {
  const std::string& r = st.replacement;
  // (The first byte is compared before the rest: this runs on every character of the text.)
  auto delimiter_at = [&](uint32_t k) {
    if (text[k] == ' ') return true;
    if (r.empty()) return true;  // the empty string matches everywhere
    return text[k] == r[0] && k + r.size() <= p.end && text.compare(k, r.size(), r) == 0;
  };
  const bool starts = delimiter_at(p.start);
  using Scheme = PreTokenizerStep::Prepend;
  const bool prefix = st.prepend_scheme == Scheme::kUnconditional ||
                      (!starts && (st.prepend_scheme == Scheme::kAlways ||
                                   (st.prepend_scheme == Scheme::kFirst && where.start_of(p.start) == 0)));
  if (!st.split) {
    next.push_back(Piece{p.start, p.end, prefix});
    return;
  }
  uint32_t begin = p.start;
  bool first = true;
  // ASCII bytes other than the space are one character each and no delimiter (unless the
  // replacement starts with one): skipped eight at a time.
  const bool skip_ascii = !r.empty() && static_cast<uint8_t>(r[0]) >= 0x80;
  for (uint32_t k = p.start; k < p.end;) {
    if (skip_ascii && k > begin && static_cast<uint8_t>(text[k]) < 0x80) {  // (other scripts go char by char)
      k = static_cast<uint32_t>(swar::skip(reinterpret_cast<const uint8_t*>(text.data()), k, p.end,
                                           [](uint64_t x) { return swar::non_ascii_or_byte(x, ' '); }));
      if (k >= p.end) break;
    }
    if (k > begin && delimiter_at(k)) {
      next.push_back(Piece{begin, k, first && prefix});
      first = false;
      begin = k;
    }
    k += text[k] == ' ' ? 1 : sequence_length(static_cast<uint8_t>(text[k]));
  }
  if (begin < p.end) next.push_back(Piece{begin, p.end, first && prefix});
}

// A token whose first and last bytes are the normalized bytes `first` and `last`: its offsets are
// those characters' bounds, found only where offsets are kept (an ids-only encode would compute
// and drop them: words past the short cache's 16 bytes, most of bert's on the 39 scripts).
[[gnu::always_inline]] inline void push_token(RawEncoding& out, const Alignment& where, uint32_t id, uint32_t first, uint32_t last,
                                              uint32_t word) {
  if (out.with_offsets) out.push(id, where.start_of(first), where.end_of(last), word);
  else out.ids.push_back(id);
}

// Tokens of a rewritten piece: token bytes [start, end) of `input` (what the model saw) come from
// the normalized bytes source[start], ..., source[end - 1]. `unk_text`: see encode_text_pieces.
void emit_rewritten(const std::vector<HfToken>& tokens, const char* input, const std::vector<uint32_t>& source,
                    const Alignment& where, int64_t unk_text, uint32_t word, RawEncoding& out) {
  for (const HfToken& t : tokens) {
    if (t.end <= t.start || t.end > source.size()) continue;  // only a damaged model gets here
    if (static_cast<int64_t>(t.id) == unk_text) out.note_text(std::string_view(input + t.start, t.end - t.start));
    push_token(out, where, t.id, source[t.start], source[t.end - 1], word);
  }
}

// The SentencePiece shape (a character BPE that segments, behind Metaspace without split): the
// model would cut the rewritten piece into words before U+2581 anyway, so find the words in the
// text (where a space or the prefix stands for the replacement r) and hand each to the model whole.
// Same tokens and offsets as rewriting the piece and calling encode_word on it.
//
// word(begin, end, prefixed) is called for each word, text[begin, end) as the model sees it: every
// space as r, behind r when `prefixed` (the piece's prefix, on its first word only); it returns
// false to stop.
template <class Word>
void for_each_sentencepiece_word(const HfBpeModel& model, const std::string& r, std::string_view text, const Piece& p,
                                 Word&& word) {
  const auto* t = reinterpret_cast<const uint8_t*>(text.data());
  const auto* rb = reinterpret_cast<const uint8_t*>(r.data());
  // Whether the character at k is the replacement itself (compared inline: a character is short).
  auto is_replacement = [&](uint32_t k, uint32_t n) {
    if (n != r.size()) return false;
    for (uint32_t b = 0; b < n; ++b) {
      if (t[k + b] != rb[b]) return false;
    }
    return true;
  };
  uint32_t begin = p.start;
  bool prefixed = p.prefix;
  // The word's last character as the model sees it: r (a space, or the prefix) or text[last, last + last_len).
  bool last_is_r = p.prefix;
  uint32_t last = 0, last_len = 0;
  bool after_inert = p.prefix && model.inert(rb[0]);  // the word's last character is inert
  for (uint32_t k = p.start; k < p.end;) {
    const bool space = t[k] == ' ';
    const uint32_t n = std::min<uint32_t>(space ? 1 : sequence_length(t[k]), p.end - k);
    const bool mark = space || is_replacement(k, n);
    const bool here_inert = model.inert(space ? rb[0] : t[k]);
    if ((prefixed || k > begin) &&
        (here_inert || after_inert ||
         (mark && (last_is_r ? model.may_end_word(rb, r.size()) : model.may_end_word(t + last, last_len))))) {
      if (!word(begin, k, prefixed)) return;
      begin = k;
      prefixed = false;
    }
    after_inert = here_inert;
    last_is_r = space;
    last = k;
    last_len = n;
    k += n;
    // No cut comes before a character that is not a space, not r and not inert, unless the one
    // before it is inert: so after a character that is not inert, such characters are skipped
    // bytewise up to the next space, inert ASCII character or byte that could start r (a lead
    // byte, so the stop is a character boundary).
    if (!here_inert) {
      const uint32_t from = k;
      while (k < p.end && t[k] != ' ' && t[k] != rb[0] && !model.inert(t[k])) ++k;
      if (k > from) {
        last_is_r = false;
        last = k - 1;
        while (last > from && is_continuation(t[last])) --last;
        last_len = k - last;
      }
    }
  }
  if (prefixed || p.end > begin) word(begin, p.end, prefixed);
}

struct SentencePieceScratch {
  std::vector<HfToken> tokens;
  std::string buf;
  std::vector<uint32_t> source;
};

// The rewritten word of for_each_sentencepiece_word into buf, and with kSource the normalized
// byte behind each of its bytes into source (a character's bytes and its r all behind its start;
// the prefix behind the piece's start).
template <bool kSource>
void rewrite_sentencepiece_word(const std::string& r, std::string_view text, const Piece& p, uint32_t begin,
                                uint32_t end, bool prefixed, std::string& buf, std::vector<uint32_t>& source) {
  buf.clear();
  if (kSource) source.clear();
  if (prefixed) {
    buf.append(r);
    if (kSource) source.insert(source.end(), r.size(), p.start);
  }
  for (uint32_t k = begin; k < end;) {
    if (text[k] == ' ') {
      buf.append(r);
      if (kSource) source.insert(source.end(), r.size(), k);
      ++k;
      continue;
    }
    // Up to the next space at once (offsets: a character's bytes all behind its start).
    const char* space = static_cast<const char*>(std::memchr(text.data() + k, ' ', end - k));
    const uint32_t stop = space != nullptr ? static_cast<uint32_t>(space - text.data()) : end;
    buf.append(text.data() + k, stop - k);
    if (kSource) {
      for (uint32_t c = k; c < stop;) {
        const uint32_t n = std::min<uint32_t>(sequence_length(static_cast<uint8_t>(text[c])), stop - c);
        source.insert(source.end(), n, c);
        c += n;
      }
    }
    k = stop;
  }
}

void encode_sentencepiece_words(const HfBpeModel& model, const std::string& r, std::string_view text,
                                const Alignment& where, const Piece& p, RawEncoding& out, uint32_t word) {
  SentencePieceScratch& scratch = thread_scratch<SentencePieceScratch>();
  for_each_sentencepiece_word(model, r, text, p, [&](uint32_t begin, uint32_t end, bool prefixed) {
    rewrite_sentencepiece_word<true>(r, text, p, begin, end, prefixed, scratch.buf, scratch.source);
    scratch.tokens.clear();
    model.encode_one_word(reinterpret_cast<const uint8_t*>(scratch.buf.data()), scratch.buf.size(), scratch.tokens);
    emit_rewritten(scratch.tokens, scratch.buf.data(), scratch.source, where, -1, word, out);
    return !out.full();  // the words so far are the encoding's first tokens
  });
}

// Ids only: a word met before costs one probe of the thread's ShortPieceCache, keyed by its bytes
// in the text and tagged by whether r is prepended (the rewritten word is a function of both).
void encode_sentencepiece_ids(const HfBpeModel& model, const std::string& r, std::string_view text, const Piece& p,
                              const WordOwners& owners, RawEncoding& out) {
  SentencePieceScratch& scratch = thread_scratch<SentencePieceScratch>();
  ShortPieceCache& hot = ShortPieceCache::local();
  const bool keeps = owners.plain != 0;  // (set for every model but byte-level BPE)
  const uint16_t tag_plain = keeps ? hot.tag_of(owners.plain) : 0, tag_prefixed = keeps ? hot.tag_of(owners.prefixed) : 0;
  const size_t keyable_end = text.size() >= ShortPieceCache::kMaxLen ? text.size() - ShortPieceCache::kMaxLen + 1 : 0;
  const auto* t = reinterpret_cast<const uint8_t*>(text.data());
  std::vector<uint32_t>& ids = out.ids;
  for_each_sentencepiece_word(model, r, text, p, [&](uint32_t begin, uint32_t end, bool prefixed) {
    const bool cached = keeps && end > begin && end - begin <= ShortPieceCache::kMaxLen && begin < keyable_end;
    const uint16_t tag = prefixed ? tag_prefixed : tag_plain;
    ShortPieceCache::Key key{};
    if (cached) {
      key = ShortPieceCache::make_key(t + begin, end - begin, tag);
      if (hot.find(tag, key, ids)) return !out.full();
    }
    const size_t first = ids.size();
    rewrite_sentencepiece_word<false>(r, text, p, begin, end, prefixed, scratch.buf, scratch.source);
    model.encode_word_ids(reinterpret_cast<const uint8_t*>(scratch.buf.data()), scratch.buf.size(), ids);
    if (cached && ids.size() - first <= ShortPieceCache::kMaxIds) hot.put(tag, key, ids.data() + first, ids.size() - first);
    return !out.full();
  });
}

struct TextPiecesScratch {
  std::vector<HfToken> tokens;
  std::string scratch;
  std::vector<uint32_t> source;  // normalized byte behind each scratch byte
};

// The model over the pieces of a pipeline without ByteLevel: the piece's UTF-8 as the model sees
// it (Metaspace's replacement for spaces and prefix), offsets mapped back through `where`.
// `unk_text`: the unk id of a Unigram model, whose unk tokens show the text they cover (tokenizers'
// Unigram::tokenize makes the token from the piece's string), -1 otherwise.
void encode_text_pieces(const HfModel& model, const PreTokenizerStep* metaspace, int64_t unk_text, std::string_view text,
                        const Alignment& where, const std::vector<Piece>& pieces, RawEncoding& out, uint32_t& word,
                        const WordOwners& owners) {
  auto note_unk = [&](const HfToken& t, const char* input) {
    if (static_cast<int64_t>(t.id) == unk_text) out.note_text(std::string_view(input + t.start, t.end - t.start));
  };
  const auto* bpe = dynamic_cast<const HfBpeModel*>(&model);
  if (bpe != nullptr && bpe->segments() && metaspace != nullptr && !metaspace->split) {
    for (const Piece& p : pieces) {
      if (out.full()) return;
      if (out.with_offsets) encode_sentencepiece_words(*bpe, metaspace->replacement, text, where, p, out, word);
      else encode_sentencepiece_ids(*bpe, metaspace->replacement, text, p, owners, out);
      ++word;
    }
    return;
  }
  TextPiecesScratch& sc = thread_scratch<TextPiecesScratch>();  // (see core/thread_scratch.h)
  std::vector<HfToken>& tokens = sc.tokens;
  std::string& scratch = sc.scratch;
  std::vector<uint32_t>& source = sc.source;
  const std::string empty;
  const std::string& r = metaspace ? metaspace->replacement : empty;
  // Ids only: words of up to 16 bytes go through the thread's ShortPieceCache, keyed by their
  // bytes in the text and tagged by whether the replacement is prepended, so a word met before
  // costs one probe instead of the prefixed copy, the model's word cache and the token checks.
  // (With offsets the tokens' ends are needed, which the cache does not keep; so are the texts of
  // Unigram's unk tokens, which ids alone leave out: RawEncoding::note_text.)
  ShortPieceCache* hot = nullptr;
  uint16_t tag_plain = 0, tag_prefixed = 0;
  size_t keyable_end = 0;
  if (!out.with_offsets && owners.plain != 0) {
    hot = &ShortPieceCache::local();
    tag_plain = hot->tag_of(owners.plain);
    tag_prefixed = hot->tag_of(owners.prefixed);
    keyable_end = text.size() >= ShortPieceCache::kMaxLen ? text.size() - ShortPieceCache::kMaxLen + 1 : 0;
  }
  auto cached = [&](const Piece& p) { return p.end - p.start <= ShortPieceCache::kMaxLen && p.start < keyable_end; };
  auto key_of = [&](const Piece& p) {
    return ShortPieceCache::make_key(reinterpret_cast<const uint8_t*>(text.data()) + p.start, p.end - p.start,
                                     p.prefix ? tag_prefixed : tag_plain);
  };
  constexpr size_t kAhead = 8;  // slots are prefetched this many pieces ahead, so that misses overlap
  for (size_t i = 0; hot != nullptr && i < std::min(kAhead, pieces.size()); ++i) {
    if (cached(pieces[i])) hot->prefetch(key_of(pieces[i]));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (out.full()) return;  // pieces encode alone: the tokens so far are the encoding's first ones
    if (hot != nullptr && i + kAhead < pieces.size() && cached(pieces[i + kAhead])) hot->prefetch(key_of(pieces[i + kAhead]));
    const auto* bytes = reinterpret_cast<const uint8_t*>(text.data()) + p.start;
    const size_t n = p.end - p.start;
    tokens.clear();
    const bool spaces = metaspace && std::memchr(bytes, ' ', n) != nullptr;
    if (hot != nullptr && !spaces && cached(p)) {
      const uint16_t tag = p.prefix ? tag_prefixed : tag_plain;
      const ShortPieceCache::Key key = key_of(p);
      if (hot->find(tag, key, out.ids)) {
        ++word;
        continue;
      }
      if (p.prefix) {
        scratch.assign(r);
        scratch.append(reinterpret_cast<const char*>(bytes), n);
        encode_word_checked(model, reinterpret_cast<const uint8_t*>(scratch.data()), scratch.size(), tokens);
      } else {
        encode_word_checked(model, bytes, n, tokens);
      }
      // Up to kMaxRunIds ids are offered: put() keeps 3, or a run (find() above reads both).
      uint32_t ids[ShortPieceCache::kMaxRunIds];
      bool keep = tokens.size() <= ShortPieceCache::kMaxRunIds;
      for (size_t k = 0; k < tokens.size(); ++k) {
        const HfToken& t = tokens[k];
        if (p.prefix && t.end <= t.start) {  // as the loop below (only a damaged model gets here)
          keep = false;
          continue;
        }
        if (k < ShortPieceCache::kMaxRunIds) ids[k] = t.id;
        out.ids.push_back(t.id);
      }
      if (keep) hot->put(tag, key, ids, tokens.size());
      ++word;
      continue;
    }
    if (p.prefix && !spaces) {
      // The common Metaspace piece (a word after WhitespaceSplit): r + the piece, whose byte k >= |r|
      // is the piece's byte k - |r| and whose prefix bytes stand for the first character.
      scratch.assign(r);
      scratch.append(reinterpret_cast<const char*>(bytes), n);
      encode_word_checked(model, reinterpret_cast<const uint8_t*>(scratch.data()), scratch.size(), tokens);
      const uint32_t shift = static_cast<uint32_t>(r.size());
      auto at = [&](uint32_t k) { return k < shift ? p.start : p.start + k - shift; };
      for (const HfToken& t : tokens) {
        if (t.end <= t.start || t.end > scratch.size()) continue;  // only a damaged model gets here
        note_unk(t, scratch.data());
        push_token(out, where, t.id, at(t.start), at(t.end - 1), word);
      }
      ++word;
      continue;
    }
    if (!p.prefix && !spaces) {
      encode_word_checked(model, bytes, n, tokens);
      for (const HfToken& t : tokens) {
        note_unk(t, text.data() + p.start);
        push_token(out, where, t.id, p.start + t.start, p.start + t.end - 1, word);
      }
      ++word;
      continue;
    }
    scratch.clear();
    source.clear();
    if (p.prefix) {  // the prepended character shares the first character's alignment
      scratch += r;
      source.insert(source.end(), r.size(), p.start);
    }
    for (uint32_t k = p.start; k < p.end; ++k) {
      if (text[k] == ' ' && metaspace) {
        scratch += r;
        source.insert(source.end(), r.size(), k);
      } else {
        scratch += text[k];
        source.push_back(k);
      }
    }
    encode_word_checked(model, reinterpret_cast<const uint8_t*>(scratch.data()), scratch.size(), tokens);
    emit_rewritten(tokens, scratch.data(), source, where, unk_text, word, out);
    ++word;
  }
}

// encode_text_split's working memory.
struct SplitScratch {
  std::string normalized;
  ByteRanges align;  // normalized byte -> original range, when normalizing changed lengths
  std::vector<AddedSplit> splits;
  std::vector<Piece> pieces, next;
  ByteRanges ranges;
  std::string scratch;
  std::vector<uint32_t> char_starts;
  std::vector<HfToken> tokens;
};

}  // namespace

void HfEngine::encode_text_split(std::string_view segment, uint32_t base, bool encode_special_tokens,
                                 RawEncoding& out, uint32_t& word) const {
  // Normalize; the alignment stays implicit while the text is unchanged.
  SplitScratch& sc = thread_scratch<SplitScratch>();  // (see core/thread_scratch.h)
  std::string& normalized = sc.normalized;
  ByteRanges& align = sc.align;
  std::string_view text = segment;
  bool explicit_align = false;
  const bool changes = pipeline_.normalizer && !pipeline_.normalizer->is_identity(segment);
  bool separators_left = false;  // CJK chars left without their spaces: the Bert splitter isolates them
  size_t resume = 0;  // where a failed same-length pass leaves the text to apply_text
  if (changes && pipeline_.normalizer->apply_same_length(segment, normalized, separators_ok_ ? &separators_left : nullptr,
                                                         &resume)) {
    text = normalized;  // same characters, same lengths: the alignment stays implicit
  } else if (changes && !out.with_offsets && !ids_read_alignment_ &&
             pipeline_.normalizer->apply_text(segment, normalized, resume)) {
    text = normalized;  // ids only: no offset is read, so no alignment is built (`where` is a stand-in)
  } else if (changes) {
    normalized.assign(segment.data(), segment.size());
    // Each byte's original range is its character's: written in place, ASCII bytes without
    // looking for continuations (a push per byte was a tenth of bert's time on 39 scripts).
    const auto* s = reinterpret_cast<const uint8_t*>(segment.data());
    const uint32_t n = static_cast<uint32_t>(segment.size());
    align.resize(n);
    std::pair<uint32_t, uint32_t>* a = align.data();
    for (uint32_t i = 0; i < n;) {
      if (s[i] < 0x80) {
        a[i] = {base + i, base + i + 1};
        ++i;
        continue;
      }
      uint32_t j = i + 1;
      while (j < n && is_continuation(s[j])) ++j;
      for (uint32_t k = i; k < j; ++k) a[k] = {base + i, base + j};
      i = j;
    }
    if (pipeline_.normalizer->apply(normalized, align)) {
      text = normalized;
      explicit_align = true;
    }
  }
  const Alignment where = explicit_align ? Alignment(text, &align) : Alignment(text, base);
  std::vector<AddedSplit>& splits = sc.splits;
  if (!explicit_align && streaming_ != nullptr) {
    if (added_normalized_.empty()) {
      encode_streaming(text, base, out, word);
      return;
    }
    // Normalized added tokens (DeepSeek-V3 has 15) cut the text as in the general path below;
    // each part between them streams on its own, as the pre-tokenizers see it there.
    splits.clear();
    added_normalized_.split(text, encode_special_tokens, splits);
    for (const AddedSplit& s : splits) {
      if (out.full()) return;
      if (s.end <= s.start) continue;
      const std::string_view part = text.substr(s.start, s.end - s.start);
      if (s.token >= 0) {
        emit_added(added_normalized_.token(static_cast<size_t>(s.token)), part, where.start_of(s.start),
                   where.end_of(s.end - 1), out, word);
      } else {
        encode_streaming(part, base + s.start, out, word);
      }
    }
    return;
  }

  splits.clear();
  added_normalized_.split(text, encode_special_tokens, splits);

  std::vector<Piece>& pieces = sc.pieces;
  std::vector<Piece>& next = sc.next;
  ByteRanges& ranges = sc.ranges;
  std::string& scratch = sc.scratch;
  std::vector<uint32_t>& char_starts = sc.char_starts;
  std::vector<HfToken>& tokens = sc.tokens;
  const auto& steps = pipeline_.pre_tokenizers;

  for (const AddedSplit& s : splits) {
    if (out.full()) return;
    if (s.end <= s.start) continue;
    if (s.token >= 0) {
      emit_added(added_normalized_.token(static_cast<size_t>(s.token)), text.substr(s.start, s.end - s.start),
                 where.start_of(s.start), where.end_of(s.end - 1), out, word);
      continue;
    }

    pieces.clear();
    pieces.push_back(Piece{s.start, s.end, false});
    for (size_t step = 0; step < steps.size(); ++step) {
      const PreTokenizerStep& st = steps[step];
      next.clear();
      for (const Piece& p : pieces) {
        if (st.kind == PreTokenizerStep::Kind::kMetaspace) {
          metaspace_split(st, text, where, p, next);
        } else if (step < byte_level_step_) {
          // Before ByteLevel the piece is plain normalized text.
          ranges.clear();
          if (separators_left) st.splitter->split_isolating_cjk(text.substr(p.start, p.end - p.start), ranges);
          else st.splitter->split(text.substr(p.start, p.end - p.start), ranges);
          for (const auto& [a, b] : ranges) next.push_back(Piece{p.start + a, p.start + b, false});
        } else if (step == byte_level_step_) {
          const bool prefix = st.add_prefix_space && text[p.start] != ' ';
          if (!st.splitter) {
            next.push_back(Piece{p.start, p.end, prefix});
            continue;
          }
          ranges.clear();
          if (!prefix) {
            st.splitter->split(text.substr(p.start, p.end - p.start), ranges);
            for (const auto& [a, b] : ranges) next.push_back(Piece{p.start + a, p.start + b, false});
          } else {
            scratch.assign(1, ' ');
            scratch.append(text.data() + p.start, p.end - p.start);
            st.splitter->split(scratch, ranges);
            for (const auto& [a, b] : ranges) {
              // Offset 0 of scratch is the inserted space.
              next.push_back(Piece{p.start + (a == 0 ? 0 : a - 1), p.start + b - 1, a == 0});
            }
          }
        } else {
          // After ByteLevel the text the splitter sees is the byte-level form of the piece.
          const ByteLevelTable& bl = byte_level();
          scratch.clear();
          char_starts.clear();
          const uint32_t n_virtual = (p.end - p.start) + (p.prefix ? 1 : 0);
          for (uint32_t v = 0; v < n_virtual; ++v) {
            const uint8_t byte = (p.prefix && v == 0) ? uint8_t{' '}
                                                      : static_cast<uint8_t>(text[p.start + v - (p.prefix ? 1 : 0)]);
            char_starts.push_back(static_cast<uint32_t>(scratch.size()));
            scratch.append(bl.utf8[byte], bl.len[byte]);
          }
          char_starts.push_back(static_cast<uint32_t>(scratch.size()));
          ranges.clear();
          st.splitter->split(scratch, ranges);
          auto to_virtual = [&](uint32_t off) {
            // The character that starts at `off` (splitters cut at character boundaries).
            size_t lo = 0, hi = char_starts.size() - 1;
            while (lo < hi) {
              const size_t mid = (lo + hi) / 2;
              if (char_starts[mid] < off) lo = mid + 1; else hi = mid;
            }
            return static_cast<uint32_t>(lo);
          };
          for (const auto& [a, b] : ranges) {
            const uint32_t va = to_virtual(a), vb = to_virtual(b);
            if (vb <= va) continue;
            const bool has_prefix = p.prefix && va == 0;
            const uint32_t shift = p.prefix ? 1 : 0;
            next.push_back(Piece{p.start + (has_prefix ? 0 : va - shift), p.start + vb - shift, has_prefix});
          }
        }
      }
      pieces.swap(next);
    }

    if (!is_byte_level()) {
      encode_text_pieces(*model_, metaspace_, unk_text_, text, where, pieces, out, word, word_owners_);
      continue;
    }
    // Ids only on a byte-level fast path: the pieces go straight to the tiktoken engine, as in
    // encode_streaming_fast (offsets, and pieces with an inserted space, take the loop below).
    if (!out.with_offsets && bpe_ && bpe_->has_fast_path() &&
        std::none_of(pieces.begin(), pieces.end(), [](const Piece& p) { return p.prefix; })) {
      size_t k = 0;
      encode_pieces_fast<false>(text, 0, out, word, [&](size_t& start, size_t& end) {
        for (; k < pieces.size() && pieces[k].end <= pieces[k].start; ++k) ++word;  // as the loop below counts them
        if (k >= pieces.size()) return false;
        start = pieces[k].start;
        end = pieces[k].end;
        ++k;
        return true;
      });
      continue;
    }
    // The model, piece by piece.
    for (const Piece& p : pieces) {
      if (out.full()) return;
      const uint8_t* bytes = reinterpret_cast<const uint8_t*>(text.data()) + p.start;
      size_t n = p.end - p.start;
      if (p.prefix) {
        scratch.assign(1, ' ');
        scratch.append(text.data() + p.start, n);
        bytes = reinterpret_cast<const uint8_t*>(scratch.data());
        n += 1;
      }
      tokens.clear();
      encode_word_checked(*model_, bytes, n, tokens);
      const uint32_t shift = p.prefix ? 1 : 0;
      // The inserted space takes the place of the piece's first character and its alignment
      // (tokenizers' NormalizedString::prepend; the character itself then shares it).
      const uint32_t first = p.start < text.size() ? p.start : p.start - 1;
      for (const HfToken& t : tokens) {
        push_token(out, where, t.id, p.prefix && t.start == 0 ? first : p.start + t.start - shift,
                   p.prefix && t.end == 1 ? first : p.start + t.end - 1 - shift, word);
      }
      ++word;
    }
  }
}

// The batch stages. A document's pieces are what encode_streaming_fast walks (the scanner over
// each text split between added tokens, on the normalized text when normalizing keeps lengths),
// so encoding them with the tiktoken engine and mapping ranks to ids gives encode()'s ids; the
// offsets follow from the tokens' byte lengths, since the tokens tile the text in order.
std::shared_ptr<const TiktokenEngine> HfEngine::piece_engine() const {
  if (!fast_ || streaming_ == nullptr || !bpe_ || !bpe_->has_fast_path() || bpe_->options().char_level ||
      bpe_->segments() || bpe_->options().ignore_merges || bpe_->fast_needs_check()) {
    return nullptr;
  }
  return fast_;
}

bool HfEngine::mark_pieces(std::string_view text, bool encode_special_tokens, uint8_t* text_out, uint8_t* marks,
                           std::vector<std::pair<uint32_t, HfAddedAt>>& added) const {
  const size_t n = text.size();
  if (n == 0) return true;
  std::memcpy(text_out, text.data(), n);
  std::memset(marks, kMarkInside, n);
  const size_t first_added = added.size();
  auto give_up = [&] {
    std::memset(marks, kMarkDropped, n);
    added.resize(first_added);
    return false;
  };
  thread_local std::vector<AddedSplit> splits, inner;
  thread_local std::string normalized;
  // Marks the splits of `part` (at byte `at` of text): an added token of `set`, or text cut into
  // pieces by the scanner. False where the splits do not tile `part` (raw_from_pieces could not
  // place the tokens; encode() drops such bytes, which no tokenizer.json here produces).
  auto mark_splits = [&](const AddedTokenSet& set, const std::vector<AddedSplit>& parts, std::string_view part,
                         size_t at, auto&& text_part) {
    size_t next = 0;
    for (const AddedSplit& s : parts) {
      if (s.end <= s.start) continue;
      if (s.start != next) return false;
      next = s.end;
      const std::string_view seg = part.substr(s.start, s.end - s.start);
      if (s.token >= 0) {
        const AddedEntry t = set.token(static_cast<size_t>(s.token));
        marks[at + s.start] = kMarkSpecial;
        added.emplace_back(static_cast<uint32_t>(at + s.start), HfAddedAt{t.id, s.end - s.start, t.show_text() || seg != t.content});
      } else if (!text_part(seg, at + s.start)) {
        return false;
      }
    }
    return next == part.size();
  };
  auto mark_scanned = [&](std::string_view seg, size_t at) {
    for (size_t pos = 0; pos < seg.size();) {
      size_t end = streaming_->piece_end(seg, pos);
      if (end <= pos || end > seg.size()) end = seg.size();  // as encode_streaming_fast
      marks[at + pos] = kMarkPiece;
      pos = end;
    }
    return true;
  };
  // encode_text_split on one text split of the raw added tokens: normalized (when that keeps every
  // length), cut at the normalized added tokens (only on text normalizing leaves alone), scanned.
  auto mark_text = [&](std::string_view seg, size_t at) {
    std::string_view scan = seg;
    if (pipeline_.normalizer && !pipeline_.normalizer->is_identity(seg)) {
      if (!added_normalized_.empty() || !pipeline_.normalizer->apply_same_length(seg, normalized) ||
          normalized.size() != seg.size()) {
        return false;
      }
      std::memcpy(text_out + at, normalized.data(), seg.size());
      scan = normalized;
    }
    if (added_normalized_.empty()) return mark_scanned(scan, at);
    inner.clear();
    added_normalized_.split(scan, encode_special_tokens, inner);
    return mark_splits(added_normalized_, inner, scan, at, mark_scanned);
  };
  splits.clear();
  added_raw_.split(text, encode_special_tokens, splits);
  return mark_splits(added_raw_, splits, text, 0, mark_text) || give_up();
}

void HfEngine::raw_from_pieces(std::string_view text, const uint32_t* values, size_t n, const HfAddedAt* added,
                               size_t n_added, RawEncoding& out) const {
  out.clear();
  const uint32_t n_ranks = fast_->n_ids();
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const CharBounds chars{bytes, text.size(), 0};
  out.reserve_more(out.limit < n ? out.limit : n);
  // Offsets need the character walks of CharBounds only where the text has a non-ASCII byte.
  bool ascii = true;
  for (size_t k = 0; k < text.size() && ascii; ++k) ascii = bytes[k] < 0x80;
  size_t pos = 0;
  for (size_t i = 0; i < n && !out.full(); ++i) {
    const uint32_t v = values[i];
    uint32_t id;
    size_t len;
    if (v < n_ranks) {
      id = rank_to_id_[v];  // < n_ids: checked by ready()
      len = fast_->token_length(v);
    } else {
      if (v - n_ranks >= n_added) throw std::logic_error("an added-token slot past the batch's added tokens");
      const HfAddedAt& a = added[v - n_ranks];
      id = a.id;
      len = a.len;
      if (a.text) out.note_text(text.substr(pos, len));
    }
    if (len == 0 || pos + len > text.size()) {
      throw CartridgeError("the tokens of the batch stages do not tile a document: the nested tiktoken tables "
                           "are damaged (rebuild the cartridge)");
    }
    if (!out.with_offsets) {
      out.ids.push_back(id);
    } else if (ascii) {
      out.push(id, static_cast<uint32_t>(pos), static_cast<uint32_t>(pos + len), 0);
    } else {
      out.push(id, chars.start(pos), chars.end(pos + len - 1), 0);
    }
    pos += len;
  }
}

}  // namespace crayon
