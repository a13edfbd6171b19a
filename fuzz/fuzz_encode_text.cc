// Fuzz target: arbitrary bytes as TEXT (invalid UTF-8, lone surrogates' encodings, NULs, long
// runs) through real engines built from a small synthetic vocabulary: the tiktoken engine with
// each hand-written split pattern, and the HF byte-level engine. Every id an encode returns must
// decode, and the batch stages the GPU runs (engines/piece_batch.h's host loop), on the input cut
// into documents at each 0x00 byte, must give what the engine gives document by document (both
// checked with abort()). The block pre-tokenizer (text/piece_blocks.h), in every classifier, must
// give the scalar scanners' pieces for every pattern it has rules for, and cutting the input
// where models/safe_cuts.h allows must not change its BPE.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/cartridge.h"
#include "fuzz_seeds.h"
#include "engines/hf_engine.h"
#include "engines/piece_batch.h"
#include "engines/tiktoken_engine.h"
#include "text/piece_blocks.h"

using namespace crayon;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::shared_ptr<const TiktokenEngine>> tik = [] {
    std::vector<std::shared_ptr<const TiktokenEngine>> v;
    for (const std::string& img : fuzz_seeds::tiktoken_images()) {
      v.push_back(std::make_shared<const TiktokenEngine>(Cartridge::from_bytes(img, "seed")));
      v.back()->ready();
    }
    return v;
  }();
  static const std::shared_ptr<const HfEngine> hf = [] {
    HfPipeline p;
    PreTokenizerStep bl;
    bl.kind = PreTokenizerStep::Kind::kByteLevel;
    p.pre_tokenizers.push_back(bl);
    auto e = std::make_shared<const HfEngine>(Cartridge::from_bytes(fuzz_seeds::hf_image(), "seed"), std::move(p));
    e->ready();
    return e;
  }();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<uint32_t> ids;
  for (const auto& e : tik) {
    ids.clear();
    e->encode_ordinary(text, ids);
    std::string back;
    uint32_t bad = 0;
    if (!e->decode(ids.data(), ids.size(), back, &bad)) abort();
  }
  // Safe cuts (models/safe_cuts.h): BPE of the whole input, taken as one piece, equals the BPE of
  // its parts between the cuts, for every vocabulary; a part whose token the cuts name is that
  // token alone.
  static const std::vector<std::unique_ptr<const SafeCuts>> cuts = [] {
    std::vector<std::unique_ptr<const SafeCuts>> v;
    for (const auto& e : tik) {
      v.push_back(SafeCuts::build(e->bpe_tables(), e->token_kinds(), static_cast<uint8_t>(TokenKind::kMergeable),
                                  e->piece_tables().split_left));
    }
    return v;
  }();
  if (size <= 512) {
    for (size_t k = 0; k < tik.size(); ++k) {
      if (cuts[k] == nullptr) abort();  // the seed vocabularies are consistent
      std::vector<uint32_t> whole, parts;
      tik[k]->byte_pair_encode(data, size, whole);
      cuts[k]->for_each_part(data, size, [&](size_t a, size_t b, uint32_t token) {
        const size_t before = parts.size();
        tik[k]->byte_pair_encode(data + a, b - a, parts);
        if (token != SafeCuts::kNoToken && (parts.size() != before + 1 || parts.back() != token)) abort();
      });
      if (whole != parts) abort();
    }
  }
  std::vector<std::string_view> docs;
  for (size_t start = 0;;) {
    const size_t end = text.find('\0', start);
    docs.push_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  for (const auto& e : tik) {
    std::vector<uint32_t> staged;
    std::vector<int64_t> offsets;
    MarkedBatch info;
    try {
      encode_batch_staged(*e, docs, {}, {}, true, 2, staged, offsets, info);
    } catch (const BpeError&) {
      continue;  // a byte without a token: the engine refuses the text too
    }
    if (offsets.size() != docs.size() + 1) abort();
    for (size_t d = 0; d < docs.size(); ++d) {
      ids.clear();
      e->encode_ordinary(docs[d], ids);
      if (static_cast<size_t>(offsets[d + 1] - offsets[d]) != ids.size()) abort();
      if (!std::equal(ids.begin(), ids.end(), staged.begin() + offsets[d])) abort();
    }
  }
  RawEncoding enc;
  hf->encode(text, false, enc);
  using P = PieceBlocks::Pattern;
  for (const P pattern : {P::kR50k, P::kCl100k, P::kLlama3, P::kQwen2, P::kO200k, P::kDeepSeekV3}) {
    // Every classifier (the best this CPU has, SSE2, the table) against the scalar scanners.
    for (const PieceBlocks::Mode mode : {PieceBlocks::Mode::kAuto, PieceBlocks::Mode::kSse2, PieceBlocks::Mode::kPortable}) {
      PieceBlocks blocks(pattern, text, mode), scalar(pattern, text, PieceBlocks::Mode::kScalar);
      size_t pos = 0;
      for (size_t a = 0, b = 0, e = 0, f = 0; blocks.next(a, b);) {
        if (a != pos || !scalar.next(e, f) || e != a || f != b) abort();
        pos = b;
      }
      if (pos != text.size()) abort();
    }
  }
  return 0;
}
