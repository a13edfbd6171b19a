// The tiktoken engine alone, no Python: MiB/s of encode_ordinary over ~16 KiB documents of a corpus,
// each document encoded once (new text, as the peer comparison measures), then the same documents
// again (warm per-thread caches). Also the place to point perf at:
//
//   g++ -O2 -g -std=c++17 -Inative benchmarks/native/engine_bench.cc native/*/*.cc -lpthread \
//       $(ls native/*/*.cc | grep -v native/python/) -o /tmp/engine_bench   (see benchmarks/native/build.sh)
//   taskset -c 1 /tmp/engine_bench CARTRIDGE.dat CORPUS.txt [passes]
//
// POLLUTE=N (environment): before every 5th document, N random read-modify-writes in a 32 MiB
// buffer, not timed. It evicts the engine's tables from the caches the way the peer benchmark does
// (libraries take turns in one process), so the engine is measured cold as well as warm. 300000
// reproduces the peer benchmark's slowdown on this machine class.
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/cartridge.h"
#include "engines/tiktoken_engine.h"

// CPU time of this thread: other processes on a busy machine do not count against us.
static double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CARTRIDGE.dat CORPUS.txt [passes]\n", argv[0]);
    return 2;
  }
  const int passes = argc > 3 ? std::atoi(argv[3]) : 1;
  crayon::TiktokenEngine engine(crayon::Cartridge::open(argv[1], false));
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string_view> docs;
  for (size_t i = 0; i < text.size();) {
    size_t j = std::min(text.size(), i + 16384);
    const size_t nl = text.rfind('\n', j - 1);
    if (j < text.size() && nl != std::string::npos && nl > i + 8192) j = nl + 1;
    // Cut on a character boundary.
    while (j < text.size() && (static_cast<uint8_t>(text[j]) & 0xC0) == 0x80) ++j;
    docs.emplace_back(text.data() + i, j - i);
    i = j;
  }
  const char* pollute_env = std::getenv("POLLUTE");
  const size_t pollute = pollute_env != nullptr ? std::strtoull(pollute_env, nullptr, 10) : 0;
  std::vector<uint64_t> junk(pollute != 0 ? (size_t{32} << 20) / 8 : 1, 1);
  std::mt19937_64 rng(1);
  uint64_t sink = 0;
  std::vector<uint32_t> out;
  for (int p = 0; p < passes; ++p) {
    size_t tokens = 0;
    double untimed = 0;
    size_t doc = 0;
    const double t0 = cpu_seconds();
    for (std::string_view d : docs) {
      if (pollute != 0 && doc++ % 5 == 0) {
        const double a = cpu_seconds();
        for (size_t r = 0; r < pollute; ++r) sink += junk[rng() % junk.size()]++;
        untimed += cpu_seconds() - a;
      }
      out.clear();
      engine.encode_ordinary(d, out);
      tokens += out.size();
    }
    const double s = cpu_seconds() - t0 - untimed;
    std::printf("pass %d: %.1f MiB/s, %.1f ns/token, %zu tokens\n", p, text.size() / s / (1 << 20), s * 1e9 / tokens, tokens);
  }
  return sink == 42 ? 1 : 0;  // keeps the pollution loop from being optimized away
}
