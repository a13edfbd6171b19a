// Command-line driver for native/text/bert.cc, used by tests/test_bert_components.py.
//
//   bert_driver CASES OUT      run each case, write the results
//   bert_driver --bench FILE   time the hot paths on FILE's text (MB/s on stdout)
//
// Every case runs through the fast functions and through their reference twins; any difference
// prints the case and exits 2, so the Python side only compares the fast result with tokenizers.
// Normalizer cases also check the shortcuts against the full path: bert_is_identity() may only
// answer true for a text that normalize_bert leaves unchanged, and normalize_bert_same_length()
// may only answer true with the bytes normalize_bert produces and identity alignments.
//
// Binary formats, little-endian u32 throughout (the texts may hold NUL, newlines, anything):
//   CASES: repeated { kind, len, text }
//     kind bit 8 clear: BertNormalizer; bit 0 clean_text, 1 handle_chinese_chars, 2 strip_accents,
//       3 lowercase, 4: Prepend("") first (poisoned text, see normalize.h), 5: the second char's
//       alignment made empty (no tokenizers normalizer makes that; checks only fast = reference)
//     kind bit 8 set (256): BertPreTokenizer
//   OUT: normalizer: { flags, len, text bytes, len x { start, end } }, or just 0xFFFFFFFF where
//          normalize_bert throws NormalizerPanic (where tokenizers panics); flags bit 0:
//          bert_is_identity said true, bit 1: normalize_bert_same_length said true, bit 2: it said true
//          with CJK chars left unspaced (and the pieces matched)
//        pre-tokenizer: { count, count x { start, end } }
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "text/bert.h"
#include "text/normalize.h"
#include "driver_io.h"

namespace {

using driver_io::Reader;
using driver_io::read_file;
using driver_io::put_u32;

using crayon::BertNormalizerOptions;
using crayon::NormalizedText;
using Pieces = std::vector<std::pair<uint32_t, uint32_t>>;

constexpr uint32_t kPreTokenize = 256;
constexpr uint32_t kPrependEmpty = 16;
constexpr uint32_t kEmptySecond = 32;

BertNormalizerOptions options(uint32_t kind) {
  return BertNormalizerOptions{(kind & 1) != 0, (kind & 2) != 0, (kind & 4) != 0, (kind & 8) != 0};
}

std::string describe(const NormalizedText& t) {
  std::ostringstream o;
  for (unsigned char c : t.text) o << std::hex << static_cast<int>(c) << ' ';
  o << std::dec << "| ";
  for (const auto& a : t.align) o << a.first << ',' << a.second << ' ';
  return o.str();
}

// Returns false (after printing why) when fast and reference disagree.
// Whether `text` split by pretokenize_bert (isolating CJK chars when `isolate`) gives the pieces
// of the normalized text `fast`: the same bytes, and with `ranges` the same original ranges (byte
// i of `text` standing for original byte i).
bool same_pieces(const std::string& text, bool isolate, const NormalizedText& fast, bool ranges) {
  Pieces ours, theirs;
  crayon::pretokenize_bert(text, ours, isolate);
  crayon::pretokenize_bert(fast.text, theirs);
  if (ours.size() != theirs.size()) return false;
  for (size_t i = 0; i < ours.size(); ++i) {
    const auto [a, b] = ours[i];
    const auto [c, d] = theirs[i];
    if (text.compare(a, b - a, fast.text, c, d - c) != 0) return false;
    if (ranges && (a != fast.align[c].first || b != fast.align[d - 1].second)) return false;
  }
  return true;
}

bool run_normalizer(size_t index, uint32_t kind, const std::string& text, std::string& out) {
  const BertNormalizerOptions o = options(kind);
  NormalizedText fast = NormalizedText::from_original(text);
  if (kind & kPrependEmpty) crayon::normalize_prepend(fast, "");
  if (kind & kEmptySecond) {
    size_t i = 0, second = 0;
    for (int chars = 0; i < fast.text.size() && chars < 2; ++i) {
      if ((static_cast<uint8_t>(fast.text[i]) & 0xC0) != 0x80 && ++chars == 2) second = i;
    }
    for (i = second; second > 0 && i < fast.text.size() && fast.align[i] == fast.align[second]; ++i) {}
    for (size_t k = second; second > 0 && k < i; ++k) fast.align[k] = {fast.align[k].first, fast.align[k].first};
  }
  NormalizedText slow = fast;
  const NormalizedText before = fast;
  int panics = 0;
  try {
    crayon::normalize_bert(fast, o);
  } catch (const crayon::NormalizerPanic&) {
    ++panics;
  }
  try {
    crayon::reference::normalize_bert(slow, o);
  } catch (const crayon::NormalizerPanic&) {
    ++panics;
  }
  if (panics == 1) {
    std::cerr << "case " << index << ": kind " << kind << " panics on one path only\n";
    return false;
  }
  if (panics == 2) {
    put_u32(out, 0xFFFFFFFFu);
    return true;
  }
  if (fast.text != slow.text || fast.align != slow.align) {
    std::cerr << "case " << index << ": kind " << kind << " fast and reference differ\n  fast " << describe(fast)
              << "\n  ref  " << describe(slow) << "\n";
    return false;
  }
  if (fast.align.size() != fast.text.size()) {
    std::cerr << "case " << index << ": alignment count differs from byte count\n";
    return false;
  }
  if (crayon::bert_is_identity(before.text, o) && (fast.text != before.text || fast.align != before.align)) {
    std::cerr << "case " << index << ": kind " << kind << " claimed identity but changed\n  " << describe(before)
              << "\n  " << describe(fast) << "\n";
    return false;
  }
  const bool identity = crayon::bert_is_identity(before.text, o);
  // The text alone (ids-only encodes) is normalize_bert's text wherever the fused pass takes it.
  if (!(kind & (kPrependEmpty | kEmptySecond))) {
    std::string alone;
    if (crayon::normalize_bert_text(text, o, alone) && alone != fast.text) {
      std::cerr << "case " << index << ": kind " << kind << " the text-only pass disagrees\n  " << describe(fast) << "\n";
      return false;
    }
  }
  bool same_length = false, resumed = false;
  if (!(kind & (kPrependEmpty | kEmptySecond))) {
    std::string same;
    size_t resume = 0;
    same_length = crayon::normalize_bert_same_length(text, o, same, nullptr, &resume);
    if (same_length && (same != fast.text || fast.align != NormalizedText::from_original(text).align)) {
      std::cerr << "case " << index << ": kind " << kind << " same-length path disagrees\n  " << describe(fast)
                << "\n";
      return false;
    }
    // Where it stops, the text-only pass takes up the rest after the bytes it kept.
    if (!same_length && crayon::normalize_bert_text(text, o, same, resume) && same != fast.text) {
      std::cerr << "case " << index << ": kind " << kind << " the text-only pass resumed at " << resume
                << " disagrees\n  " << describe(fast) << "\n";
      return false;
    }
    resumed = !same_length && resume > 0;
  }
  // The same with CJK chars left unspaced: pretokenize_bert isolating them must give the pieces
  // (normalized bytes and original ranges) that pretokenize_bert gives on the spaced text.
  bool spaced_same = false;
  if (!(kind & (kPrependEmpty | kEmptySecond))) {
    std::string same;
    bool spaced = false;
    size_t resume = 0;
    spaced_same = crayon::normalize_bert_same_length(text, o, same, &spaced, &resume);
    if (spaced_same && !spaced && same != fast.text) {
      std::cerr << "case " << index << ": kind " << kind << " same-length path (CJK allowed) disagrees\n";
      return false;
    }
    if (spaced_same && !same_pieces(same, spaced, fast, /*ranges=*/true)) {
      std::cerr << "case " << index << ": kind " << kind << " unspaced CJK pieces differ from the spaced text's\n  "
                << describe(fast) << "\n";
      return false;
    }
    // Stopped and taken up by the text-only pass: CJK chars before the resume point may be left
    // unspaced, the rest spaced; split isolating them, the pieces' bytes are the spaced text's.
    if (!spaced_same && crayon::normalize_bert_text(text, o, same, resume) &&
        !same_pieces(same, spaced, fast, /*ranges=*/false)) {
      std::cerr << "case " << index << ": kind " << kind << " pieces resumed at " << resume
                << " differ from the spaced text's\n  " << describe(fast) << "\n";
      return false;
    }
  }
  put_u32(out, (identity ? 1u : 0u) | (same_length ? 2u : 0u) | (spaced_same ? 4u : 0u) | (resumed ? 8u : 0u));
  put_u32(out, static_cast<uint32_t>(fast.text.size()));
  out.append(fast.text);
  for (const auto& a : fast.align) {
    put_u32(out, a.first);
    put_u32(out, a.second);
  }
  return true;
}

bool run_pretokenizer(size_t index, const std::string& text, std::string& out) {
  Pieces fast, slow;
  crayon::pretokenize_bert(text, fast);
  crayon::reference::pretokenize_bert(text, slow);
  if (fast != slow) {
    std::cerr << "case " << index << ": pre-tokenizer fast and reference differ (" << fast.size() << " vs "
              << slow.size() << " pieces)\n";
    return false;
  }
  put_u32(out, static_cast<uint32_t>(fast.size()));
  for (const auto& p : fast) {
    put_u32(out, p.first);
    put_u32(out, p.second);
  }
  return true;
}

int run_cases(const char* in_path, const char* out_path) {
  Reader r{read_file(in_path)};
  std::string out;
  size_t index = 0;
  for (; !r.at_end(); ++index) {
    const uint32_t kind = r.u32();
    const std::string text = r.bytes();
    const bool ok = (kind & kPreTokenize) ? run_pretokenizer(index, text, out) : run_normalizer(index, kind, text, out);
    if (!ok) return 2;
  }
  std::ofstream f(out_path, std::ios::binary);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  std::cout << index << " cases\n";
  return f ? 0 : 1;
}

// Best of `reps` runs of f() over `bytes` bytes, in MB/s of CPU time (std::clock: a busy machine
// deschedules the process but does not slow its clock); `setup` runs off the clock.
template <class Setup, class F>
double best_mb_s(size_t bytes, int reps, Setup setup, F f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    setup();
    const std::clock_t t0 = std::clock();
    f();
    best = std::min(best, static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC);
  }
  return static_cast<double>(bytes) / 1e6 / std::max(best, 1e-6);
}

int run_bench(const char* path) {
  const std::string text = read_file(path);
  const BertNormalizerOptions bert_uncased{true, true, true, true};  // bert_base_uncased
  const BertNormalizerOptions bert_cased{true, true, false, false};  // bert_base_cased
  const int reps = 7;
  volatile size_t sink = 0;
  auto none = [] {};
  std::string same;
  Pieces pieces;
  pieces.reserve(text.size() / 2);
  std::printf("bytes %zu\n", text.size());
  // Two passes, printing the second: the first settles the allocator (glibc raises its mmap
  // threshold after the first large free; before that every big vector costs fresh page faults).
  for (int pass = 0; pass < 2; ++pass)
  for (const auto& [name, o] : {std::pair{"uncased", bert_uncased}, std::pair{"cased", bert_cased}}) {
    if (pass == 0) {
      NormalizedText u = NormalizedText::from_original(text);
      crayon::normalize_bert(u, o);
      sink = sink + u.text.size();
      continue;
    }
    std::string normalized;
    const bool fits = crayon::normalize_bert_same_length(text, o, normalized);
    std::printf("[%s] same_length applies: %d\n", name, fits ? 1 : 0);
    if (fits) {  // normalized text is its own normalization: the identity check scans all of it
      std::printf("[%s] is_identity (normalized text, full scan) %.0f MB/s, %d\n", name,
                  best_mb_s(normalized.size(), reps, none, [&] {
                    sink = sink + crayon::bert_is_identity(normalized, o); }),
                  crayon::bert_is_identity(normalized, o) ? 1 : 0);
    }
    std::printf("[%s] normalize_same_length %.0f MB/s\n", name, best_mb_s(text.size(), reps, none, [&] {
      sink = sink + crayon::normalize_bert_same_length(text, o, same); }));
    NormalizedText t;
    const NormalizedText base = NormalizedText::from_original(text);
    std::printf("[%s] normalize_bert (alignments) %.0f MB/s\n", name,
                best_mb_s(text.size(), reps, [&] { t = base; }, [&] { crayon::normalize_bert(t, o); }));
    std::printf("[%s] from_original + normalize_bert %.0f MB/s\n", name, best_mb_s(text.size(), reps, none, [&] {
      NormalizedText u = NormalizedText::from_original(text);
      crayon::normalize_bert(u, o);
      sink = sink + u.text.size(); }));
    std::printf("[%s] reference normalize_bert %.0f MB/s\n", name,
                best_mb_s(text.size(), 2, [&] { t = base; }, [&] { crayon::reference::normalize_bert(t, o); }));
    if (!fits) {
      NormalizedText u = base;
      crayon::normalize_bert(u, o);
      normalized = u.text;
    }
    const double pretokenize = best_mb_s(normalized.size(), reps, [&] { pieces.clear(); },
                                         [&] { crayon::pretokenize_bert(normalized, pieces); });
    std::printf("[%s] pretokenize (normalized text) %.0f MB/s, %zu pieces\n", name, pretokenize, pieces.size());
    std::printf("[%s] same_length + pretokenize %.0f MB/s\n", name,
                best_mb_s(text.size(), reps, [&] { pieces.clear(); }, [&] {
                  if (!crayon::normalize_bert_same_length(text, o, same)) {
                    NormalizedText u = NormalizedText::from_original(text);
                    crayon::normalize_bert(u, o);
                    same = u.text;
                  }
                  crayon::pretokenize_bert(same, pieces); }));
  }
  std::printf("reference pretokenize %.0f MB/s\n", best_mb_s(text.size(), 2, [&] { pieces.clear(); }, [&] {
    crayon::reference::pretokenize_bert(text, pieces); }));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::strcmp(argv[1], "--bench") == 0) return run_bench(argv[2]);
    if (argc == 3) return run_cases(argv[1], argv[2]);
    std::cerr << "usage: bert_driver CASES OUT | bert_driver --bench FILE\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "bert_driver: " << e.what() << "\n";
    return 1;
  }
}
