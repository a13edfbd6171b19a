// Builds the engine's pipeline components from their tokenizer.json descriptions.
//
//   {"type": "NFC"}, {"type": "Replace", ...}, ...      --make_normalizer-->  TextNormalizer
//   {"type": "Split", ...} / {"type": "ByteLevel", ...}  --make_pre_tokenizer--> PreTokenizerStep
//
// The converter (conversion/hf_json.py) flattens Sequences and hands over one flat description
// per component. A description this file cannot reproduce exactly throws UnsupportedComponent
// naming the component's index; the Python face then falls back to `tokenizers`.
#pragma once

#include <memory>
#include <stdexcept>
#include <string_view>
#include <string>
#include <vector>

#include "engines/hf_engine.h"

namespace crayon {

class UnsupportedComponent : public std::runtime_error {
 public:
  UnsupportedComponent(size_t index, const std::string& what)
      : std::runtime_error(what), index_(index) {}
  size_t index() const { return index_; }

 private:
  size_t index_;
};

struct ComponentDesc {
  std::string type;      // the tokenizer.json "type"
  std::string pattern;   // Split/Replace pattern, Prepend text
  bool pattern_is_regex = false;
  std::string content;   // Replace content
  std::string behavior;  // Split/Punctuation: removed, isolated, merged_with_previous, ...
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel
  bool use_regex = true;          // ByteLevel
  bool individual_digits = false; // Digits
  bool left = false, right = false;  // Strip
  std::string replacement;           // Metaspace: one character
  std::string prepend_scheme = "always";  // Metaspace: always, first, never
  bool split = true;                 // Metaspace
  bool clean_text = true, handle_chinese_chars = true, strip_accents = false, lowercase = true;  // BertNormalizer
  std::string blob;                  // Precompiled: the decoded precompiled_charsmap
  // Precompiled compiled into a cartridge instead (PrecompiledNormalizer::section_image()): the
  // section's bytes, and what keeps them mapped. A bad section is a CartridgeError, not a refusal.
  std::string_view section;
  std::shared_ptr<const void> section_owner;
};

std::shared_ptr<const TextNormalizer> make_normalizer(const std::vector<ComponentDesc>& chain);
PreTokenizerStep make_pre_tokenizer(const ComponentDesc& desc, size_t index);

}  // namespace crayon
