// Command-line driver for native/text/normalize.cc, used by tests/test_normalize.py.
//
//   normalize_driver CASES OUT      apply each case's normalizer sequence, write text + alignments
//   normalize_driver --bench FILE   time the hot paths on FILE's text (MB/s on stdout)
//
// Every case runs twice: through the fast functions and through the reference twins (one
// transform over the whole text, no quick checks). Any difference, or an *_is_identity() that
// answers true for a text the normalizer changes, prints the case and exits 2, so the Python
// side only has to compare the fast result with tokenizers.
//
// Binary formats, little-endian u32 throughout (the texts may hold NUL, newlines, anything):
//   CASES: repeated { n_ops, n_ops x { kind, n_args, n_args x { len, bytes } }, len, text }
//   OUT:   repeated { len, text bytes, len x { start, end } }, or just 0xFFFFFFFF where the
//          normalizers throw NormalizerPanic (where tokenizers panics)
// kinds: 1 NFD, 2 NFKD, 3 NFC, 4 NFKC, 5 Lowercase, 6 Prepend(prefix), 7 Strip("LR" as two 0/1
// bytes), 8 Replace literal (pattern, content), 9 Replace ranges (u32 start/end pairs, content).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "text/normalize.h"
#include "driver_io.h"

namespace {

using driver_io::Reader;
using driver_io::read_file;
using driver_io::put_u32;

using crayon::NormalizedText;

struct Op {
  uint32_t kind;
  std::vector<std::string> args;
};

bool identity_claimed(uint32_t kind, const std::string& text) {
  switch (kind) {
    case 1: return crayon::nfd_is_identity(text);
    case 2: return crayon::nfkd_is_identity(text);
    case 3: return crayon::nfc_is_identity(text);
    case 4: return crayon::nfkc_is_identity(text);
    case 5: return crayon::lowercase_is_identity(text);
    default: return false;
  }
}

void apply(const Op& op, NormalizedText& t, bool reference) {
  switch (op.kind) {
    case 1: reference ? crayon::reference::normalize_nfd(t) : crayon::normalize_nfd(t); break;
    case 2: reference ? crayon::reference::normalize_nfkd(t) : crayon::normalize_nfkd(t); break;
    case 3: reference ? crayon::reference::normalize_nfc(t) : crayon::normalize_nfc(t); break;
    case 4: reference ? crayon::reference::normalize_nfkc(t) : crayon::normalize_nfkc(t); break;
    case 5: reference ? crayon::reference::normalize_lowercase(t) : crayon::normalize_lowercase(t); break;
    case 6: crayon::normalize_prepend(t, op.args.at(0)); break;
    case 7: crayon::normalize_strip(t, op.args.at(0).at(0) != 0, op.args.at(0).at(1) != 0); break;
    case 8: crayon::normalize_replace_literal(t, op.args.at(0), op.args.at(1)); break;
    case 9: {
      const std::string& raw = op.args.at(0);
      std::vector<std::pair<uint32_t, uint32_t>> m(raw.size() / 8);
      if (!m.empty()) std::memcpy(m.data(), raw.data(), m.size() * 8);
      crayon::normalize_replace_ranges(t, m, op.args.at(1));
      break;
    }
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

int run_cases(const char* in_path, const char* out_path) {
  Reader r{read_file(in_path)};
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
    NormalizedText fast = NormalizedText::from_original(text);
    NormalizedText slow = fast;
    bool panicked = false;
    for (const Op& op : ops) {
      const NormalizedText before = fast;
      const bool claimed = identity_claimed(op.kind, fast.text);
      int panics = 0;
      try {
        apply(op, fast, false);
      } catch (const crayon::NormalizerPanic&) {
        ++panics;
      }
      try {
        apply(op, slow, true);
      } catch (const crayon::NormalizerPanic&) {
        ++panics;
      }
      if (panics == 1) {
        std::cerr << "case " << index << ": op " << op.kind << " panics on one path only\n";
        return 2;
      }
      if (panics == 2) {
        panicked = true;
        break;
      }
      if (claimed && (fast.text != before.text || fast.align != before.align)) {
        std::cerr << "case " << index << ": op " << op.kind << " claimed identity but changed\n  "
                  << describe(before) << "\n  " << describe(fast) << "\n";
        return 2;
      }
      if (fast.text != slow.text || fast.align != slow.align) {
        std::cerr << "case " << index << ": op " << op.kind << " fast and reference differ\n  fast "
                  << describe(fast) << "\n  ref  " << describe(slow) << "\n";
        return 2;
      }
      if (fast.align.size() != fast.text.size()) {
        std::cerr << "case " << index << ": alignment count differs from byte count\n";
        return 2;
      }
    }
    if (panicked) {  // tokenizers would panic here too: marked, no text
      const uint32_t marker = 0xFFFFFFFFu;
      out.append(reinterpret_cast<const char*>(&marker), 4);
      continue;
    }
    const uint32_t n = static_cast<uint32_t>(fast.text.size());
    out.append(reinterpret_cast<const char*>(&n), 4);
    out.append(fast.text);
    for (const auto& a : fast.align) {
      out.append(reinterpret_cast<const char*>(&a.first), 4);
      out.append(reinterpret_cast<const char*>(&a.second), 4);
    }
  }
  std::ofstream f(out_path, std::ios::binary);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  std::cout << index << " cases\n";
  return f ? 0 : 1;
}

template <class F>
double best_mb_s(const std::string& text, F f, int reps) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return static_cast<double>(text.size()) / 1e6 / best;
}

int run_bench(const char* path) {
  const std::string text = read_file(path);
  const NormalizedText base = NormalizedText::from_original(text);
  const int reps = 5;
  volatile size_t sink = 0;
  std::printf("bytes %zu\n", text.size());
  std::printf("nfc_is_identity %d\n", crayon::nfc_is_identity(text) ? 1 : 0);
  std::printf("from_original %.1f MB/s\n", best_mb_s(text, [&] {
    sink = sink + NormalizedText::from_original(text).align.size(); }, reps));
  std::printf("nfc_is_identity_scan %.1f MB/s\n", best_mb_s(text, [&] {
    sink = sink + crayon::nfc_is_identity(text); }, reps));
  struct Named { const char* name; void (*fn)(NormalizedText&); };
  const Named fns[] = {
      {"nfc", crayon::normalize_nfc}, {"nfd", crayon::normalize_nfd},
      {"nfkc", crayon::normalize_nfkc}, {"nfkd", crayon::normalize_nfkd},
      {"lowercase", crayon::normalize_lowercase},
      {"reference_nfc", crayon::reference::normalize_nfc},
  };
  for (const Named& n : fns) {
    // Time the normalizer alone: the copy it works on is made outside the clock.
    double best = 1e30;
    for (int i = 0; i < reps; ++i) {
      NormalizedText t = base;
      const auto t0 = std::chrono::steady_clock::now();
      n.fn(t);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::min(best, s);
      sink = sink + t.text.size();
    }
    std::printf("%s %.1f MB/s\n", n.name, static_cast<double>(text.size()) / 1e6 / best);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::strcmp(argv[1], "--bench") == 0) return run_bench(argv[2]);
    if (argc == 3) return run_cases(argv[1], argv[2]);
    std::cerr << "usage: normalize_driver CASES OUT | normalize_driver --bench FILE\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "normalize_driver: " << e.what() << "\n";
    return 1;
  }
}
