// Small valid cartridges built from a synthetic vocabulary (the 256 single bytes plus a handful
// of merges and one special token): the seeds of the fuzz corpora and the engines of
// fuzz_encode_text. Generated in code so that no vocabulary-derived file is committed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engines/hf_engine.h"
#include "engines/tiktoken_engine.h"

namespace crayon::fuzz_seeds {

// Multi-byte tokens of the synthetic vocabulary, each the concatenation of two earlier tokens
// (so BPE can build it).
inline const std::vector<std::string>& merged_tokens() {
  // The CJK ones give safe_cuts something to decide: 中 and 文, the word 中文, and tokens that
  // end or start inside a character. "\xAD\xE5" (the end of 中, the start of 国) ranks below 中
  // itself, so BPE of 中国 crosses the boundary although no token holds both characters.
  static const std::vector<std::string> v = {"he", "ll", "hell", "hello", " w", " wo", "or", "ld",
                                             " world", "\xC3\xA9", "12", "123", "  ", "\n\n",
                                             "\xE4\xB8", "\xAD\xE5", "\xE4\xB8\xAD", "\xE6\x96", "\xE6\x96\x87",
                                             "\xE4\xB8\xAD\xE6\x96\x87", "\xAD\xE6", "\xE4\xB8\xAD\xE6",
                                             " \xE4\xB8"};
  return v;
}

inline std::vector<std::string> tiktoken_images() {
  std::vector<std::string> out;
  for (SplitPattern pat : {SplitPattern::kR50k, SplitPattern::kCl100k, SplitPattern::kO200k,
                           SplitPattern::kLlama3, SplitPattern::kNone}) {
    TiktokenSource src;
    for (uint32_t b = 0; b < 256; ++b) src.mergeable.emplace_back(std::string(1, static_cast<char>(b)), b);
    uint32_t id = 256;
    for (const std::string& t : merged_tokens()) src.mergeable.emplace_back(t, id++);
    src.specials.emplace_back("<|endoftext|>", id++);
    src.pattern = pat;
    src.meta_json = "{}";
    out.push_back(build_tiktoken_cartridge(src));
  }
  return out;
}

inline std::string hf_image() {
  HfSource src;
  src.kind = HfModelKind::kBpeBytes;
  uint32_t id = 0;
  for (uint32_t b = 0; b < 256; ++b) src.byte_tokens.emplace_back(std::string(1, static_cast<char>(b)), id++);
  auto id_of = [&](const std::string& s) {
    for (const auto& [k, v] : src.byte_tokens)
      if (k == s) return v;
    return ~0u;
  };
  for (const std::string& t : merged_tokens()) {
    // Split at the first position where both halves are tokens already.
    for (size_t i = 1; i < t.size(); ++i) {
      uint32_t l = id_of(t.substr(0, i)), r = id_of(t.substr(i));
      if (l != ~0u && r != ~0u) {
        src.byte_tokens.emplace_back(t, id);
        src.merges.push_back(HfMerge{l, r, id});
        ++id;
        break;
      }
    }
  }
  src.n_ids = id;
  for (const auto& [k, v] : src.byte_tokens) {
    (void)v;
    src.decode_bytes.push_back(k);
    src.decode_present.push_back(1);
  }
  src.meta_json = "{}";
  src.tokenizer_json = "{}";
  src.vocab_strings = "[]";
  return build_hf_cartridge(src);
}

}  // namespace crayon::fuzz_seeds
