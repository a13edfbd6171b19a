// Fuzz target: a cartridge image from untrusted bytes, loaded with the checksum NOT verified (an
// attacker recomputes it, so it is no security boundary), then run through both engines: the
// tiktoken engine and the tokenizers (HF) engine with a plain ByteLevel pipeline. A load that
// refuses the file (CartridgeError / std::exception) is the expected outcome for almost every
// input; anything the sanitizers report, a crash or a hang is a bug.
//
// Build with libFuzzer:  clang++ -fsanitize=fuzzer,address,undefined ... (see fuzz/README.md)
// Build with gcc:        link fuzz/standalone_main.cc, which replays and mutates without libFuzzer.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "cartridge.h"
#include "hf_engine.h"
#include "tiktoken_engine.h"

using namespace crayon;

namespace {

// A few texts that exercise every pre-tokenizer path: ASCII words, digits, whitespace runs,
// multi-byte UTF-8, invalid UTF-8 and a NUL.
const std::string kTexts[] = {
    "hello world", "  12345 don't\n\n\tstop", "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80",
    std::string("a\0b\xFF\xC3", 5), "<|endoftext|> x",
};

void run_tiktoken(const std::shared_ptr<const Cartridge>& c) {
  TiktokenEngine e(c);
  std::vector<uint32_t> ids;
  std::vector<uint8_t> allowed(e.n_specials(), 1);
  for (const std::string& t : kTexts) {
    ids.clear();
    e.encode_ordinary(t, ids);
    ids.clear();
    e.encode(t, allowed, ids);
    std::string out;
    uint32_t bad = 0;
    e.decode(ids.data(), ids.size(), out, &bad);
  }
  // Decoding every id (and one past the end) reaches every token's bytes.
  std::string out;
  uint32_t bad = 0;
  for (uint32_t id = 0; id <= e.n_ids() && id < 70000; ++id) {
    out.clear();
    e.decode(&id, 1, out, &bad);
  }
  e.encode_single_token("hello");
  for (uint32_t i = 0; i < e.n_specials(); ++i) e.special_text(i);
}

void run_hf(const std::shared_ptr<const Cartridge>& c) {
  HfPipeline p;
  PreTokenizerStep bl;
  bl.kind = PreTokenizerStep::Kind::kByteLevel;
  p.pre_tokenizers.push_back(bl);
  HfEngine e(c, std::move(p));
  RawEncoding enc;
  for (const std::string& t : kTexts) {
    enc.clear();
    e.encode(t, false, enc);
    if (e.is_byte_level()) {
      std::string out;
      e.decode_byte_level(enc.ids.data(), enc.ids.size(), {}, out);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<const Cartridge> c;
  try {
    c = Cartridge::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz",
                              /*verify_checksum=*/false);
  } catch (const std::exception&) {
    return 0;
  }
  try { run_tiktoken(c); } catch (const std::exception&) {}
  try { run_hf(c); } catch (const std::exception&) {}
  return 0;
}
