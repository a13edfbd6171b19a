#include "engines/tiktoken_engine.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "models/bpe_backtrack.h"
#include "models/piece_cache.h"
#include "core/append_ids.h"
#include "core/double_array.h"
#include "core/swar.h"
#include "core/utf8.h"
#include "text/piece_blocks.h"

namespace crayon {
namespace {

constexpr uint32_t kTKHD = fourcc("TKHD");
constexpr uint32_t kMETA = fourcc("META");
constexpr uint32_t kTOKO = fourcc("TOKO");
constexpr uint32_t kTOKB = fourcc("TOKB");
constexpr uint32_t kTOKK = fourcc("TOKK");
constexpr uint32_t kBTRI = fourcc("BTRI");  // double-array trie of the mergeable tokens: units
constexpr uint32_t kBTVA = fourcc("BTVA");  //   and values
constexpr uint32_t kSTRI = fourcc("STRI");  // double-array trie of the special tokens: units
constexpr uint32_t kSTVA = fourcc("STVA");  //   and values
constexpr uint32_t kSPID = fourcc("SPID");
constexpr uint32_t kSPTO = fourcc("SPTO");
// Backtracking-encoder tables (optional: without them the engine uses the heap encoder).
constexpr uint32_t kBSPL = fourcc("BSPL");
constexpr uint32_t kBSPR = fourcc("BSPR");
constexpr uint32_t kBSLW = fourcc("BSLW");
constexpr uint32_t kBPAR = fourcc("BPAR");
// Bloom filter in front of BPAR, a pair's bits in one word (piece::pair_bloom_word). Cartridges
// before it hold BPBF, a filter laid out otherwise: read as this one it would turn merges away,
// so it is skipped (those cartridges encode without a filter; the same ids, a little slower).
constexpr uint32_t kBPB1 = fourcc("BPB1");
constexpr uint32_t kBPBF = fourcc("BPBF");
constexpr uint32_t kSPTB = fourcc("SPTB");
constexpr uint32_t kTKRX = fourcc("TKRX");  // split regex (UTF-8), fancy-regex dialect

constexpr uint32_t kEngineTiktoken = 1;
// TKHD.pattern values: SplitPattern codes 0..4 (hand-written scanners), or this one: split each
// segment with the regex in TKRX.
constexpr uint32_t kPatternRegex = 5;

// TKHD: the parameters the engine needs, as one fixed struct.
struct TkHeader {
  uint32_t engine;
  uint32_t pattern;
  uint32_t n_ids;
  uint32_t n_specials;
  uint32_t max_token_len;
  uint32_t flags;
  uint64_t reserved;
};
static_assert(sizeof(TkHeader) == 32, "TKHD is 32 bytes");

void add_trie(CartridgeWriter& w, uint32_t units_id, uint32_t values_id, const DoubleArrayData& d) {
  w.add_array(units_id, d.units, kSectionRequired);
  w.add_array(values_id, d.value, kSectionRequired);
}


// Decodes the last UTF-8 character of s; returns its length, or 0 when s does not end with a
// complete, valid sequence.
size_t last_utf8_char(std::string_view s, uint32_t* cp) {
  const size_t n = s.size();
  for (size_t len = 1; len <= 4 && len <= n; ++len) {
    const uint8_t lead = static_cast<uint8_t>(s[n - len]);
    if ((lead & 0xC0) == 0x80) continue;
    size_t want;
    uint32_t v;
    if (lead < 0x80) { want = 1; v = lead; }
    else if ((lead & 0xE0) == 0xC0) { want = 2; v = lead & 0x1F; }
    else if ((lead & 0xF0) == 0xE0) { want = 3; v = lead & 0x0F; }
    else if ((lead & 0xF8) == 0xF0) { want = 4; v = lead & 0x07; }
    else return 0;
    if (want != len) return 0;
    for (size_t i = n - len + 1; i < n; ++i) v = (v << 6) | (static_cast<uint8_t>(s[i]) & 0x3F);
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[want] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
  }
  return 0;
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) { ++i; continue; }
    size_t len;
    uint32_t v;
    if ((c & 0xE0) == 0xC0) { len = 2; v = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; v = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; v = c & 0x07; }
    else return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const uint8_t d = static_cast<uint8_t>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      v = (v << 6) | (d & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace

std::string tiktoken_regex_refusal(std::string_view pat_str) {
  try {
    const Regex re(pat_str, RegexDialect::kFancyRegex);
    if (re.nullable()) {
      return "the pattern can match the empty string (tiktoken BPE-encodes empty pieces and fails)";
    }
  } catch (const RegexError& e) {
    return e.what();
  }
  return std::string();
}

std::string build_tiktoken_cartridge(const TiktokenSource& src) {
  const bool use_regex = src.pattern == SplitPattern::kNone && !src.regex.empty();
  if (use_regex) {
    const std::string why = tiktoken_regex_refusal(src.regex);
    if (!why.empty()) throw std::invalid_argument("split pattern cannot run natively: " + why);
  }
  uint64_t max_id = 0;
  bool any = false;
  // An empty token is accepted as tiktoken accepts it (a real rank file has one): it has an id and
  // decodes to nothing, but it is kept out of the trie, so no encoding ever produces it.
  for (const auto& [bytes, id] : src.mergeable) {
    max_id = std::max<uint64_t>(max_id, id);
    any = true;
  }
  for (const auto& [text, id] : src.specials) {
    if (text.empty()) throw std::invalid_argument("special_tokens contains an empty token");
    max_id = std::max<uint64_t>(max_id, id);
    any = true;
  }
  if (!any) throw std::invalid_argument("the vocabulary is empty");
  if (max_id >= kMaxIds) {
    throw std::invalid_argument("token id " + std::to_string(max_id) + " is too large (ids must be below " +
                                std::to_string(kMaxIds) + ")");
  }
  const uint32_t n_ids = static_cast<uint32_t>(max_id + 1);

  std::vector<const std::string*> by_id(n_ids, nullptr);
  std::vector<uint8_t> kinds(n_ids, static_cast<uint8_t>(TokenKind::kAbsent));
  auto place = [&](const std::string& bytes, uint32_t id, TokenKind k) {
    if (by_id[id] != nullptr) {
      throw std::invalid_argument("token id " + std::to_string(id) +
                                  " is used twice (duplicate token indices in the vocabulary)");
    }
    by_id[id] = &bytes;
    kinds[id] = static_cast<uint8_t>(k);
  };
  for (const auto& [bytes, id] : src.mergeable) place(bytes, id, TokenKind::kMergeable);
  for (const auto& [text, id] : src.specials) {
    // Two special tokens may share an id (o200k_harmony has <|endofprompt|> and
    // <|reserved_200018|>); both encode to it and it decodes to the first, as in tiktoken.
    if (kinds[id] == static_cast<uint8_t>(TokenKind::kSpecial)) continue;
    if (kinds[id] == static_cast<uint8_t>(TokenKind::kMergeable)) {
      throw std::invalid_argument("special token id " + std::to_string(id) + " is also a mergeable rank");
    }
    place(text, id, TokenKind::kSpecial);
  }

  std::vector<uint32_t> offsets(n_ids + 1, 0);
  std::string blob;
  uint32_t max_len = 0;
  for (uint32_t id = 0; id < n_ids; ++id) {
    if (by_id[id] != nullptr) {
      blob += *by_id[id];
      max_len = std::max<uint32_t>(max_len, static_cast<uint32_t>(by_id[id]->size()));
    }
    if (blob.size() > 0xFFFFFFFFull) throw std::invalid_argument("token bytes exceed 4 GiB");
    offsets[id + 1] = static_cast<uint32_t>(blob.size());
  }

  std::vector<std::pair<std::string_view, int32_t>> keys;
  keys.reserve(src.mergeable.size());
  for (const auto& [bytes, id] : src.mergeable) {
    if (!bytes.empty()) keys.emplace_back(bytes, static_cast<int32_t>(id));
  }
  const DoubleArrayData bpe_trie = build_double_array(keys);

  // The backtracking encoder's tables: each token's merge split and the pair -> token table.
  BpeTables tables;
  tables.trie = DoubleArrayView(bpe_trie);
  tables.token_offsets = offsets.data();
  tables.token_bytes = reinterpret_cast<const uint8_t*>(blob.data());
  tables.token_bytes_size = blob.size();
  tables.n_ids = n_ids;
  fill_byte_ranks(tables);
  const BpeSplits splits = compute_bpe_splits(tables);
  const std::vector<PairEntry> pairs = build_pair_table(splits);
  const std::vector<uint64_t> pair_bloom = build_pair_bloom(splits);

  std::vector<std::pair<std::string_view, int32_t>> special_keys;
  std::vector<uint32_t> special_ids;
  std::vector<uint32_t> special_text_offsets{0};
  std::string special_text;
  for (const auto& [text, id] : src.specials) {
    special_keys.emplace_back(text, static_cast<int32_t>(special_ids.size()));
    special_ids.push_back(id);
    special_text += text;
    special_text_offsets.push_back(static_cast<uint32_t>(special_text.size()));
  }
  const DoubleArrayData special_trie = build_double_array(special_keys);

  TkHeader h{};
  h.engine = kEngineTiktoken;
  h.pattern = use_regex ? kPatternRegex : static_cast<uint32_t>(src.pattern);
  h.n_ids = n_ids;
  h.n_specials = static_cast<uint32_t>(special_ids.size());
  h.max_token_len = max_len;

  CartridgeWriter w;
  w.add(kTKHD, std::string(reinterpret_cast<const char*>(&h), sizeof h), kSectionRequired);
  w.add(kMETA, src.meta_json);
  if (use_regex) w.add(kTKRX, src.regex, kSectionRequired);
  w.add_array(kTOKO, offsets, kSectionRequired);
  w.add(kTOKB, blob, kSectionRequired);
  w.add_array(kTOKK, kinds, kSectionRequired);
  add_trie(w, kBTRI, kBTVA, bpe_trie);
  add_trie(w, kSTRI, kSTVA, special_trie);
  w.add_array(kSPID, special_ids, kSectionRequired);
  w.add_array(kSPTO, special_text_offsets, kSectionRequired);
  w.add(kSPTB, special_text, kSectionRequired);
  w.add_array(kBSPL, splits.left);
  w.add_array(kBSPR, splits.right);
  if (!splits.slow.empty()) w.add_array(kBSLW, splits.slow);
  w.add_array(kBPAR, pairs);
  w.add_array(kBPB1, pair_bloom);
  return w.finish();
}

TiktokenEngine::TiktokenEngine(std::shared_ptr<const Cartridge> cartridge)
    : cartridge_(std::move(cartridge)), owner_(new_memo_owner()) {
  const Cartridge& c = *cartridge_;
  static const uint32_t kKnown[] = {kTKHD, kMETA, kTOKO, kTOKB, kTOKK, kBTRI, kBTVA, kSTRI, kSTVA, kSPID, kSPTO, kSPTB,
                                    kBSPL, kBSPR, kBSLW, kBPAR, kBPBF, kBPB1, kTKRX};
  for (const SectionInfo& s : c.sections()) {
    const bool known = std::find(std::begin(kKnown), std::end(kKnown), s.id) != std::end(kKnown);
    if (!known && (s.flags & kSectionRequired)) {
      c.fail("it needs section " + fourcc_name(s.id) + ", which this version of crayon-hf does not understand; upgrade crayon-hf");
    }
  }
  const std::string_view hb = c.bytes(kTKHD);
  if (hb.size() != sizeof(TkHeader)) c.fail("TKHD has the wrong size");
  TkHeader h;
  std::memcpy(&h, hb.data(), sizeof h);
  if (h.engine != kEngineTiktoken) c.fail("it is not a tiktoken-style BPE cartridge (engine " + std::to_string(h.engine) + ")");
  if (h.n_ids == 0 || h.n_ids > kMaxIds) c.fail("implausible vocabulary size " + std::to_string(h.n_ids));
  if (h.pattern == kPatternRegex) {
    if (c.find(kTKRX) == nullptr) c.fail("TKHD asks for a split regex but TKRX is missing");
    const std::string_view rx = c.bytes(kTKRX);
    const std::string why = "its split regex (TKRX) cannot run in this version of crayon-hf: ";
    try {
      regex_ = std::make_unique<const Regex>(rx, RegexDialect::kFancyRegex);
    } catch (const RegexError& e) {
      c.fail(why + e.what());
    }
    if (regex_->nullable()) c.fail(why + "the pattern can match the empty string");
    pattern_ = SplitPattern::kNone;
  } else {
    if (h.pattern > static_cast<uint32_t>(SplitPattern::kLlama3)) c.fail("unknown split pattern " + std::to_string(h.pattern));
    pattern_ = static_cast<SplitPattern>(h.pattern);
  }

  size_t n_off, n_kinds;
  bpe_.token_offsets = c.array<uint32_t>(kTOKO, &n_off);
  const std::string_view blob = c.bytes(kTOKB);
  bpe_.token_bytes = reinterpret_cast<const uint8_t*>(blob.data());
  bpe_.token_bytes_size = blob.size();
  kinds_ = c.array<uint8_t>(kTOKK, &n_kinds);
  if (n_off != uint64_t{h.n_ids} + 1) c.fail("TOKO does not have n_ids + 1 entries");
  if (n_kinds != h.n_ids) c.fail("TOKK does not have n_ids entries");
  if (bpe_.token_offsets[0] != 0 || bpe_.token_offsets[h.n_ids] != blob.size()) {
    c.fail("TOKO does not span TOKB");
  }
  bpe_.n_ids = h.n_ids;
  bpe_.trie = load_trie(c, kBTRI, kBTVA);
  fill_byte_ranks(bpe_);

  size_t n_sp;
  special_ids_ = c.array<uint32_t>(kSPID, &n_sp);
  if (n_sp != h.n_specials) c.fail("SPID does not have n_specials entries");
  n_specials_ = h.n_specials;
  for (uint32_t i = 0; i < n_specials_; ++i) {
    if (special_ids_[i] >= h.n_ids) c.fail("special token id out of range");
  }
  size_t n_spto;
  special_text_offsets_ = c.array<uint32_t>(kSPTO, &n_spto);
  const std::string_view sptb = c.bytes(kSPTB);
  special_text_ = sptb.data();
  special_text_size_ = sptb.size();
  if (n_spto != uint64_t{n_specials_} + 1) c.fail("SPTO does not have n_specials + 1 entries");
  specials_ = SpecialTokenMatcher(load_trie(c, kSTRI, kSTVA), n_specials_);

  if (c.find(kBSPL) != nullptr && c.find(kBSPR) != nullptr && c.find(kBPAR) != nullptr) {
    size_t nl, nr, np;
    const uint32_t* left = c.array<uint32_t>(kBSPL, &nl);
    const uint32_t* right = c.array<uint32_t>(kBSPR, &nr);
    const PairEntry* pairs = c.array<PairEntry>(kBPAR, &np);
    if (nl != h.n_ids || nr != h.n_ids) c.fail("BSPL/BSPR do not have n_ids entries");
    if (np > 0xFFFFFFFFu || !validate_pair_table(static_cast<uint32_t>(np))) c.fail("BPAR capacity is not a power of two");
    backtrack_.split_left = left;
    backtrack_.split_right = right;
    backtrack_.pairs = PairTableView(pairs, static_cast<uint32_t>(np));
    if (c.find(kBPB1) != nullptr) {
      size_t nb;
      const uint64_t* bloom = c.array<uint64_t>(kBPB1, &nb);
      if (nb == 0 || (nb & (nb - 1)) != 0) c.fail("BPB1 size is not a power of two");
      backtrack_.pairs.set_bloom(bloom, nb);
    }
    if (c.find(kBSLW) != nullptr) {
      size_t ns;
      backtrack_.slow = c.array<uint8_t>(kBSLW, &ns);
      if (ns != h.n_ids) c.fail("BSLW does not have n_ids entries");
    }
    backtrack_.memo_owner = owner_;
    use_backtrack_ = true;
  }
  pieces_ = make_piece_tables(bpe_, use_backtrack_ ? &backtrack_ : nullptr);
  // What a piece's encode reads, for huge pages (core/huge_pages.h).
  for (const uint32_t id : {kTOKO, kBTRI, kBTVA, kBSPL, kBSPR, kBSLW, kBPAR, kBPB1}) c.mark_hot(id);
}

void TiktokenEngine::check_tables() const {
  const Cartridge& c = *cartridge_;
  // Encoders advance by token lengths taken from TOKO: every length must be a real byte range.
  // (TOKO's size and both ends were checked at load.)
  for (uint32_t id = 0; id < bpe_.n_ids; ++id) {
    if (bpe_.token_offsets[id] > bpe_.token_offsets[id + 1]) c.fail("TOKO offsets are not sorted (token " + std::to_string(id) + ")");
  }
  // The backtracking encoder walks these trees: ids in range, children usable, lengths adding up.
  if (use_backtrack_ && !validate_bpe_splits(bpe_, backtrack_.split_left, backtrack_.split_right)) {
    c.fail("BSPL/BSPR: a token's split does not match the token table");
  }
}

std::string_view TiktokenEngine::meta_json() const {
  const SectionInfo* s = cartridge_->find(kMETA);
  return s == nullptr ? std::string_view() : cartridge_->bytes(kMETA);
}

bool TiktokenEngine::token_bytes(uint32_t id, std::string_view* out) const {
  if (id >= bpe_.n_ids || kinds_[id] == static_cast<uint8_t>(TokenKind::kAbsent)) return false;
  const uint32_t a = bpe_.token_offsets[id];
  const uint32_t b = bpe_.token_offsets[id + 1];
  // Offsets come from the file: check them here rather than scanning all of them at load.
  if (a > b || b > bpe_.token_bytes_size) return false;
  *out = std::string_view(reinterpret_cast<const char*>(bpe_.token_bytes) + a, b - a);
  return true;
}

void TiktokenEngine::byte_pair_encode(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
  bpe_encode_heap(bpe_, piece, n, out);
}

namespace {

// Whether a piece of more than 8 bytes holds a CJK lead byte (E3-E9: kana, CJK punctuation, the
// ideographs). A run of CJK characters answers at its first byte; other pieces are read eight
// bytes a load, the last load overlapping the one before (the byte loop's exit mispredicted on
// 60k of qwen2_5's pieces of 39 scripts, 27k now: -0.3% of the cycles there).
bool has_cjk(const uint8_t* piece, size_t n) {
  if (static_cast<uint8_t>(piece[0] - 0xE3) <= 0xE9 - 0xE3) return true;
  uint64_t x;
  for (size_t i = 0; i + 8 < n; i += 8) {
    std::memcpy(&x, piece + i, 8);
    if (swar::cjk_lead(x) != 0) return true;
  }
  std::memcpy(&x, piece + n - 8, 8);
  return swar::cjk_lead(x) != 0;
}

}  // namespace

void TiktokenEngine::encode_piece(const uint8_t* piece, size_t n, std::vector<uint32_t>& out, bool not_a_token,
                                  const PieceCache::Key* cache_key, PieceCache* caches, ShortPieceCache* hot) const {
  if (const SafeCuts* cuts = cuts_for(piece, n)) return encode_cut(*cuts, piece, n, out, hot);
  const int32_t whole = not_a_token ? -1 : piece::whole_token(pieces_, piece, n);
  if (whole >= 0) {
    out.push_back(static_cast<uint32_t>(whole));
    return;
  }
  // Several tokens. Real text repeats such pieces (61-81% of them on English and code), and BPE
  // on one costs far more than a cache probe, so short ones go through the thread's PieceCache.
  // Single-token pieces never touch it (measured: caching them here too was slower); the
  // ShortPieceCache in front of this function (encode_piece_keyed) is what makes short ones cheap.
  PieceCache& cache = caches != nullptr ? *caches : PieceCache::local();
  if (n <= PieceCache::kMaxLen) {
    const PieceCache::Key key = cache_key != nullptr ? *cache_key : PieceCache::make_key(piece, n);
    const PieceCache::Found found = cache.find(owner_, key, out);
    if (found == PieceCache::kHit) return;
    if (found == PieceCache::kManyIds) return encode_long(piece, n, out, cache.longs());
    const size_t first = out.size();
    bpe(piece, n, out);
    const size_t m = out.size() - first;
    if (m <= PieceCache::kMaxIds) return cache.put(owner_, key, out.data() + first, m);
    cache.put_many_ids(owner_, key);
    cache.longs().put(owner_, LongPieceCache::hash(owner_, piece, n), piece, n, out.data() + first, m);
    return;
  }
  encode_long(piece, n, out, cache.longs());
}

void TiktokenEngine::encode_long(const uint8_t* piece, size_t n, std::vector<uint32_t>& out,
                                 LongPieceCache& cache) const {
  // Pieces the PieceCache cannot hold (longer than its 24 bytes, or of more than its 7 ids): the
  // words of most scripts on an English-centred vocabulary. Past 256 bytes they rarely repeat.
  if (n > LongPieceCache::kMaxLen) return bpe(piece, n, out);
  const uint64_t h = LongPieceCache::hash(owner_, piece, n);
  if (cache.find(owner_, h, piece, n, out)) return;
  const size_t first = out.size();
  bpe(piece, n, out);
  cache.put(owner_, h, piece, n, out.data() + first, out.size() - first);
}

void TiktokenEngine::encode_piece_uncached(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
  if (const SafeCuts* cuts = cuts_for(piece, n)) return encode_cut(*cuts, piece, n, out);
  const int32_t whole = piece::whole_token(pieces_, piece, n);
  if (whole >= 0) {
    out.push_back(static_cast<uint32_t>(whole));
  } else {
    bpe(piece, n, out);
  }
}

const SafeCuts* TiktokenEngine::cuts_for(const uint8_t* piece, size_t n) const {
  // A piece holding CJK characters (lead bytes E3-E9: kana, CJK punctuation, the ideographs) is
  // cut where no token crosses (models/safe_cuts.h): its parts are mostly one or two characters,
  // whose tokens the cuts name, where backtracking over the whole run checked a pair per
  // candidate. Past the lengths encode_small takes, and only where such a character occurs: in
  // Hangul, Thai, Indic, Latin or Cyrillic words tokens cross nearly every boundary, and the
  // checks would only cost. Anywhere in the piece, not only in front: a SentencePiece word of
  // Chinese is a whole paragraph behind however many U+2581 ("▁▁" leads most of zh_xiyouji's),
  // and the scan costs a byte compare where BPE costs a trie walk.
  return n > 8 && has_cjk(piece, n) ? safe_cuts() : nullptr;
}

void TiktokenEngine::encode_cut(const SafeCuts& cuts, const uint8_t* piece, size_t n, std::vector<uint32_t>& out,
                                ShortPieceCache* hot_cache) const {
  // Such a piece skips the PieceCache (its parts are mostly named, and on new text the probe and
  // the store are misses) and the whole-piece walk unless no cut is made: a piece that is a
  // token crosses every boundary inside it, so one cut shows it is not (that walk, three to nine
  // bytes deep before it fails, was a tenth of DeepSeek-V3's time on Chinese).
  ShortPieceCache& hot = hot_cache != nullptr ? *hot_cache : ShortPieceCache::local();
  const uint16_t tag = hot.tag_of(owner_);
  cuts.for_each_part(piece, n, [&](size_t a, size_t b, uint32_t token) {
    if (token != SafeCuts::kNoToken) return out.push_back(token);
    if (b - a < n) return encode_part(cuts, hot, tag, piece + a, b - a, out);
    const int32_t whole = piece::whole_token(pieces_, piece, n);  // no cut: tiktoken's shortcut
    if (whole >= 0) return out.push_back(static_cast<uint32_t>(whole));
    bpe(piece, n, out);
  });
}

void TiktokenEngine::encode_part(const SafeCuts& cuts, ShortPieceCache& hot, uint16_t tag, const uint8_t* part,
                                 size_t n, std::vector<uint32_t>& out) const {
  // The parts that get here are the ones the cuts could not name: mostly three characters or
  // more, whose trie walk reaches levels that are cold on new text, so the thread's cache is
  // asked first. A part is BPE'd as it is: a token is its own BPE only when merges reach it (the
  // split tables say so), which tiktoken's whole-piece shortcut does not ask of a whole piece.
  if (n > ShortPieceCache::kMaxLen) return encode_part_uncached(cuts, part, n, out);
  uint8_t padded[ShortPieceCache::kMaxLen] = {};  // make_key reads 16 bytes
  std::memcpy(padded, part, n);
  const ShortPieceCache::Key key = ShortPieceCache::make_key(padded, n, tag, /*part=*/true);
  if (hot.find(tag, key, out)) return;
  const size_t before = out.size();
  encode_part_uncached(cuts, part, n, out);
  hot.put(tag, key, out.data() + before, out.size() - before);
}

void TiktokenEngine::encode_part_uncached(const SafeCuts& cuts, const uint8_t* part, size_t n,
                                          std::vector<uint32_t>& out) const {
  // Characters that BPE may take whole (SafeCuts::whole_characters): the quadratic loop over at
  // most 8 of them, where backtracking over their bytes cost a pair check per candidate. It is
  // BPE, so a part that is a token merges reach comes out as that token without a walk first.
  if (cuts.whole_characters(part, n)) {
    uint32_t starts[piece::kSmallPiece / 3 + 1], ids[piece::kSmallPiece / 3];
    const uint32_t m = static_cast<uint32_t>(n / 3);
    for (uint32_t i = 0; i <= m; ++i) starts[i] = 3 * i;
    const int32_t got = piece::encode_small_from(pieces_, part, static_cast<uint32_t>(n), starts, m, ids);
    if (got > 0) return append_few_ids(out, ids, static_cast<size_t>(got));
  }
  const int32_t whole = pieces_.split_left != nullptr ? piece::whole_token(pieces_, part, n) : -1;
  if (whole >= 0 && pieces_.split_left[whole] != piece::kNoSplit) return out.push_back(static_cast<uint32_t>(whole));
  bpe(part, n, out);
}

void TiktokenEngine::bpe(const uint8_t* piece, size_t n, std::vector<uint32_t>& out) const {
  // 256 KiB, built from 65,536 pair-table probes (about a millisecond) when first needed.
  byte_pairs_once_([&] { byte_pairs_ = build_byte_pairs(pieces_); });
  bpe_encode_multi(bpe_, pieces_, owner_, piece, n, out, byte_pairs_.empty() ? nullptr : byte_pairs_.data());
}

const SafeCuts* TiktokenEngine::safe_cuts() const {
  cuts_once_([&] { cuts_ = SafeCuts::build(bpe_, kinds_, static_cast<uint8_t>(TokenKind::kMergeable),
                                                       pieces_.split_left); });
  return cuts_.get();
}

const ShortTokenIndex* TiktokenEngine::short_tokens() const {
  short_tokens_once_([&] {
    short_tokens_ = ShortTokenIndex::build(bpe_, pieces_.split_left, kinds_, static_cast<uint8_t>(TokenKind::kMergeable));
    short_tokens_due_.store(true, std::memory_order_relaxed);  // built: every call may use it now
  });
  return short_tokens_.get();
}

const ShortTokenIndex* TiktokenEngine::short_tokens_for(size_t text_bytes) const {
  if (!short_tokens_due_.load(std::memory_order_relaxed)) {
    const uint64_t seen = bytes_before_short_tokens_.fetch_add(text_bytes, std::memory_order_relaxed) + text_bytes;
    if (seen < kShortTokensAfter) return nullptr;
    short_tokens_due_.store(true, std::memory_order_relaxed);
  }
  return short_tokens();
}

template <class F>
void TiktokenEngine::for_each_piece(std::string_view seg, F&& f) const {
  const uint8_t* s = reinterpret_cast<const uint8_t*>(seg.data());
  size_t pos = 0;
  if (regex_ != nullptr) {
    // tiktoken's find_iter: each match is a piece, text between matches is dropped. The pattern
    // cannot match empty (checked at load), so every search moves forward.
    size_t ms = 0, me = 0;
    while (pos < seg.size() && regex_->search(seg, pos, ms, me)) {
      f(s + ms, me - ms);
      pos = me;
    }
    return;
  }
  PieceBlocks::Pattern block_pattern;
  if (PieceBlocks::pattern_of(pattern_, block_pattern)) {
    PieceBlocks blocks(block_pattern, seg);
    blocks.for_each([&](size_t start, size_t end) { f(s + start, end - start); }, [] { return true; });
    return;
  }
  while (pos < seg.size()) {
    const size_t end = piece_end(pattern_, seg, pos);
    f(s + pos, end - pos);
    pos = end;
  }
}

template <class Segment, class Special>
void TiktokenEngine::for_each_segment(std::string_view text, const std::vector<uint8_t>& allowed, Segment&& segment,
                                      Special&& special) const {
  size_t start = 0;
  const bool any_allowed = std::find(allowed.begin(), allowed.end(), 1) != allowed.end();
  while (true) {
    SpecialMatch m;
    if (any_allowed) {
      m = specials_.find(text, start, [&](int32_t i) { return static_cast<size_t>(i) < allowed.size() && allowed[i] != 0; });
    }
    const size_t end = m.index >= 0 ? m.pos : text.size();
    segment(text.substr(start, end - start));
    if (m.index < 0) break;
    special(m);
    start = m.pos + m.len;
  }
}

template <size_t kWideLimit, class ForEachPiece>
void TiktokenEngine::encode_cached(std::string_view seg, std::vector<uint32_t>& out, size_t* last_piece_len,
                                   ForEachPiece&& for_each) const {
  ShortPieceCache& hot = ShortPieceCache::local();
  const uint16_t tag = hot.tag_of(owner_);
  PieceCache& pieces = PieceCache::local();
  // A piece the cache misses is mostly met for the first time, and then usually one token: the
  // index of short tokens answers it without a trie walk (models/short_token_index.h).
  const ShortTokenIndex* const tokens = short_tokens_for(seg.size());
  // Pieces that start before keyable_end have ShortPieceCache::kMaxLen readable bytes in seg.
  const uint8_t* const keyable_end = reinterpret_cast<const uint8_t*>(seg.data()) +
      (seg.size() >= ShortPieceCache::kMaxLen ? seg.size() - ShortPieceCache::kMaxLen + 1 : 0);
  // Three batches of kAhead pieces in flight, a stage apart:
  //   filled:  found, keyed, their cache slots prefetched
  //   probed:  a batch later, the slots read: the hits' ids copied out in order, a bit set per
  //            miss, and for the misses alone the index bucket and the PieceCache slot prefetched
  //   emitted: a batch later still, hits joining `out` in runs, misses encoded
  // After another library's turn (or any other work) the slots and buckets are cold; so their
  // misses overlap instead of costing one memory latency per piece, and a piece the cache
  // answers costs one line, not two (prefetching the bucket of every piece at fill time was 8%
  // of the time on text seen before). A batch is arrays, not a record per piece: the probe writes
  // the hits' ids where a run of them joins `out` in one insert, straight from the batch. (They
  // are copied at the probe, not at the emit, because a miss encoded at the emit stores its ids
  // in a slot that a later hit of the batch may have been read from.)
  constexpr uint32_t kAhead = 32;
  // Under r50k's pattern the probe takes runs from the cache too (ShortPieceCache::put: the
  // whitespace of code, on the vocabularies that pattern comes with); elsewhere it keeps its
  // smaller batch and never sees one.
  constexpr bool kRuns = kWideLimit != 0;
  constexpr size_t kIdsPerPiece = kRuns ? ShortPieceCache::kMaxRunIds : ShortPieceCache::kMaxIds;
  using Offset = std::conditional_t<kRuns, uint16_t, uint8_t>;
  struct Batch {
    uint32_t count;
    uint32_t misses;  // bit i: piece i is not in the cache (probe), or not keyed
    const uint8_t* p[kAhead];
    size_t n[kAhead];
    ShortPieceCache::Key key[kAhead];  // ShortPieceCache::kNoKey for a piece that is not keyed
    PieceCache::Key long_key[kAhead];  // made at the probe for a keyed piece the cache missed
    Offset at[kAhead + 1];             // the hits' ids before piece i: ids[0, at[i]) (probe)
    uint32_t ids[kAhead * kIdsPerPiece];
  };
  static_assert(kAhead <= 32, "a batch's pieces are bits of a uint32_t");
  static_assert(kAhead * kIdsPerPiece <= Offset(~Offset{0}), "Batch::at holds an offset into Batch::ids");
  Batch batches[3];
  Batch* filling = &batches[0];
  Batch* probed = &batches[1];  // filled a batch ago, not yet probed
  Batch* ready = &batches[2];   // probed a batch ago, not yet emitted
  for (Batch& b : batches) b.count = b.misses = 0;
  auto keyed = [](const ShortPieceCache::Key& k) { return k.len != ShortPieceCache::kNoKey.len; };
  auto probe = [&](Batch& b) {
    uint32_t misses = 0;
    uint32_t* w = b.ids;
    b.at[0] = 0;
    for (uint32_t i = 0; i < b.count; ++i) {
      if constexpr (kRuns) {
        if (hot.holds_or_run(tag, b.key[i])) w += hot.copy_held_or_run(b.key[i], w);
        else misses |= uint32_t{1} << i;
      } else {
        if (hot.holds(tag, b.key[i])) w += hot.copy_held(b.key[i], w);
        else misses |= uint32_t{1} << i;
      }
      b.at[i + 1] = static_cast<Offset>(w - b.ids);
    }
    b.misses = misses;
    for (uint32_t m = misses; m != 0; m &= m - 1) {
      const uint32_t i = static_cast<uint32_t>(__builtin_ctz(m));
      if (!keyed(b.key[i])) continue;
      if (tokens != nullptr && (kWideLimit == 0 || tokens->may_hold(b.key[i]))) tokens->prefetch(b.key[i]);
      b.long_key[i] = PieceCache::make_key(b.p[i], b.n[i]);
      pieces.prefetch(owner_, b.long_key[i]);
    }
  };
  auto emit = [&](const Batch& b) {
    uint32_t i = 0;
    while (i < b.count) {
      const uint32_t ahead = b.misses >> i;
      const uint32_t stop = ahead != 0 ? i + static_cast<uint32_t>(__builtin_ctz(ahead)) : b.count;
      if (i < stop) {
        out.insert(out.end(), b.ids + b.at[i], b.ids + b.at[stop]);
        if (last_piece_len != nullptr) *last_piece_len = b.at[stop] - b.at[stop - 1];
        i = stop;
        if (i == b.count) break;
      }
      const size_t before = out.size();
      if (keyed(b.key[i])) {
        encode_piece_missed(hot, tag, tokens, b.key[i], b.p[i], b.n[i], out, &b.long_key[i], &pieces);
      } else {
        encode_piece(b.p[i], b.n[i], out, false, nullptr, &pieces, &hot);
      }
      if (last_piece_len != nullptr) *last_piece_len = out.size() - before;
      ++i;
    }
  };
  for_each([&](const uint8_t* p, size_t n) {
    Batch& b = *filling;
    const uint32_t i = b.count++;
    b.p[i] = p;
    b.n[i] = n;
    if (short_cached<kWideLimit>(p, n, p < keyable_end)) {
      b.key[i] = ShortPieceCache::make_key(p, n, tag);
      hot.prefetch(b.key[i]);
    } else {
      b.key[i] = ShortPieceCache::kNoKey;
    }
    if (b.count == kAhead) {
      emit(*ready);
      probe(*probed);
      Batch* const done = ready;
      ready = probed;
      probed = filling;
      filling = done;
      filling->count = 0;
    }
  });
  emit(*ready);
  probe(*probed);
  emit(*probed);
  probe(*filling);
  emit(*filling);
}

void TiktokenEngine::encode_segment(std::string_view seg, std::vector<uint32_t>& out, size_t* last_piece_len,
                                    bool cached) const {
  if (!cached) {
    for_each_piece(seg, [&](const uint8_t* p, size_t n) {
      const size_t before = out.size();
      encode_piece_uncached(p, n, out);
      if (last_piece_len != nullptr) *last_piece_len = out.size() - before;
    });
    return;
  }
  encode_cached_for(pattern_ == SplitPattern::kR50k, seg, out, last_piece_len, [&](auto&& f) { for_each_piece(seg, f); });
}

size_t TiktokenEngine::encode_blocks(PieceBlocks::Pattern pattern, std::string_view text, std::vector<uint32_t>& out,
                                     size_t limit) const {
  size_t pieces = 0;
  encode_cached_for(pattern == PieceBlocks::Pattern::kR50k, text, out, nullptr, [&](auto&& f) {
    const uint8_t* s = reinterpret_cast<const uint8_t*>(text.data());
    PieceBlocks blocks(pattern, text);
    // out lags the pieces handed over by the pipeline (at most three batches) and the limit is
    // asked once per run of pieces the scanner proves (at most 64), so a limit stops the text a
    // little past it: still between pieces, as the limit allows.
    pieces = blocks.for_each([&](size_t start, size_t end) { f(s + start, end - start); },
                             [&] { return out.size() < limit; });
  });
  return pieces;
}

void TiktokenEngine::encode_ordinary(std::string_view text, std::vector<uint32_t>& out, bool cached) const {
  cartridge_->note_encoded(text.size());
  encode_segment(text, out, nullptr, cached);
}

SpecialMatch TiktokenEngine::find_special(std::string_view text, const std::vector<uint8_t>& set) const {
  return specials_.find(text, 0, [&](int32_t i) { return static_cast<size_t>(i) < set.size() && set[i] != 0; });
}

size_t TiktokenEngine::encode(std::string_view text, const std::vector<uint8_t>& allowed, std::vector<uint32_t>& out) const {
  cartridge_->note_encoded(text.size());
  size_t last_piece_len = 0;
  for_each_segment(
      text, allowed, [&](std::string_view seg) { encode_segment(seg, out, &last_piece_len, true); },
      [&](const SpecialMatch& m) {
        out.push_back(special_ids_[m.index]);
        last_piece_len = 0;
      });
  return last_piece_len;
}

void TiktokenEngine::mark_pieces(std::string_view text, const std::vector<uint8_t>& allowed, uint8_t* marks,
                                 uint64_t base, std::vector<SpecialAt>& specials) const {
  if (text.empty()) return;
  std::memset(marks, kMarkInside, text.size());
  const char* const origin = text.data();
  size_t next = 0;  // the first byte no piece has covered yet
  auto mark = [&](size_t at, size_t n, uint8_t kind) {
    for (; next < at; ++next) marks[next] = kMarkDropped;  // text the split regex did not match
    marks[at] = kind;
    next = at + n;
  };
  for_each_segment(
      text, allowed,
      [&](std::string_view seg) {
        for_each_piece(seg, [&](const uint8_t* p, size_t n) { mark(reinterpret_cast<const char*>(p) - origin, n, kMarkPiece); });
      },
      [&](const SpecialMatch& m) {
        mark(m.pos, m.len, kMarkSpecial);
        specials.push_back(SpecialAt{static_cast<uint32_t>(base + m.pos), special_ids_[m.index]});
      });
  for (; next < text.size(); ++next) marks[next] = kMarkDropped;
}

bool TiktokenEngine::decode(const uint32_t* ids, size_t n, std::string& out, uint32_t* bad) const {
  for (size_t i = 0; i < n; ++i) {
    std::string_view b;
    if (!token_bytes(ids[i], &b)) {
      *bad = ids[i];
      return false;
    }
    out.append(b.data(), b.size());
  }
  return true;
}

int64_t TiktokenEngine::encode_single_token(std::string_view bytes) const {
  const int32_t r = token_rank(bpe_, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (r >= 0 && kinds_[r] == static_cast<uint8_t>(TokenKind::kMergeable)) return r;
  const int32_t index = specials_.exact(bytes);
  return index >= 0 ? int64_t{special_ids_[index]} : -1;
}

std::string_view TiktokenEngine::special_text(uint32_t index) const {
  const uint32_t a = special_text_offsets_[index];
  const uint32_t b = special_text_offsets_[index + 1];
  if (a > b || b > special_text_size_) return std::string_view();
  return std::string_view(special_text_ + a, b - a);
}

std::vector<std::string_view> TiktokenEngine::sorted_mergeable() const {
  std::vector<std::string_view> out;
  for (uint32_t id = 0; id < bpe_.n_ids; ++id) {
    std::string_view b;
    if (kinds_[id] == static_cast<uint8_t>(TokenKind::kMergeable) && token_bytes(id, &b)) out.push_back(b);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void TiktokenEngine::tokens_with_prefix(std::string_view prefix, std::vector<uint32_t>& out) const {
  const DoubleArrayView& t = bpe_.trie;
  const int32_t start = t.walk(DoubleArrayView::kRoot, reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size());
  if (start < 0) return;
  // Depth-first over the subtree; the depth is bounded by the longest token.
  std::vector<int32_t> stack{start};
  size_t guard = 0;
  while (!stack.empty()) {
    const int32_t node = stack.back();
    stack.pop_back();
    if (++guard > t.size()) return;  // a damaged trie cannot make us loop forever
    const int32_t v = t.value_at(node);
    if (v >= 0 && static_cast<uint32_t>(v) < bpe_.n_ids) out.push_back(static_cast<uint32_t>(v));
    for (int c = 255; c >= 0; --c) {
      const int32_t ch = t.child(node, static_cast<uint8_t>(c));
      if (ch >= 0) stack.push_back(ch);
    }
  }
}

std::pair<std::vector<uint32_t>, std::vector<std::vector<uint32_t>>> TiktokenEngine::encode_with_unstable(
    std::string_view text, const std::vector<uint8_t>& allowed) const {
  std::vector<uint32_t> tokens;
  size_t last = encode(text, allowed, tokens);
  std::set<std::vector<uint32_t>> completions;
  auto as_result = [&]() {
    return std::make_pair(std::move(tokens),
                          std::vector<std::vector<uint32_t>>(completions.begin(), completions.end()));
  };
  if (last == 0) return as_result();

  // Trailing all-whitespace tokens can merge differently once more text arrives (for example
  // "\n" + " " can become "\n \n"), so they count as unstable too.
  auto all_space = [&](uint32_t id) {
    std::string_view b;
    if (kind(id) != TokenKind::kMergeable || !token_bytes(id, &b)) return false;
    return std::all_of(b.begin(), b.end(), [](char c) { return c == ' ' || c == '\n' || c == '\t'; });
  };
  if (all_space(tokens[tokens.size() - last])) {
    while (last < tokens.size() && all_space(tokens[tokens.size() - last - 1])) ++last;
  }
  std::string unstable;
  uint32_t bad = 0;
  decode(tokens.data() + tokens.size() - last, last, unstable, &bad);
  tokens.resize(tokens.size() - last);
  if (unstable.empty()) return as_result();

  std::vector<uint32_t> ids;
  tokens_with_prefix(unstable, ids);
  for (uint32_t id : ids) completions.insert({id});

  for (size_t i = 1; i < unstable.size(); ++i) {
    const std::string_view prefix(unstable.data(), i);
    const std::string_view suffix(unstable.data() + i, unstable.size() - i);
    ids.clear();
    tokens_with_prefix(suffix, ids);
    for (uint32_t id : ids) {
      std::string_view tb;
      token_bytes(id, &tb);
      std::string possibility(prefix);
      possibility.append(tb.data(), tb.size());
      std::vector<uint32_t> encoded;
      if (valid_utf8(possibility)) {
        encode_ordinary(possibility, encoded);
      } else {
        byte_pair_encode(reinterpret_cast<const uint8_t*>(possibility.data()), possibility.size(), encoded);
      }
      std::vector<uint32_t> seq;
      size_t seq_len = 0;
      for (uint32_t t : encoded) {
        seq.push_back(t);
        std::string_view b;
        if (token_bytes(t, &b)) seq_len += b.size();
        if (seq_len >= unstable.size()) break;
      }
      completions.insert(std::move(seq));
    }
  }

  // A split can appear inside trailing whitespace once more text follows ("\n\n" + "0" splits
  // into "\n" + "\n" + "0"), so the last whitespace character may stand alone.
  if (unstable.size() > 1) {
    uint32_t cp = 0;
    const size_t len = last_utf8_char(unstable, &cp);
    if (len > 0 && unstable.size() - len > 0 && utf8::is_white_space(cp)) {
      std::vector<uint32_t> re;
      const uint8_t* u = reinterpret_cast<const uint8_t*>(unstable.data());
      byte_pair_encode(u, unstable.size() - len, re);
      byte_pair_encode(u + unstable.size() - len, len, re);
      completions.insert(std::move(re));
    }
  }
  return as_result();
}

}  // namespace crayon
