// Fuzz target: arbitrary bytes as TEXT (invalid UTF-8, lone surrogates' encodings, NULs, long
// runs) through real engines built from a small synthetic vocabulary: the tiktoken engine with
// each hand-written split pattern, and the HF byte-level engine. Every id an encode returns must
// decode (checked with abort()).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/cartridge.h"
#include "fuzz_seeds.h"
#include "engines/hf_engine.h"
#include "engines/tiktoken_engine.h"

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
  RawEncoding enc;
  hf->encode(text, false, enc);
  return 0;
}
