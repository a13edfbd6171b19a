// Pre-tokenization 64 bytes at a time: the piece boundaries of a block of ASCII text computed
// with bit operations, for the split patterns of GPT-2 (r50k_base), cl100k_base, o200k_base,
// Llama 3, Qwen2 and DeepSeek-V3.
//
//   text --PieceBlocks::next--> [start, end) of each pre-token, in order, covering the text
//
// Why: the hand-written scanners of pretokenize.cc spend ~9-10 ns per English piece, and most of
// it is the mispredicted branch on what kind of piece comes next (a word, a space run, a
// punctuation run) and how long it is. Here a block of 64 bytes is classified at once (AVX-512BW
// where the CPU has it, else AVX2, else SSE2 on x86-64, a table elsewhere), the rules of the pattern become masks of "a piece starts here"
// (piece_blocks.cc derives each from the pattern), and the pieces come out of a loop over the set
// bits, whose only unpredictable branch is its exit.
//
// Exactness: a block commits only the boundaries it can prove from the bytes it holds. It stops
// short of (1) the last 3 bytes of the block, which a contraction could still reach, (2) a run of
// whitespace that reaches the end of the block, whose pieces depend on where it ends, (3) a run of
// whitespace holding two line breaks with spaces between them (rare; its first piece runs to the
// last line break), and (4) the first non-ASCII byte. The next block starts at the last boundary
// committed. Where the next 8 bytes are not all ASCII, the GPT-2, cl100k_base, Llama 3 and Qwen2
// patterns take a transcoded block: 64 characters, each one ASCII byte of its class (their rules
// ask a character nothing else), with a map back to byte offsets (on UDHR's 39 scripts, GPT-2's
// pattern: 2.2x fewer instructions than the scalar scanner). Where a block proves nothing, and for
// o200k_base and DeepSeek-V3 wherever a piece starts near a non-ASCII byte, the scalar scanner of
// pretokenize.cc takes one piece. At the end of the text the same rules hold,
// except that a trailing whitespace run goes to the scalar scanner (`\s++$`, `(?!\S)`).
// tests/test_pretokenize.py compares the pieces with tiktoken's regex and with the scalar
// scanners on corpora, random text and the structures above placed across block edges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "text/pretokenize.h"

namespace crayon {

struct BlockClasses;  // a block's bytes by class (piece_blocks.cc)

class PieceBlocks {
 public:
  // The patterns with block rules. kQwen2 is Llama 3's with \p{N} in place of \p{N}{1,3};
  // kDeepSeekV3 is DeepSeek-V3's three Isolated Splits streamed as one (text/deepseek_split.h).
  enum class Pattern : uint8_t { kR50k, kCl100k, kLlama3, kQwen2, kO200k, kDeepSeekV3 };

  // How blocks are classified: kAuto is the fastest this CPU has (AVX-512BW where the CPU and OS
  // have it, else AVX2, else SSE2 on x86-64, else the table); kAvx512, kAvx2, kSse2 and kPortable
  // (the table every platform has) name one, for tests and benchmarks (one the CPU lacks runs as
  // kAuto; see available()); kScalar no blocks at all, the scanners alone. Every classifier
  // yields the same masks, so the pieces never depend on the mode.
  enum class Mode : uint8_t { kAuto, kAvx512, kAvx2, kSse2, kPortable, kScalar };

  // Whether `mode` runs as itself on this CPU and build (kAuto, kPortable, kScalar always do).
  static bool available(Mode mode);

  PieceBlocks(Pattern pattern, std::string_view text, Mode mode = Mode::kAuto);

  // The block pattern of a tiktoken split pattern, or false for kNone (the whole text is one piece).
  static bool pattern_of(SplitPattern split, Pattern& out) {
    switch (split) {
      case SplitPattern::kR50k: out = Pattern::kR50k; return true;
      case SplitPattern::kCl100k: out = Pattern::kCl100k; return true;
      case SplitPattern::kO200k: out = Pattern::kO200k; return true;
      case SplitPattern::kLlama3: out = Pattern::kLlama3; return true;
      case SplitPattern::kNone: break;
    }
    return false;
  }

  // The next piece, or false at the end of the text.
  bool next(size_t& start, size_t& end) {
    if (mask_ == 0 && taken_ == count_ && !refill()) return false;
    if (mask_ != 0) {
      end = base_ + static_cast<size_t>(__builtin_ctzll(mask_));
      mask_ &= mask_ - 1;
    } else {
      end = ends_[taken_++];
    }
    start = last_;
    last_ = end;
    return true;
  }

  // Every piece from here on, f(start, end) in order, as next() would give them, while more()
  // holds (asked before each block's run of pieces); how many pieces f was given. Faster than
  // next() in a loop: the position stays in registers (next() stores and reloads its members
  // around every piece's work) and a block's ends are read off its mask, not stored first.
  template <class F, class More>
  size_t for_each(F&& f, More&& more) {
    size_t start = last_, pieces = 0;
    while (more() && (mask_ != 0 || taken_ != count_ || refill())) {
      const size_t base = base_;
      uint64_t m = mask_;
      mask_ = 0;
      for (; m != 0; m &= m - 1, ++pieces) {
        const size_t end = base + static_cast<size_t>(__builtin_ctzll(m));
        f(start, end);
        start = end;
      }
      const uint32_t to = count_;
      for (uint32_t i = taken_; i < to; ++i, ++pieces) {
        const size_t end = ends_[i];
        f(start, end);
        start = end;
      }
      taken_ = to;
      last_ = start;
    }
    return pieces;
  }

 private:
  enum class Rules : uint8_t { kNone, kR50k, kCl100k, kQwen2, kO200k, kDeepSeekV3 };

  static Mode resolve(Mode mode);  // kAuto, or a mode this CPU lacks, made the fastest available
  bool refill();
  bool scan_block();  // the ends of the pieces from pos_ (mask_, ends_); false when none could be proven
  // The same from the characters at pos_, each as one ASCII byte of its class (patterns that
  // ask a character nothing but its class: see transcodes()).
  bool scan_transcoded();
  // The ends a classified block of `len` bytes proves: in mask_ (bit j: an end at base_ + j) and
  // ends_ (after those); pos_ moves to the last boundary; false when it proves none.
  // at[j]: the offset from pos_ of the character block byte j stands for (null: byte j itself).
  bool commit(const uint8_t* p, const BlockClasses& c, int len, bool at_end, const uint32_t* at);
  // Whether blocks may start at other characters than ASCII: the patterns whose rules ask a
  // character only whether it is a letter, a number, whitespace or else (o200k_base splits
  // letters by case and DeepSeek-V3 has other classes; theirs stay with the scalar scanners).
  bool transcodes() const { return rules_ == Rules::kR50k || rules_ == Rules::kCl100k || rules_ == Rules::kQwen2; }
  size_t scalar_end(size_t pos) const;

  static constexpr size_t kScalarRun = 16;  // pieces the scalar scanner takes per refill at most

  const uint8_t* s_;
  size_t n_;
  size_t pos_ = 0;   // where the next refill starts (a piece boundary)
  size_t last_ = 0;  // start of the next piece handed out
  Pattern pattern_;
  Rules rules_;
  Mode mode_;
  // The ends not handed out yet: first those of mask_ (bit j: base_ + j), then ends_[taken_, count_).
  uint64_t mask_ = 0;
  size_t base_ = 0;
  uint32_t count_ = 0, taken_ = 0;
  size_t ends_[64];
};

}  // namespace crayon
