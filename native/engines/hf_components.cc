#include "engines/hf_components.h"

#include <memory>

#include "text/bert.h"
#include "text/normalize.h"
#include "text/piece_blocks.h"
#include "text/precompiled.h"
#include "text/regex.h"
#include "text/split.h"
#include "core/utf8.h"

namespace crayon {
namespace {

// ---- normalizers -------------------------------------------------------------------------------

struct NormStep {
  enum class Kind {
    kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kStrip, kReplaceLiteral, kReplaceRegex, kBert, kPrecompiled
  };
  Kind kind;
  std::string pattern;
  std::string content;
  bool left = false, right = false;
  std::shared_ptr<const Regex> regex;
  BertNormalizerOptions bert{};
  std::shared_ptr<const PrecompiledNormalizer> precompiled;
};

class NormalizerChain final : public TextNormalizer {
 public:
  explicit NormalizerChain(std::vector<NormStep> steps) : steps_(std::move(steps)) {}

  bool is_identity(std::string_view text) const override {
    for (const NormStep& s : steps_) {
      if (!step_is_identity(s, text)) return false;
    }
    return true;
  }

  bool apply_same_length(std::string_view text, std::string& out, bool* separators_left, size_t* resume) const override {
    if (resume != nullptr) *resume = 0;
    if (steps_.size() != 1) return false;
    const NormStep& s = steps_[0];
    if (s.kind == NormStep::Kind::kBert) return normalize_bert_same_length(text, s.bert, out, separators_left, resume);
    if (s.kind == NormStep::Kind::kPrecompiled) return s.precompiled->normalize_same_length(text, out);
    return false;
  }

  bool apply_text(std::string_view text, std::string& out, size_t from) const override {
    if (steps_.size() != 1) return false;
    const NormStep& s = steps_[0];
    if (s.kind == NormStep::Kind::kBert) return normalize_bert_text(text, s.bert, out, from);
    if (s.kind == NormStep::Kind::kPrecompiled) return s.precompiled->normalize_text(text, out);
    return false;
  }

  bool apply(std::string& text, ByteRanges& align) const override {
    NormalizedText nt;
    nt.text = std::move(text);
    nt.align = std::move(align);
    for (const NormStep& s : steps_) {
      switch (s.kind) {
        case NormStep::Kind::kNfc: normalize_nfc(nt); break;
        case NormStep::Kind::kNfd: normalize_nfd(nt); break;
        case NormStep::Kind::kNfkc: normalize_nfkc(nt); break;
        case NormStep::Kind::kNfkd: normalize_nfkd(nt); break;
        case NormStep::Kind::kLowercase: normalize_lowercase(nt); break;
        case NormStep::Kind::kPrepend: normalize_prepend(nt, s.pattern); break;
        case NormStep::Kind::kStrip: normalize_strip(nt, s.left, s.right); break;
        case NormStep::Kind::kReplaceLiteral: normalize_replace_literal(nt, s.pattern, s.content); break;
        case NormStep::Kind::kBert: normalize_bert(nt, s.bert); break;
        case NormStep::Kind::kPrecompiled: s.precompiled->normalize(nt); break;
        case NormStep::Kind::kReplaceRegex: {
          std::vector<MatchSpan> spans;
          find_matches(*s.regex, nt.text, spans);
          std::vector<std::pair<uint32_t, uint32_t>> matches;
          for (const MatchSpan& m : spans) {
            if (m.is_match) matches.emplace_back(m.start, m.end);
          }
          normalize_replace_ranges(nt, matches, s.content);
          break;
        }
      }
    }
    text = std::move(nt.text);
    align = std::move(nt.align);
    return true;
  }

 private:
  static bool step_is_identity(const NormStep& s, std::string_view text) {
    switch (s.kind) {
      case NormStep::Kind::kNfc: return nfc_is_identity(text);
      case NormStep::Kind::kNfd: return nfd_is_identity(text);
      case NormStep::Kind::kNfkc: return nfkc_is_identity(text);
      case NormStep::Kind::kNfkd: return nfkd_is_identity(text);
      case NormStep::Kind::kLowercase: return lowercase_is_identity(text);
      // Prepend("") and an empty Replace pattern change alignments even where the text stays
      // the same (see docs/normalizers.md), so only empty text is left alone.
      case NormStep::Kind::kPrepend: return text.empty();
      case NormStep::Kind::kStrip: return false;
      case NormStep::Kind::kBert: return bert_is_identity(text, s.bert);
      case NormStep::Kind::kPrecompiled: return s.precompiled->is_identity(text);
      case NormStep::Kind::kReplaceLiteral:
        return text.empty() || (!s.pattern.empty() && text.find(s.pattern) == std::string_view::npos);
      case NormStep::Kind::kReplaceRegex: {
        size_t a, b;
        return !s.regex->search(text, 0, a, b);
      }
    }
    return false;
  }

  std::vector<NormStep> steps_;
};

// ---- pre-tokenizers ----------------------------------------------------------------------------

SplitBehavior parse_behavior(const std::string& b, size_t index) {
  if (b == "removed") return SplitBehavior::kRemoved;
  if (b == "isolated") return SplitBehavior::kIsolated;
  if (b == "merged_with_previous") return SplitBehavior::kMergedWithPrevious;
  if (b == "merged_with_next") return SplitBehavior::kMergedWithNext;
  if (b == "contiguous") return SplitBehavior::kContiguous;
  throw UnsupportedComponent(index, "unknown split behavior '" + b + "'");
}

class RegexSplitter final : public PieceSplitter {
 public:
  RegexSplitter(std::shared_ptr<const Regex> re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {
    scanner_isolated_ = behavior_ == SplitBehavior::kIsolated && !invert_ && re_->tiles();
  }
  bool streams() const override { return scanner_isolated_; }
  bool block_pattern(PieceBlocks::Pattern& out) const override {
    if (!scanner_isolated_) return false;
    switch (re_->scanner()) {
      case Regex::Scanner::kGpt2: out = PieceBlocks::Pattern::kR50k; return true;
      case Regex::Scanner::kLlama3: out = PieceBlocks::Pattern::kLlama3; return true;
      case Regex::Scanner::kQwen2: out = PieceBlocks::Pattern::kQwen2; return true;
      default: return false;
    }
  }
  Regex::Scanner isolated_scanner() const override {
    return behavior_ == SplitBehavior::kIsolated && !invert_ ? re_->scanner() : Regex::Scanner::kNone;
  }
  size_t piece_end(std::string_view text, size_t pos) const override {
    size_t start = 0, end = 0;
    return re_->search(text, pos, start, end) && start == pos ? end : text.size();
  }

  void split(std::string_view text, ByteRanges& pieces) const override {
    PieceBlocks::Pattern blocks;
    if (block_pattern(blocks)) {
      // A hand-written scanner matches a non-empty piece at every position, so "isolated" pieces
      // are exactly its matches, one after another (found 64 bytes at a time); any other pattern
      // goes through the general path below.
      PieceBlocks scan(blocks, text);
      for (size_t start = 0, end = 0; scan.next(start, end);) {
        pieces.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(end));
      }
      return;
    }
    thread_local std::vector<MatchSpan> spans;
    spans.clear();
    find_matches(*re_, text, spans);
    split_pieces_by(spans, behavior_, invert_, pieces);
  }

 private:
  std::shared_ptr<const Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
  bool scanner_isolated_ = false;
};

class LiteralSplitter final : public PieceSplitter {
 public:
  LiteralSplitter(std::string needle, SplitBehavior behavior, bool invert)
      : needle_(std::move(needle)), behavior_(behavior), invert_(invert) {}
  void split(std::string_view text, ByteRanges& pieces) const override {
    thread_local std::vector<MatchSpan> spans;
    spans.clear();
    find_matches_literal(needle_, text, spans);
    split_pieces_by(spans, behavior_, invert_, pieces);
  }

 private:
  std::string needle_;
  SplitBehavior behavior_;
  bool invert_;
};

// Whitespace, WhitespaceSplit, Digits, Punctuation, BertPreTokenizer.
class ClassSplitter final : public PieceSplitter {
 public:
  enum class Kind { kWhitespace, kWhitespaceSplit, kDigits, kPunctuation, kBert };
  ClassSplitter(Kind kind, bool individual_digits, SplitBehavior behavior)
      : kind_(kind), individual_digits_(individual_digits), behavior_(behavior) {}
  void split(std::string_view text, ByteRanges& pieces) const override {
    switch (kind_) {
      case Kind::kWhitespace: pretokenize_whitespace(text, pieces); break;
      case Kind::kWhitespaceSplit: pretokenize_whitespace_split(text, pieces); break;
      case Kind::kDigits: pretokenize_digits(text, individual_digits_, pieces); break;
      case Kind::kPunctuation: pretokenize_punctuation(text, behavior_, pieces); break;
      case Kind::kBert: pretokenize_bert(text, pieces); break;
    }
  }
  bool splits_bert() const override { return kind_ == Kind::kBert; }
  void split_isolating_cjk(std::string_view text, ByteRanges& pieces) const override {
    if (kind_ == Kind::kBert) pretokenize_bert(text, pieces, /*isolate_cjk=*/true);
    else split(text, pieces);
  }

 private:
  Kind kind_;
  bool individual_digits_;
  SplitBehavior behavior_;
};

std::shared_ptr<const Regex> compile(const std::string& pattern, size_t index) {
  try {
    return std::make_shared<const Regex>(pattern);
  } catch (const RegexError& e) {
    throw UnsupportedComponent(index, std::string("regex not supported natively: ") + e.what());
  }
}

// GPT-2's pattern, which ByteLevel(use_regex=true) splits with.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

std::shared_ptr<const TextNormalizer> make_normalizer(const std::vector<ComponentDesc>& chain) {
  if (chain.empty()) return nullptr;
  std::vector<NormStep> steps;
  for (size_t i = 0; i < chain.size(); ++i) {
    const ComponentDesc& d = chain[i];
    NormStep s{};
    if (d.type == "NFC") s.kind = NormStep::Kind::kNfc;
    else if (d.type == "NFD") s.kind = NormStep::Kind::kNfd;
    else if (d.type == "NFKC") s.kind = NormStep::Kind::kNfkc;
    else if (d.type == "NFKD") s.kind = NormStep::Kind::kNfkd;
    else if (d.type == "Lowercase") s.kind = NormStep::Kind::kLowercase;
    else if (d.type == "Prepend") { s.kind = NormStep::Kind::kPrepend; s.pattern = d.pattern; }
    else if (d.type == "Strip") { s.kind = NormStep::Kind::kStrip; s.left = d.left; s.right = d.right; }
    else if (d.type == "Replace") {
      s.content = d.content;
      if (d.pattern_is_regex) {
        s.kind = NormStep::Kind::kReplaceRegex;
        s.regex = compile(d.pattern, i);
      } else {
        s.kind = NormStep::Kind::kReplaceLiteral;
        s.pattern = d.pattern;
      }
    } else if (d.type == "BertNormalizer") {
      s.kind = NormStep::Kind::kBert;
      s.bert = BertNormalizerOptions{d.clean_text, d.handle_chinese_chars, d.strip_accents, d.lowercase};
    } else if (d.type == "Precompiled") {
      s.kind = NormStep::Kind::kPrecompiled;
      if (d.section_owner) {
        try {
          s.precompiled = std::make_shared<const PrecompiledNormalizer>(d.section, d.section_owner);
        } catch (const std::invalid_argument& e) {
          throw CartridgeError(std::string("its Precompiled section is damaged: ") + e.what());
        }
      } else try {
        s.precompiled = std::make_shared<const PrecompiledNormalizer>(d.blob);
      } catch (const std::invalid_argument& e) {
        throw UnsupportedComponent(i, std::string("precompiled_charsmap: ") + e.what());
      }
    } else {
      throw UnsupportedComponent(i, "normalizer " + d.type + " is not implemented natively");
    }
    steps.push_back(std::move(s));
  }
  return std::make_shared<const NormalizerChain>(std::move(steps));
}

PreTokenizerStep make_pre_tokenizer(const ComponentDesc& d, size_t index) {
  PreTokenizerStep step;
  if (d.type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = d.add_prefix_space;
    if (d.use_regex) step.splitter = std::make_shared<const RegexSplitter>(compile(kGpt2Pattern, index), SplitBehavior::kIsolated, false);
    return step;
  }
  if (d.type == "Split") {
    const SplitBehavior b = parse_behavior(d.behavior, index);
    if (d.pattern_is_regex) {
      step.splitter = std::make_shared<const RegexSplitter>(compile(d.pattern, index), b, d.invert);
    } else {
      step.splitter = std::make_shared<const LiteralSplitter>(d.pattern, b, d.invert);
    }
    return step;
  }
  if (d.type == "Metaspace") {
    step.kind = PreTokenizerStep::Kind::kMetaspace;
    const uint8_t* r = reinterpret_cast<const uint8_t*>(d.replacement.data());
    if (d.replacement.empty() || utf8::decode(r, r + d.replacement.size()).len != d.replacement.size()) {
      throw UnsupportedComponent(index, "Metaspace replacement must be one character");
    }
    step.replacement = d.replacement;
    if (d.prepend_scheme == "always") step.prepend_scheme = PreTokenizerStep::Prepend::kAlways;
    else if (d.prepend_scheme == "first") step.prepend_scheme = PreTokenizerStep::Prepend::kFirst;
    else if (d.prepend_scheme == "never") step.prepend_scheme = PreTokenizerStep::Prepend::kNever;
    else if (d.prepend_scheme == "unconditional") step.prepend_scheme = PreTokenizerStep::Prepend::kUnconditional;
    else throw UnsupportedComponent(index, "unknown Metaspace prepend_scheme '" + d.prepend_scheme + "'");
    step.split = d.split;
    return step;
  }
  using K = ClassSplitter::Kind;
  if (d.type == "Whitespace") step.splitter = std::make_shared<const ClassSplitter>(K::kWhitespace, false, SplitBehavior::kRemoved);
  else if (d.type == "WhitespaceSplit") step.splitter = std::make_shared<const ClassSplitter>(K::kWhitespaceSplit, false, SplitBehavior::kRemoved);
  else if (d.type == "Digits") step.splitter = std::make_shared<const ClassSplitter>(K::kDigits, d.individual_digits, SplitBehavior::kRemoved);
  else if (d.type == "BertPreTokenizer") step.splitter = std::make_shared<const ClassSplitter>(K::kBert, false, SplitBehavior::kRemoved);
  else if (d.type == "Punctuation") step.splitter = std::make_shared<const ClassSplitter>(K::kPunctuation, false, parse_behavior(d.behavior, index));
  else throw UnsupportedComponent(index, "pre-tokenizer " + d.type + " is not implemented natively");
  return step;
}

}  // namespace crayon
