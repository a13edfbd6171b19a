// Command-line driver for native/text/precompiled.cc, used by tests/test_precompiled.py.
//
//   precompiled_driver CASES OUT            run each case's normalizer sequence, write text + alignments
//   precompiled_driver --bench TEXT BLOB    time is_identity / normalize / normalize_text on TEXT with the charsmap BLOB
//
// Every Precompiled step runs twice: through normalize() and through normalize_reference() (the
// pair list + transform_chars). Any difference between them, or an is_identity() that answers true
// for a text normalize() changes, prints the case and exits 2, so the Python side only compares
// the fast result with tokenizers.
//
// Binary formats, little-endian u32 throughout (the texts may hold NUL, newlines, anything):
//   CASES: n_blobs, n_blobs x { len, bytes },
//          then repeated { n_ops, n_ops x { kind, n_args, n_args x { len, bytes } }, len, text }
//   OUT:   repeated { len, text bytes, len x { start, end } }, or just 0xFFFFFFFF where a step
//          throws NormalizerPanic (where tokenizers panics), or 0xFFFFFFFE where a Precompiled
//          step's blob was rejected by the constructor (where tokenizers refuses the charsmap)
// kinds: 1 NFD, 2 NFKD, 3 NFC, 4 NFKC, 5 Lowercase, 6 Prepend(prefix), 8 Replace literal (pattern,
// content), 100 Precompiled (one arg: the blob's index as 4 bytes).
// stdout: "blob I: rejected: MESSAGE" for every rejected blob, then "N cases".
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "text/normalize.h"
#include "text/precompiled.h"
#include "driver_io.h"

namespace {

using driver_io::Reader;
using driver_io::read_file;
using driver_io::put_u32;

using crayon::NormalizedText;
using crayon::PrecompiledNormalizer;

constexpr uint32_t kPanicMarker = 0xFFFFFFFFu;
constexpr uint32_t kRejectedMarker = 0xFFFFFFFEu;
constexpr uint32_t kPrecompiled = 100;

struct Op {
  uint32_t kind;
  std::vector<std::string> args;
};

void apply_other(const Op& op, NormalizedText& t) {
  switch (op.kind) {
    case 1: crayon::normalize_nfd(t); break;
    case 2: crayon::normalize_nfkd(t); break;
    case 3: crayon::normalize_nfc(t); break;
    case 4: crayon::normalize_nfkc(t); break;
    case 5: crayon::normalize_lowercase(t); break;
    case 6: crayon::normalize_prepend(t, op.args.at(0)); break;
    case 8: crayon::normalize_replace_literal(t, op.args.at(0), op.args.at(1)); break;
    default: throw std::runtime_error("unknown op kind " + std::to_string(op.kind));
  }
}

std::string describe(const NormalizedText& t) {
  std::ostringstream o;
  for (unsigned char c : t.text) o << std::hex << static_cast<int>(c) << ' ';
  o << std::dec << "| ";
  for (const auto& a : t.align) o << a.first << ',' << a.second << ' ';
  return o.str();
}

enum class Outcome { kOk, kPanic, kRejected, kMismatch };

// One Precompiled step, fast and reference; kMismatch after printing what differs.
Outcome run_precompiled(const PrecompiledNormalizer& pc, NormalizedText& t, size_t index) {
  const NormalizedText before = t;
  NormalizedText slow = t;
  const bool claimed = pc.is_identity(t.text);
  // normalize_same_length on original text: where it answers, the reference's text and alignment.
  std::string same;
  const bool original = before.align == NormalizedText::from_original(before.text).align;
  const bool same_claimed = original && pc.normalize_same_length(before.text, same);
  // normalize_text on original text: the reference's text, and no answer where it panics.
  std::string alone;
  const bool text_claimed = original && pc.normalize_text(before.text, alone);
  int panics = 0;
  try {
    pc.normalize(t);
  } catch (const crayon::NormalizerPanic&) {
    panics |= 1;
  }
  try {
    pc.normalize_reference(slow);
  } catch (const crayon::NormalizerPanic&) {
    panics |= 2;
  }
  if (panics == 1 || panics == 2) {
    std::cerr << "case " << index << ": " << (panics == 1 ? "normalize" : "normalize_reference")
              << " panics, the other does not\n  " << describe(before) << "\n";
    return Outcome::kMismatch;
  }
  if (panics == 3) {
    if (same_claimed || text_claimed) {
      std::cerr << "case " << index << ": normalize_" << (same_claimed ? "same_length" : "text")
                << " answered but normalize panics\n";
      return Outcome::kMismatch;
    }
    if (claimed) {
      std::cerr << "case " << index << ": is_identity claimed identity but normalize panics\n";
      return Outcome::kMismatch;
    }
    return Outcome::kPanic;
  }
  if (t.text != slow.text || t.align != slow.align) {
    std::cerr << "case " << index << ": fast and reference differ\n  in   " << describe(before) << "\n  fast "
              << describe(t) << "\n  ref  " << describe(slow) << "\n";
    return Outcome::kMismatch;
  }
  // ... and its characters start where the original's do (HfEngine's implicit alignment finds
  // character bounds in the normalized text).
  bool same_bounds = same.size() == before.text.size();
  for (size_t i = 0; same_claimed && same_bounds && i < same.size(); ++i) {
    same_bounds = ((static_cast<uint8_t>(same[i]) & 0xC0) == 0x80) == ((static_cast<uint8_t>(before.text[i]) & 0xC0) == 0x80);
  }
  if (same_claimed && (slow.text != same || slow.align != before.align || !same_bounds)) {
    std::cerr << "case " << index << ": normalize_same_length differs from the reference\n  in   " << describe(before)
              << "\n  ref  " << describe(slow) << "\n";
    return Outcome::kMismatch;
  }
  if (text_claimed && alone != slow.text) {
    std::cerr << "case " << index << ": normalize_text differs from the reference\n  in   " << describe(before)
              << "\n  ref  " << describe(slow) << "\n";
    return Outcome::kMismatch;
  }
  if (claimed && (t.text != before.text || t.align != before.align)) {
    std::cerr << "case " << index << ": is_identity claimed identity but the text changed\n  "
              << describe(before) << "\n  " << describe(t) << "\n";
    return Outcome::kMismatch;
  }
  if (t.align.size() != t.text.size()) {
    std::cerr << "case " << index << ": alignment count differs from byte count\n";
    return Outcome::kMismatch;
  }
  return Outcome::kOk;
}

int run_cases(const char* in_path, const char* out_path) {
  Reader r{read_file(in_path)};
  std::vector<std::unique_ptr<PrecompiledNormalizer>> blobs(r.u32());
  for (size_t b = 0; b < blobs.size(); ++b) {
    std::string blob = r.bytes();
    try {
      blobs[b] = std::make_unique<PrecompiledNormalizer>(std::move(blob));
    } catch (const std::invalid_argument& e) {
      std::cout << "blob " << b << ": rejected: " << e.what() << "\n";
    }
  }
  std::string out;
  size_t index = 0;
  for (; !r.at_end(); ++index) {
    std::vector<Op> ops(r.u32());
    for (Op& op : ops) {
      op.kind = r.u32();
      op.args.resize(r.u32());
      for (std::string& a : op.args) a = r.bytes();
    }
    const std::string text = r.bytes();
    NormalizedText t = NormalizedText::from_original(text);
    Outcome outcome = Outcome::kOk;
    for (const Op& op : ops) {
      if (op.kind != kPrecompiled) {
        try {
          apply_other(op, t);
        } catch (const crayon::NormalizerPanic&) {
          outcome = Outcome::kPanic;
        }
      } else {
        uint32_t b;
        std::memcpy(&b, op.args.at(0).data(), 4);
        if (!blobs.at(b)) {
          outcome = Outcome::kRejected;
        } else {
          outcome = run_precompiled(*blobs[b], t, index);
          if (outcome == Outcome::kMismatch) return 2;
        }
      }
      if (outcome != Outcome::kOk) break;
    }
    if (outcome != Outcome::kOk) {
      const uint32_t marker = outcome == Outcome::kPanic ? kPanicMarker : kRejectedMarker;
      out.append(reinterpret_cast<const char*>(&marker), 4);
      continue;
    }
    const uint32_t n = static_cast<uint32_t>(t.text.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out.append(t.text);
    for (const auto& a : t.align) {
      out.append(reinterpret_cast<const char*>(&a.first), 4);
      out.append(reinterpret_cast<const char*>(&a.second), 4);
    }
  }
  std::ofstream f(out_path, std::ios::binary);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  std::cout << index << " cases\n";
  return f ? 0 : 1;
}

// Best of `reps` timings of f(), in MB/s of `bytes`; `prepare` runs outside the clock.
template <class Prepare, class F>
double best_mb_s(size_t bytes, int reps, Prepare prepare, F f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    prepare();
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(bytes) / 1e6 / best;
}

int run_bench(const char* text_path, const char* blob_path) {
  const std::string text = read_file(text_path);
  const std::string blob = read_file(blob_path);
  const auto t0 = std::chrono::steady_clock::now();
  const PrecompiledNormalizer pc(blob);
  const double build_ms = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() * 1e3;
  const NormalizedText base = NormalizedText::from_original(text);
  NormalizedText t;
  volatile size_t sink = 0;
  const int reps = 5;
  auto nothing = [] {};
  auto fresh = [&] { t = base; };
  // is_identity line by line (a document per line, the newline left out): how a caller skips work.
  std::vector<std::string_view> lines;
  for (size_t a = 0; a < text.size();) {
    size_t b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    lines.emplace_back(text.data() + a, b - a);
    a = b + 1;
  }
  size_t identical = 0;
  for (auto line : lines) identical += pc.is_identity(line);
  std::printf("bytes %zu\n", text.size());
  std::printf("construct %.2f ms\n", build_ms);
  std::printf("lines %zu, unchanged %zu\n", lines.size(), identical);
  std::printf("is_identity_per_line %.1f MB/s\n", best_mb_s(text.size(), reps, nothing, [&] {
    for (auto line : lines) sink = sink + pc.is_identity(line); }));
  std::printf("from_original %.1f MB/s\n", best_mb_s(text.size(), reps, nothing, [&] {
    sink = sink + NormalizedText::from_original(text).align.size(); }));
  std::printf("normalize %.1f MB/s\n", best_mb_s(text.size(), reps, fresh, [&] {
    pc.normalize(t);
    sink = sink + t.text.size(); }));
  std::string text_only;
  std::printf("normalize_text %.1f MB/s\n", best_mb_s(text.size(), reps, nothing, [&] {
    pc.normalize_text(text, text_only);
    sink = sink + text_only.size(); }));
  std::printf("normalize_reference %.1f MB/s\n", best_mb_s(text.size(), reps, fresh, [&] {
    pc.normalize_reference(t);
    sink = sink + t.text.size(); }));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::strcmp(argv[1], "--bench") == 0) return run_bench(argv[2], argv[3]);
    if (argc == 3) return run_cases(argv[1], argv[2]);
    std::cerr << "usage: precompiled_driver CASES OUT | precompiled_driver --bench TEXT BLOB\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "precompiled_driver: " << e.what() << "\n";
    return 1;
  }
}
