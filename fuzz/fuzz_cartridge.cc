// Fuzz target: a cartridge image from an untrusted source, loaded and used.
//
//   bytes --Cartridge::from_bytes (structure only: the fuzzer skips the checksum)--> Cartridge
//         --TiktokenEngine / HfEngine (with each pre-tokenizer pipeline a file could name)-->
//         ready() (the checks deferred from load to first use, as the Python faces run them)-->
//         encode and decode a few fixed texts, decode every id and a few out of range
//
// A file may be refused at any step, with an exception (CartridgeError, invalid_argument, ...):
// that is the Python faces' ValueError. What must never happen is a crash, an out-of-bounds read
// (run under AddressSanitizer), undefined behaviour (UBSan), a leak (LeakSanitizer) or a hang.
// The checksum is skipped because it is no defence against a crafted file: whoever crafts one
// can stamp a valid checksum, so every structural check must hold without it.
//
// Built two ways: with clang -fsanitize=fuzzer (libFuzzer supplies main), or with any compiler
// plus fuzz_main.cc (replays files, then mutates them for a while). See fuzz/README.md.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/cartridge.h"
#include "engines/hf_components.h"
#include "engines/hf_engine.h"
#include "engines/tiktoken_engine.h"

namespace {

using namespace crayon;

const std::string_view kTexts[] = {
    "hello world",
    "  Hello,\tworld!\n\n 123 4567 don't ",
    "中文字符 日本語のテキスト 한국어",
    "<|endoftext|> <s> </s> [CLS] <unk>",
    "\xF0\x9F\x98\x80 emoji \xE2\x80\x8D\xF0\x9F\x91\xA9 \xC3\xA9\xCC\x81",
    std::string_view("nul\0byte", 8),
    "\xFF\xFE invalid \xC0\x80 utf-8 \xED\xA0\x80",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

void use_tiktoken(const std::shared_ptr<const Cartridge>& c) {
  const TiktokenEngine e(c);
  e.ready();
  const std::vector<uint8_t> all(e.n_specials(), 1);
  std::vector<uint32_t> ids;
  std::string out;
  uint32_t bad = 0;
  for (std::string_view t : kTexts) {
    ids.clear();
    e.encode_ordinary(t, ids);
    out.clear();
    e.decode(ids.data(), ids.size(), out, &bad);
    ids.clear();
    e.encode(t, all, ids);
  }
  std::vector<uint32_t> every;
  for (uint32_t id = 0; id < e.n_ids() && id < 100000; ++id) every.push_back(id);
  every.push_back(e.n_ids());
  every.push_back(0xFFFFFFFFu);
  out.clear();
  e.decode(every.data(), every.size(), out, &bad);
  for (uint32_t i = 0; i < e.n_specials(); ++i) e.special_text(i);
}

void use_hf(const std::shared_ptr<const Cartridge>& c, HfPipeline pipeline) {
  const HfEngine e(c, std::move(pipeline));
  e.ready();
  RawEncoding enc;
  for (std::string_view t : kTexts) {
    for (bool special_as_text : {false, true}) {
      for (bool offsets : {true, false}) {  // (ids only takes paths of its own)
        enc.clear();
        enc.with_offsets = offsets;
        e.encode(t, special_as_text, enc);
      }
    }
  }
  if (e.has_token_strings()) {
    std::string_view s;
    const uint32_t n = e.token_string_count();
    for (uint32_t id : {0u, 1u, n / 2, n > 0 ? n - 1 : 0u, n}) e.token_string(id, &s);
  }
  if (e.is_byte_level()) {
    std::vector<uint32_t> every;
    for (uint32_t id = 0; id < e.n_ids() && id < 100000; ++id) every.push_back(id);
    every.push_back(e.n_ids());
    std::string out;
    e.decode_byte_level(every.data(), every.size(), {}, out);
  }
}

HfPipeline pipeline_with(const char* type, bool split = true) {
  HfPipeline p;
  if (type != nullptr) {
    ComponentDesc d;
    d.type = type;
    d.split = split;  // Metaspace without split: the SentencePiece shape (words found in the text)
    d.replacement = "\xE2\x96\x81";  // Metaspace's ▁
    p.pre_tokenizers.push_back(make_pre_tokenizer(d, 0));
  }
  return p;
}

// The sections a converter compiles for the tokenizer.json engine, read in place: the added-token
// matchers (HADR / HADN) and a Precompiled normalizer's section (HPC0).
HfPipeline compiled_pipeline(const std::shared_ptr<const Cartridge>& c, const char* type) {
  HfPipeline p = pipeline_with(type);
  p.added_from_cartridge = true;
  if (c->find(fourcc("HPC0")) != nullptr) {
    ComponentDesc d;
    d.type = "Precompiled";
    d.section = c->bytes(fourcc("HPC0"));
    d.section_owner = c;
    p.normalizer = make_normalizer({d});
  }
  return p;
}

// Runs `f`, treating any exception as the file being refused (FUZZ_VERBOSE=1 prints why).
template <class F>
void refused_or_fine(const char* what, F&& f) {
  try {
    f();
    if (std::getenv("FUZZ_VERBOSE")) std::fprintf(stderr, "  %s: ok\n", what);
  } catch (const std::exception& e) {
    if (std::getenv("FUZZ_VERBOSE")) std::fprintf(stderr, "  %s: refused: %s\n", what, e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<const Cartridge> c;
  try {
    c = Cartridge::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz", false);
  } catch (const std::exception& e) {
    if (std::getenv("FUZZ_VERBOSE")) std::fprintf(stderr, "  load: refused: %s\n", e.what());
    return 0;
  }
  refused_or_fine("tiktoken engine", [&] { use_tiktoken(c); });
  for (const char* type : {static_cast<const char*>(nullptr), "ByteLevel", "Metaspace", "Whitespace"}) {
    refused_or_fine(type ? type : "tokenizer.json engine", [&] { use_hf(c, pipeline_with(type)); });
  }
  refused_or_fine("Metaspace without split", [&] { use_hf(c, pipeline_with("Metaspace", false)); });
  for (const char* type : {"ByteLevel", "Metaspace"}) {
    refused_or_fine("compiled sections", [&] { use_hf(c, compiled_pipeline(c, type)); });
  }
  return 0;
}
