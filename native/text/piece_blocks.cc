// Block rules for the GPT-2, cl100k_base / Llama 3, Qwen2, o200k_base and DeepSeek-V3 split
// patterns (see piece_blocks.h).
//
// A block is up to 64 bytes from a known piece boundary p; bit j of every mask below stands for
// byte p + j, and the masks hold only the block's ASCII prefix (the "valid" bytes). Shifting a
// mask left by one asks about the previous byte (bit 0 then sees "no such byte", which is right:
// p starts a piece, so nothing before it joins it); shifting right asks about the next byte.
// Classes (ASCII): L letters, D digits, SP U+0020, NL \r \n, WO \t \v \f (the other ASCII \s),
// S = SP | WO | NL, O everything else (punctuation, other controls; the apostrophe is an O).
//
// The notation and the scalar rules these masks reproduce are those of pretokenize.cc; the
// reasoning per mask is next to it. "Run" is a maximal run of one class.
#include "text/piece_blocks.h"

#include <algorithm>
#include <cstring>

#include "core/swar.h"
#include "core/utf8.h"
#include "tables/unicode_tables.h"
#include "text/deepseek_split.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRAYON_BLOCKS_AVX512 1
#include <immintrin.h>
#endif

namespace crayon {

struct BlockClasses {
  uint64_t nonascii = 0, letter = 0, upper = 0, digit = 0, space = 0, newline = 0, other_ws = 0, apos = 0, slash = 0;
  uint64_t control = 0;  // C0 controls other than whitespace, and DEL
};

namespace {

using Classes = BlockClasses;

constexpr bool ascii_classes_are_plain() {
  for (int b = 0; b < 128; ++b) {
    const uint8_t f = unicode::kAsciiFlags[b];
    const bool letter = (b | 0x20) >= 'a' && (b | 0x20) <= 'z';
    const bool digit = b >= '0' && b <= '9';
    const bool space = b == ' ' || (b >= 9 && b <= 13);
    if (((f & unicode::kLetter) != 0) != letter || ((f & unicode::kNumber) != 0) != digit ||
        ((f & unicode::kSpace) != 0) != space) {
      return false;
    }
  }
  return true;
}
static_assert(ascii_classes_are_plain(), "the block classifier assumes L = [A-Za-z], N = [0-9], \\s = [\\t-\\r ] in ASCII");


// The letters a contraction body is made of, matched case-insensitively (cl100k_base, Llama 3,
// Qwen2) or as lower case only (GPT-2).
struct ContractionLetters {
  uint64_t sdmt = 0, l = 0, v = 0, r = 0, e = 0;
};

// --- classification ----------------------------------------------------------------------------

enum : uint16_t { kL = 1, kD = 2, kSp = 4, kNl = 8, kWo = 16, kAp = 32, kUp = 64, kSlash = 128, kHigh = 256, kCtl = 512 };

constexpr uint16_t class_of(int b) {
  if (b >= 0x80) return kHigh;
  if (b >= 'A' && b <= 'Z') return kL | kUp;
  if (b >= 'a' && b <= 'z') return kL;
  if (b >= '0' && b <= '9') return kD;
  if (b == ' ') return kSp;
  if (b == '\n' || b == '\r') return kNl;
  if (b >= 9 && b <= 13) return kWo;
  if (b == '\'') return kAp;
  if (b == '/') return kSlash;
  if (b < 0x20 || b == 0x7F) return kCtl;
  return 0;
}

struct ClassTable {
  uint16_t c[256];
  constexpr ClassTable() : c() {
    for (int b = 0; b < 256; ++b) c[b] = class_of(b);
  }
};
constexpr ClassTable kClassTable;

// kExtra: also capitals, slashes and controls (o200k_base and DeepSeek-V3 read them; the others
// do not, and the three masks cost the block scanner 7-10% on English).
template <bool kExtra>
void classify_portable(const uint8_t* p, Classes& c) {
  for (int j = 0; j < 64; ++j) {
    const uint64_t bit = uint64_t{1} << j;
    const uint16_t k = kClassTable.c[p[j]];
    if (k & kHigh) c.nonascii |= bit;
    if (k & kL) c.letter |= bit;
    if (kExtra && (k & kUp)) c.upper |= bit;
    if (kExtra && (k & kSlash)) c.slash |= bit;
    if (kExtra && (k & kCtl)) c.control |= bit;
    if (k & kD) c.digit |= bit;
    if (k & kSp) c.space |= bit;
    if (k & kNl) c.newline |= bit;
    if (k & kWo) c.other_ws |= bit;
    if (k & kAp) c.apos |= bit;
  }
}

template <bool kFold>
void contraction_letters_portable(const uint8_t* p, ContractionLetters& k) {
  for (int j = 0; j < 64; ++j) {
    const uint64_t bit = uint64_t{1} << j;
    const uint8_t b = kFold ? (p[j] | 0x20) : p[j];
    if (b == 's' || b == 'd' || b == 'm' || b == 't') k.sdmt |= bit;
    if (b == 'l') k.l |= bit;
    if (b == 'v') k.v |= bit;
    if (b == 'r') k.r |= bit;
    if (b == 'e') k.e |= bit;
  }
}

#if defined(__SSE2__)
inline uint64_t bits16(__m128i v, int chunk) {
  return static_cast<uint64_t>(static_cast<uint16_t>(_mm_movemask_epi8(v))) << (16 * chunk);
}
inline __m128i splat(char c) { return _mm_set1_epi8(c); }
// Bytes in [lo, hi] (lo > 0; bytes >= 0x80 are negative as signed and never match).
inline __m128i in_range(__m128i v, char lo, char hi) {
  return _mm_and_si128(_mm_cmpgt_epi8(v, splat(static_cast<char>(lo - 1))), _mm_cmplt_epi8(v, splat(static_cast<char>(hi + 1))));
}

template <bool kExtra>
[[gnu::always_inline]] inline void classify_sse2(const uint8_t* p, Classes& c) {
  for (int i = 0; i < 4; ++i) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
    const __m128i folded = _mm_or_si128(v, splat(0x20));
    const __m128i nl = _mm_or_si128(_mm_cmpeq_epi8(v, splat('\n')), _mm_cmpeq_epi8(v, splat('\r')));
    c.nonascii |= bits16(v, i);
    c.letter |= bits16(in_range(folded, 'a', 'z'), i);
    c.digit |= bits16(in_range(v, '0', '9'), i);
    c.space |= bits16(_mm_cmpeq_epi8(v, splat(' ')), i);
    c.newline |= bits16(nl, i);
    c.other_ws |= bits16(_mm_andnot_si128(nl, in_range(v, 9, 13)), i);
    c.apos |= bits16(_mm_cmpeq_epi8(v, splat('\'')), i);
    // (bytes >= 0x80 are negative and count as below 0x20 here; they are never valid bytes)
    if constexpr (kExtra) {
      c.upper |= bits16(in_range(v, 'A', 'Z'), i);
      c.slash |= bits16(_mm_cmpeq_epi8(v, splat('/')), i);
      const __m128i below_space = _mm_andnot_si128(in_range(v, 9, 13), _mm_cmplt_epi8(v, splat(0x20)));
      c.control |= bits16(_mm_or_si128(below_space, _mm_cmpeq_epi8(v, splat(0x7F))), i);
    }
  }
}

template <bool kFold>
void contraction_letters_sse2(const uint8_t* p, ContractionLetters& k) {
  for (int i = 0; i < 4; ++i) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i));
    if (kFold) v = _mm_or_si128(v, splat(0x20));
    auto eq = [&](char ch) { return _mm_cmpeq_epi8(v, splat(ch)); };
    k.sdmt |= bits16(_mm_or_si128(_mm_or_si128(eq('s'), eq('d')), _mm_or_si128(eq('m'), eq('t'))), i);
    k.l |= bits16(eq('l'), i);
    k.v |= bits16(eq('v'), i);
    k.r |= bits16(eq('r'), i);
    k.e |= bits16(eq('e'), i);
  }
}
#endif

// AVX2: the SSE2 classifier on two 32-byte halves, about half its instructions (callgrind, new
// text, whole encode: o200k_base English -4.6% instructions, cl100k_base -3.6%, qwen2_5 -3.4%).
// An earlier wall-clock comparison found it no faster than SSE2, within that machine's noise.
// Compiled for that target alone and called only where the CPU has it (cpu_has_avx2); as a
// call, since code of another target is not inlined.
#if defined(CRAYON_BLOCKS_AVX512)
#define CRAYON_TARGET_AVX2 __attribute__((target("avx2")))
CRAYON_TARGET_AVX2 inline __m256i splat32(char c) { return _mm256_set1_epi8(c); }
// Bytes in [lo, hi] (lo > 0; bytes >= 0x80 are negative as signed and never match).
CRAYON_TARGET_AVX2 inline __m256i in_range32(__m256i v, char lo, char hi) {
  return _mm256_and_si256(_mm256_cmpgt_epi8(v, splat32(static_cast<char>(lo - 1))),
                          _mm256_cmpgt_epi8(splat32(static_cast<char>(hi + 1)), v));
}

// A class's 64-bit mask from its two 32-byte halves.
CRAYON_TARGET_AVX2 inline uint64_t both32(__m256i a, __m256i b) {
  return static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_epi8(a))) |
         static_cast<uint64_t>(static_cast<uint32_t>(_mm256_movemask_epi8(b))) << 32;
}
CRAYON_TARGET_AVX2 inline __m256i eq32(__m256i v, char ch) { return _mm256_cmpeq_epi8(v, splat32(ch)); }
CRAYON_TARGET_AVX2 inline __m256i newline32(__m256i v) { return _mm256_or_si256(eq32(v, '\n'), eq32(v, '\r')); }
CRAYON_TARGET_AVX2 inline __m256i letter32(__m256i v) {
  return in_range32(_mm256_or_si256(v, splat32(0x20)), 'a', 'z');
}
// C0 controls other than whitespace (`ws`: bytes 9..13), and DEL. Bytes >= 0x80 are negative and
// count as below 0x20 here; they are never valid bytes.
CRAYON_TARGET_AVX2 inline __m256i control32(__m256i v, __m256i ws) {
  const __m256i below_space = _mm256_andnot_si256(ws, _mm256_cmpgt_epi8(splat32(0x20), v));
  return _mm256_or_si256(below_space, eq32(v, 0x7F));
}

// Both 32-byte halves at once, each class's two movemasks joined with a constant shift (a loop
// over the halves shifted every mask by a variable count and made its constants again).
template <bool kExtra>
CRAYON_TARGET_AVX2 void classify_avx2(const uint8_t* p, Classes& c) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
  const __m256i nl_lo = newline32(lo), nl_hi = newline32(hi);
  const __m256i ws_lo = in_range32(lo, 9, 13), ws_hi = in_range32(hi, 9, 13);
  c.nonascii = both32(lo, hi);
  c.letter = both32(letter32(lo), letter32(hi));
  c.digit = both32(in_range32(lo, '0', '9'), in_range32(hi, '0', '9'));
  c.space = both32(eq32(lo, ' '), eq32(hi, ' '));
  c.newline = both32(nl_lo, nl_hi);
  c.other_ws = both32(_mm256_andnot_si256(nl_lo, ws_lo), _mm256_andnot_si256(nl_hi, ws_hi));
  c.apos = both32(eq32(lo, '\''), eq32(hi, '\''));
  if constexpr (kExtra) {
    c.upper = both32(in_range32(lo, 'A', 'Z'), in_range32(hi, 'A', 'Z'));
    c.slash = both32(eq32(lo, '/'), eq32(hi, '/'));
    c.control = both32(control32(lo, ws_lo), control32(hi, ws_hi));
  }
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

// AVX-512BW: the whole block in one register and every class a mask, no movemask per 16 bytes.
// Compiled for that target alone and called only where the CPU (and OS) has it (cpu_has_avx512bw),
// so the module still runs on baseline x86-64.
#if defined(CRAYON_BLOCKS_AVX512)
#define CRAYON_TARGET_AVX512 __attribute__((target("avx512bw")))
CRAYON_TARGET_AVX512 inline __m512i splat64(char c) { return _mm512_set1_epi8(c); }
// Bytes in [lo, hi], compared unsigned: bytes >= 0x80 never fall in a range below 0x80.
CRAYON_TARGET_AVX512 inline uint64_t in_range64(__m512i v, char lo, char hi) {
  return _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, splat64(lo)), splat64(static_cast<char>(hi - lo)));
}
CRAYON_TARGET_AVX512 inline uint64_t eq64(__m512i v, char c) { return _mm512_cmpeq_epi8_mask(v, splat64(c)); }

template <bool kExtra>
CRAYON_TARGET_AVX512 void classify_avx512(const uint8_t* p, Classes& c) {
  const __m512i v = _mm512_loadu_si512(p);
  const uint64_t nl = eq64(v, '\n') | eq64(v, '\r');
  const uint64_t ws_range = in_range64(v, 9, 13);
  c.nonascii = _mm512_movepi8_mask(v);
  c.letter = in_range64(_mm512_or_si512(v, splat64(0x20)), 'a', 'z');
  c.digit = in_range64(v, '0', '9');
  c.space = eq64(v, ' ');
  c.newline = nl;
  c.other_ws = ws_range & ~nl;
  c.apos = eq64(v, '\'');
  if constexpr (kExtra) {
    c.upper = in_range64(v, 'A', 'Z');
    c.slash = eq64(v, '/');
    c.control = (_mm512_cmplt_epu8_mask(v, splat64(0x20)) & ~ws_range) | eq64(v, 0x7F);
  }
}

bool cpu_has_avx512bw() {
  static const bool has = __builtin_cpu_supports("avx512bw");
  return has;
}
#endif

// The ASCII byte that stands for a character of these Unicode flags in a transcoded block
// (PieceBlocks::scan_transcoded): a letter 'a', a number '0', whitespace '\t', anything else '!'.
struct StandIns {
  uint8_t of[256];
  constexpr StandIns() : of() {
    for (int f = 0; f < 256; ++f) {
      of[f] = (f & unicode::kLetter) ? 'a' : (f & unicode::kNumber) ? '0' : (f & unicode::kSpace) ? '\t' : '!';
    }
  }
};
constexpr StandIns kStandIns;

// The stand-ins of the two-byte characters (U+0080..U+07FF: Latin, Greek, Cyrillic, Armenian,
// Hebrew, Arabic ...) by code point, without and with U+017F folded to 's': one load for such a
// character instead of the two-stage flags lookup and the fold test.
struct TwoByteStandIns {
  uint8_t of[2][0x800];
  TwoByteStandIns() {
    for (uint32_t cp = 0; cp < 0x800; ++cp) of[0][cp] = of[1][cp] = kStandIns.of[unicode::flags(cp)];
    of[1][0x017F] = 's';
  }
};
const TwoByteStandIns kTwoByteStandIns;

// The classifier of a resolved mode (kAvx512, kAvx2, kSse2 or kPortable; see PieceBlocks::resolve).
template <bool kExtra>
[[gnu::always_inline]] inline void classify(PieceBlocks::Mode mode, const uint8_t* p, Classes& c) {
#if defined(CRAYON_BLOCKS_AVX512)
  if (mode == PieceBlocks::Mode::kAvx512) return classify_avx512<kExtra>(p, c);
  if (mode == PieceBlocks::Mode::kAvx2) return classify_avx2<kExtra>(p, c);
#endif
#if defined(__SSE2__)
  if (mode == PieceBlocks::Mode::kSse2) return classify_sse2<kExtra>(p, c);
#endif
  classify_portable<kExtra>(p, c);
}

// Contraction letters are needed only by blocks with an apostrophe: SSE2 serves the AVX modes too.
void contraction_letters(PieceBlocks::Mode mode, bool fold, const uint8_t* p, ContractionLetters& k) {
#if defined(__SSE2__)
  if (mode != PieceBlocks::Mode::kPortable) return fold ? contraction_letters_sse2<true>(p, k) : contraction_letters_sse2<false>(p, k);
#endif
  fold ? contraction_letters_portable<true>(p, k) : contraction_letters_portable<false>(p, k);
}

// --- rules ---------------------------------------------------------------------------------------

// The masks of one block: its valid ASCII bytes by class.
struct Block {
  uint64_t valid, L, upper, D, SP, NL, WO, O, apos, slash, control;
};

// Contractions: the apostrophes in `at` followed by a body of one letter ([sdmt]) or of two (ll,
// ve, re), in the letter case the pattern matches.
struct Contractions {
  uint64_t one, two;
  uint64_t after() const { return (one << 2) | (two << 3); }  // the byte after the body
  uint64_t body() const { return ((one | two) << 1) | (two << 2); }
};
inline Contractions contractions(uint64_t at, const ContractionLetters& k) {
  return {at & (k.sdmt >> 1), at & (((k.l >> 1) & (k.l >> 2)) | (((k.v | k.r) >> 1) & (k.e >> 2)))};
}

// The highest set bit of `m` at or below `limit` (0 <= limit < 64), or -1.
inline int highest_at_or_below(uint64_t m, int limit) {
  const uint64_t below = limit >= 63 ? m : m & ((uint64_t{2} << limit) - 1);
  return below ? 63 - __builtin_clzll(below) : -1;
}

// GPT-2 (r50k_base):  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   - Whitespace runs: a run of one is one piece; a longer run gives all but its last character,
//     and the last starts the next piece (\s+ backtracks one for the lookahead). So a run's first
//     byte and, in runs of two or more, its last byte start pieces.
//   - A run of L, N or O starts a piece unless a U+0020 precedes it: that space is the last (or
//     only) character of its whitespace run, so it starts a piece, and " ?" takes it along.
//   - An apostrophe that starts a piece (first of its O run, no space before it) followed by a
//     body is a contraction (case-sensitive here): the body's letter run is split after it.
[[gnu::always_inline]] inline uint64_t r50k_starts(const Block& b, const ContractionLetters* k, uint64_t& ws) {
  const uint64_t S = b.SP | b.WO | b.NL;
  ws = S;
  const uint64_t run_first = S & ~(S << 1);
  const uint64_t run_last_of_many = S & (S << 1) & ~(S >> 1);
  const uint64_t first_L = b.L & ~(b.L << 1), first_D = b.D & ~(b.D << 1), first_O = b.O & ~(b.O << 1);
  const uint64_t after_space = b.SP << 1;
  uint64_t starts = run_first | run_last_of_many | ((first_L | first_D | first_O) & ~after_space);
  if (k != nullptr) {
    // A contraction ends its piece after the body, inside a run of letters ("'sa" is "'s", "a").
    const Contractions c = contractions(first_O & b.apos & ~after_space, *k);
    starts = (starts & ~c.body()) | c.after();
  }
  return starts;
}

// cl100k_base and Llama 3 (Family::kCl100k; Qwen2 differs only in its digits):
//   '(?i:[sdmt]|ll|ve|re) | [^\r\n\p{L}\p{N}]?+\p{L}++ | \p{N}{1,3}+ | ?[^\s\p{L}\p{N}]++[\r\n]*+
//   | \s*[\r\n] | \s+(?!\S) | \s          (the end-of-text alternatives are left to the scalar scanner)
//   - An O run takes the line breaks right after it ([\r\n]*): T below. The rest of those
//     whitespace runs (S2) is split by the whitespace rules.
//   - A whitespace run from a: if it holds a line break, its first piece ends after the last one
//     (\s* backtracks to it), at k; from q = k (or a when there is none) the rest, free of line
//     breaks, is one piece if it is one character and else all but its last character. So a, k
//     and, where the rest has two or more characters, the run's last byte start pieces. Where a
//     line-break-free stretch after a line break is followed by another line break, k is not
//     known locally ("bad" below) and the block stops before that run.
//   - The last character of a whitespace run starts a piece; if it is SP or WO and a letter
//     follows, [^\r\n\p{L}\p{N}]? takes it along; if it is U+0020 and an O follows, " ?" does.
//   - An O run starts a piece unless U+0020 precedes it (taken along, above). An O run of one
//     character that starts a piece and is followed by a letter is the [^\r\n\p{L}\p{N}]? of
//     that letter run (O_prefix). A longer O run takes all its characters, so a letter after it
//     starts a piece.
//   - A letter run starts a piece unless its first letter is taken along (after SP/WO or O_prefix).
//   - Digits: a run starts a piece, and then every third digit (every digit for Qwen2).
//   - Contractions as in GPT-2, case-insensitively, at an apostrophe starting a piece.
//
// o200k_base (Family::kO200k), in ASCII where U = [A-Z], W = [a-z] and there are no marks:
//   P?U*W+C? | P?U+W*C? | \p{N}{1,3} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//   - A letter run also splits before each capital that follows a small letter: U*W+ takes the
//     capitals and then the small letters, and a run ending in capitals is U+W*.
//   - C? (a contraction, case-insensitive) belongs to the letter piece that ends a letter run: the
//     apostrophe and the body start nothing; the byte after the body starts a piece. There is no
//     contraction alternative of its own: elsewhere an apostrophe is an O.
//   - The tail [\r\n/]* of an O run: slashes right after the run are O and its own already; from
//     the line break after it on, the run of line breaks and slashes (T; its slashes start nothing).
//   - Whitespace, P prefixes, O runs and digits as in cl100k.
//
// DeepSeek-V3 (Family::kDeepSeekV3): digits \p{N}{1,3} split off first, then cjk runs, then on
// each piece left (a segment) `words` (text/deepseek_split.h gives its alternatives 1-6):
//   A[A-Za-z]+ | B?[\p{L}\p{M}]+ | ?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// with A and PS the ASCII punctuation and symbols, B = [^\r\n\p{L}\p{P}\p{S}] (in a segment of
// ASCII: SP, WO and the controls C). Isolated: the text between matches is a piece too. In ASCII:
//   - Digits: groups of three from each run's start, as in cl100k. A digit ends a segment, so
//     nothing joins across it, and a whitespace run right before it is one piece (its end is the
//     end of the segment's text for (?!\S)): no start at such a run's last byte.
//   - PS plays O's part (runs, " ?" before them, the line breaks after them, one PS before
//     letters); there are no contractions.
//   - A control before a letter is the B? of that letter run; a control before anything else
//     starts no match, so a run of those is one unmatched piece.
enum class Family { kCl100k, kQwen2, kO200k, kDeepSeekV3 };

template <Family kFamily>
[[gnu::always_inline]] inline uint64_t cl100k_like_starts(const Block& b, const ContractionLetters* k, uint64_t& ws,
                                                          int& cut) {
  const uint64_t R = b.SP | b.WO;  // whitespace other than line breaks
  const uint64_t NL = b.NL;
  // The characters that make runs of their own and take the line breaks after them: O, or for
  // DeepSeek-V3 the punctuation and symbols (its controls are in B).
  const uint64_t C = kFamily == Family::kDeepSeekV3 ? b.control : 0;
  const uint64_t O_all = b.O & ~C;
  // The tails: a carry from each tail's first byte clears its run (one seed per run).
  uint64_t T;
  if constexpr (kFamily == Family::kO200k) {
    // A run of line breaks and slashes may hold several line breaks right after an O (".\n/\n",
    // or "\n/\n" after a letter, where the first break is whitespace): the tail runs from the
    // first of them to the end of the run. Filling each run from its start up to that break (a
    // single seed per run) leaves the tail.
    const uint64_t TS = NL | b.slash;
    const uint64_t tail_start = NL & (O_all << 1);
    const uint64_t head = TS & ~tail_start;
    T = TS & ~(head & ~(head + (head & ~(TS << 1))));
  } else {
    T = NL & ~(NL + (NL & (O_all << 1)));
  }
  const uint64_t N2 = NL & ~T;
  const uint64_t S2 = R | N2;
  ws = S2;
  const uint64_t run_first = S2 & ~(S2 << 1);
  const uint64_t after_break = R & (N2 << 1);  // candidate k: the first byte after a line break
  // A candidate whose stretch of R ends on another line break is not the run's k: the block stops
  // at the start of the first such run.
  const uint64_t bad = ((R + after_break) & ~R) & N2;
  if (bad != 0) cut = highest_at_or_below(run_first, __builtin_ctzll(bad));
  uint64_t run_last_of_rest = S2 & ~(S2 >> 1) & R & (R << 1);
  if constexpr (kFamily == Family::kDeepSeekV3) run_last_of_rest &= ~(b.D >> 1);  // a segment's end
  const uint64_t O = O_all & ~T;
  const uint64_t first_O = O & ~(O << 1);
  const uint64_t O_starts = first_O & ~(b.SP << 1);
  const uint64_t O_prefix = O_starts & ~(O >> 1) & (b.L >> 1);
  uint64_t L_starts = b.L & ~(b.L << 1) & ~((R | C | O_prefix) << 1);
  if constexpr (kFamily == Family::kO200k) L_starts |= b.upper & ((b.L & ~b.upper) << 1);
  uint64_t D_starts;
  if constexpr (kFamily == Family::kQwen2) {
    D_starts = b.D;
  } else {
    D_starts = b.D & ~(b.D << 1);
    const uint64_t third = b.D & (b.D << 1) & (b.D << 2);  // the byte and the two before are digits
    for (uint64_t g = D_starts; (g = (g << 3) & third) != 0;) D_starts |= g;
  }
  uint64_t starts = run_first | after_break | run_last_of_rest | O_starts | L_starts | D_starts;
  if constexpr (kFamily == Family::kDeepSeekV3) {
    const uint64_t unmatched = C & ~(b.L >> 1);
    starts |= (C & (b.L >> 1)) | (unmatched & ~(unmatched << 1));
  }
  if (k != nullptr) {
    if constexpr (kFamily == Family::kO200k) {
      const Contractions c = contractions(b.apos & (b.L << 1), *k);  // an apostrophe ending a letter run
      starts = (starts & ~(c.one | c.two | c.body())) | c.after();
      // An apostrophe right after a body ("x'd's") ends no letter run of its own: it starts a
      // piece. Rare; the block stops there and the next one starts with it.
      const uint64_t chained = (c.one | c.two) & (c.body() << 1);
      if (chained != 0) cut = std::min(cut, __builtin_ctzll(chained));
    } else {
      // A contraction ends its piece after the body, inside a run of letters ("'sa" is "'s",
      // "a"); the body's first letter is no start already (an apostrophe then a letter is an
      // O_prefix).
      starts |= contractions(O_starts & b.apos, *k).after();
    }
  }
  return starts;
}

}  // namespace

PieceBlocks::PieceBlocks(Pattern pattern, std::string_view text, Mode mode)
    : s_(reinterpret_cast<const uint8_t*>(text.data())), n_(text.size()), pattern_(pattern), mode_(resolve(mode)) {
  switch (pattern) {
    case Pattern::kR50k: rules_ = Rules::kR50k; break;
    case Pattern::kCl100k:
    case Pattern::kLlama3: rules_ = Rules::kCl100k; break;
    case Pattern::kQwen2: rules_ = Rules::kQwen2; break;
    case Pattern::kO200k: rules_ = Rules::kO200k; break;
    case Pattern::kDeepSeekV3: rules_ = Rules::kDeepSeekV3; break;
  }
  if (mode == Mode::kScalar) rules_ = Rules::kNone;
}

bool PieceBlocks::available(Mode mode) {
  switch (mode) {
    case Mode::kAvx512:
#if defined(CRAYON_BLOCKS_AVX512)
      return cpu_has_avx512bw();
#else
      return false;
#endif
    case Mode::kAvx2:
#if defined(CRAYON_BLOCKS_AVX512)
      return cpu_has_avx2();
#else
      return false;
#endif
    case Mode::kSse2:
#if defined(__SSE2__)
      return true;
#else
      return false;
#endif
    case Mode::kAuto:
    case Mode::kPortable:
    case Mode::kScalar: return true;
  }
  return false;
}

PieceBlocks::Mode PieceBlocks::resolve(Mode mode) {
  if (mode == Mode::kAuto || !available(mode)) {
    if (available(Mode::kAvx512)) return Mode::kAvx512;
    if (available(Mode::kAvx2)) return Mode::kAvx2;
    return available(Mode::kSse2) ? Mode::kSse2 : Mode::kPortable;
  }
  return mode;
}

size_t PieceBlocks::scalar_end(size_t pos) const {
  const std::string_view text(reinterpret_cast<const char*>(s_), n_);
  switch (pattern_) {
    case Pattern::kR50k: return piece_end(SplitPattern::kR50k, text, pos);
    case Pattern::kCl100k: return piece_end(SplitPattern::kCl100k, text, pos);
    case Pattern::kLlama3: return piece_end(SplitPattern::kLlama3, text, pos);
    case Pattern::kQwen2: return piece_end_qwen2(text, pos);
    case Pattern::kO200k: return piece_end(SplitPattern::kO200k, text, pos);
    case Pattern::kDeepSeekV3: return deepseek_piece_end(text, pos);
  }
  return n_;
}

// True when the 8 bytes at pos are ASCII. A block needs at least that many ASCII bytes to prove a
// boundary, and in text of other scripts most pieces begin with an ASCII space and go on in
// another script: classifying 64 bytes there only to fall back cost such text a quarter of its
// scanning time.
inline bool ascii8(const uint8_t* s, size_t n, size_t pos) {
  if (n - pos < 8) return false;
  uint64_t x;
  std::memcpy(&x, s + pos, 8);
  return (x & swar::kHigh) == 0;
}

bool PieceBlocks::refill() {
  count_ = taken_ = 0;
  mask_ = 0;
  if (pos_ >= n_) return false;
  if (rules_ != Rules::kNone) {
    // ASCII ahead: a block of bytes (where it proves nothing, a run longer than a block, the
    // scanner's turn); else, where the pattern allows, a block of characters.
    if (ascii8(s_, n_, pos_)) {
      if (scan_block()) return true;
    } else if (transcodes()) {
      if (scan_transcoded()) return true;
    }
  }
  do {
    const size_t end = scalar_end(pos_);
    ends_[count_++] = end;
    pos_ = end;
  } while (count_ < kScalarRun && pos_ < n_ && !ascii8(s_, n_, pos_));
  return true;
}

bool PieceBlocks::scan_block() {
  const size_t avail = n_ - pos_;
  const uint8_t* p = s_ + pos_;
  alignas(16) uint8_t padded[64];
  if (avail < 64) {
    std::memcpy(padded, p, avail);
    std::memset(padded + avail, 0, 64 - avail);
    p = padded;
  }
  Classes c;
  if (rules_ == Rules::kO200k || rules_ == Rules::kDeepSeekV3) classify<true>(mode_, p, c);
  else classify<false>(mode_, p, c);
  // The valid bytes: the ASCII prefix of what the text has left.
  const int ascii = c.nonascii ? __builtin_ctzll(c.nonascii) : 64;
  const int len = static_cast<int>(avail < static_cast<size_t>(ascii) ? avail : ascii);
  return commit(p, c, len, static_cast<size_t>(len) == avail, nullptr);
}

bool PieceBlocks::scan_transcoded() {
  // Up to 64 characters from pos_, one byte each: ASCII as itself, any other character as an
  // ASCII byte of its class under the pattern (a letter 'a', a number '0', whitespace '\t', else
  // '!'; U+017F LATIN SMALL LETTER LONG S is 's' where contractions fold case, as `(?i:'s)`
  // matches it), and an invalid byte as '!' (a character of its own, as the scanners take it).
  // r50k_base, cl100k_base, Llama 3 and Qwen2 ask nothing else of a character, so the rules then
  // see exactly the characters' classes, a byte per character; at[] maps them back to bytes.
  alignas(16) uint8_t stand[64];
  uint32_t at[65];
  const bool fold = rules_ != Rules::kR50k;
  const uint8_t* const two = kTwoByteStandIns.of[fold ? 1 : 0];
  const uint8_t* const s = s_;
  size_t i = pos_;
  int k = 0;
  for (; k < 64 && i < n_; ++k) {
    at[k] = static_cast<uint32_t>(i - pos_);
    const uint32_t b0 = s[i];
    if (b0 < 0x80) {
      stand[k] = static_cast<uint8_t>(b0);
      ++i;
      continue;
    }
    if (const uint32_t cp = utf8::two_byte_cp(s + i, n_ - i)) {  // by its code point (U+017F folded there)
      stand[k] = two[cp];
      i += 2;
      continue;
    }
    const utf8::Decoded d = utf8::decode_common(s + i, s + n_);
    stand[k] = kStandIns.of[d.cp == utf8::kInvalid ? 0 : unicode::flags(d.cp)];
    i += d.len;
  }
  at[k] = static_cast<uint32_t>(i - pos_);
  if (k < 64) std::memset(stand + k, 0, static_cast<size_t>(64 - k));
  Classes c;
  classify<false>(mode_, stand, c);
  return commit(stand, c, k, i == n_, at);
}

[[gnu::always_inline]] inline bool PieceBlocks::commit(const uint8_t* p, const BlockClasses& c, int len, bool at_end,
                                                    const uint32_t* at) {
  const uint64_t valid = len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1;
  Block b;
  b.valid = valid;
  b.L = c.letter & valid;
  b.upper = c.upper & valid;
  b.slash = c.slash & valid;
  b.control = c.control & valid;
  b.D = c.digit & valid;
  b.SP = c.space & valid;
  b.NL = c.newline & valid;
  b.WO = c.other_ws & valid;
  b.apos = c.apos & valid;
  b.O = valid & ~(b.L | b.D | b.SP | b.NL | b.WO);

  ContractionLetters letters;
  const ContractionLetters* k = nullptr;
  if (b.apos != 0 && rules_ != Rules::kDeepSeekV3) {  // (DeepSeek-V3 has no contractions)
    contraction_letters(mode_, /*fold=*/rules_ != Rules::kR50k, p, letters);
    letters.sdmt &= valid;
    letters.l &= valid;
    letters.v &= valid;
    letters.r &= valid;
    letters.e &= valid;
    k = &letters;
  }

  uint64_t ws = 0, starts;
  int cut = 64;  // a position the rules cannot prove boundaries past
  switch (rules_) {
    case Rules::kR50k: starts = r50k_starts(b, k, ws); break;
    case Rules::kCl100k: starts = cl100k_like_starts<Family::kCl100k>(b, k, ws, cut); break;
    case Rules::kQwen2: starts = cl100k_like_starts<Family::kQwen2>(b, k, ws, cut); break;
    case Rules::kO200k: starts = cl100k_like_starts<Family::kO200k>(b, k, ws, cut); break;
    case Rules::kDeepSeekV3: starts = cl100k_like_starts<Family::kDeepSeekV3>(b, k, ws, cut); break;
    default: return 0;
  }
  starts &= valid;

  // The last boundary the block proves. Inside the text a contraction's body may still follow in
  // the next block, so the last 3 bytes are left; at its end every byte is known.
  int limit = at_end ? len - 1 : len - 4;
  bool whole = at_end;  // the block's last piece ends at the end of the text
  const uint64_t run_first = ws & ~(ws << 1);
  if (ws >> (len - 1) & 1) {  // a whitespace run reaches the block's end: only its start is proven
    const int a = highest_at_or_below(run_first, len - 1);
    if (a < limit) limit = a;
    whole = false;
  }
  if (cut < 64) {
    if (cut < limit) limit = cut;
    whole = false;
  }
  if (limit <= 0) return 0;
  const int last = highest_at_or_below(starts, limit);
  if (last <= 0 && !whole) return 0;
  uint64_t ends = whole ? starts & ~uint64_t{1} : starts & ~uint64_t{1} & ((uint64_t{2} << last) - 1);
  uint32_t count = 0;
  if (at == nullptr) {
    mask_ = ends;  // read off bit by bit as the pieces are handed out
    base_ = pos_;
  } else {
    // Through locals: a store to ends_ might be, for all the compiler knows, a store to pos_.
    size_t* w = ends_;
    const size_t base = pos_;
    for (; ends != 0; ends &= ends - 1) *w++ = base + at[__builtin_ctzll(ends)];
    count = static_cast<uint32_t>(w - ends_);
  }
  if (whole) {
    ends_[count++] = n_;
    pos_ = n_;
  } else {
    pos_ += at == nullptr ? static_cast<size_t>(last) : at[last];
  }
  count_ = count;
  return mask_ != 0 || count != 0;
}

}  // namespace crayon
