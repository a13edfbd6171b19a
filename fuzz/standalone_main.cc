// A main() for the fuzz targets where libFuzzer is not available (gcc): replays corpus files, and
// runs a seeded mutation loop over them. Link it with ONE fuzz_*.cc and the engine sources, with
// -fsanitize=address,undefined (see fuzz/README.md).
//
//   driver FILE_OR_DIR...                 replay: run every file once (regression corpora)
//   driver --seeds DIR                    write the synthetic seed cartridges into DIR
//   driver --mutate N --seed S --seconds T [--crashes DIR] FILE_OR_DIR...
//                                         N mutation rounds (or T seconds, whichever first) over
//                                         the given inputs; before each input runs it is written
//                                         to DIR/current so that a crash leaves the reproducer.
//
// Mutations (chosen at random, 1-4 per round): bit flip, byte set, truncation, extension, block
// duplication, splice from another input, and "integer boundary" writes of 0, 1, 0x7F..,
// 0xFFFFFFFF, 0x80000000, size-1, size+1 at an aligned offset in the first 4 KiB (headers, section
// tables and section headers live there). For cartridge inputs the checksum is then recomputed so
// that the mutation reaches the section validators (the target also loads without verifying it).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "cartridge.h"
#include "fuzz_seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void collect(const std::string& path, std::vector<std::string>& files) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    files.push_back(path);
    return;
  }
  DIR* d = opendir(path.c_str());
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) collect(path + "/" + n, files);
}

void run(const std::string& bytes) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

void put_u32(std::string& s, size_t at, uint32_t v) {
  if (at + 4 <= s.size()) std::memcpy(&s[at], &v, 4);
}

void mutate(std::string& s, const std::vector<std::string>& pool, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 8) {
      case 0:
        if (!s.empty()) s[pick(s.size())] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
        break;
      case 2:
        s.resize(pick(s.size() + 1));
        break;
      case 3:
        s.append(pick(65), static_cast<char>(rng()));
        break;
      case 4: {  // duplicate a block somewhere else
        if (s.size() < 2) break;
        size_t a = pick(s.size()), n = 1 + pick(std::min<size_t>(64, s.size() - a));
        std::string blk = s.substr(a, n);
        size_t b = pick(s.size() - n + 1);
        s.replace(b, n, blk);
        break;
      }
      case 5: {  // splice from another input at the same offset
        const std::string& o = pool[pick(pool.size())];
        if (o.empty() || s.empty()) break;
        size_t a = pick(std::min(s.size(), o.size())), n = 1 + pick(256);
        n = std::min({n, s.size() - a, o.size() - a});
        s.replace(a, n, o.substr(a, n));
        break;
      }
      default: {  // integer boundary value in a header / table / section header field
        const uint32_t vals[] = {0, 1, 2, 63, 64, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x10000, 0x7FFFFFFF,
                                 0x80000000u, 0xFFFFFFFFu, 0xFFFFFFFEu, static_cast<uint32_t>(s.size()),
                                 static_cast<uint32_t>(s.size() - 1), static_cast<uint32_t>(s.size() + 1)};
        size_t limit = std::min<size_t>(s.size(), 4096);
        if (limit < 4) break;
        size_t at = pick(limit / 4) * 4;
        // Section payloads start 64-aligned; aim there half the time (their counts/offsets).
        if (rng() & 1) at = pick(s.size() / 64 + 1) * 64 + pick(4) * 4;
        put_u32(s, at, vals[pick(sizeof vals / sizeof vals[0])]);
        if (rng() % 4 == 0 && at + 8 <= s.size()) put_u32(s, at + 4, 0);  // zero the high half
      }
    }
  }
  // Keep the checksum valid for cartridge-looking inputs: the checksum is not a defence.
  if (s.size() >= crayon::kHeaderSize && std::memcmp(s.data(), crayon::kCartridgeMagic, 8) == 0 &&
      rng() % 8 != 0) {
    uint64_t h = crayon::cartridge_checksum(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    std::memcpy(&s[56], &h, 8);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  long long n_mutations = 0;
  uint64_t seed = 1;
  double seconds = 0;
  std::string crashes, seeds_dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mutate" && i + 1 < argc) n_mutations = std::atoll(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--crashes" && i + 1 < argc) crashes = argv[++i];
    else if (a == "--seeds" && i + 1 < argc) seeds_dir = argv[++i];
    else collect(a, inputs);
  }
  if (!seeds_dir.empty()) {
    mkdir(seeds_dir.c_str(), 0755);
    int k = 0;
    for (const std::string& img : crayon::fuzz_seeds::tiktoken_images())
      write_file(seeds_dir + "/tiktoken_" + std::to_string(k++) + ".dat", img);
    write_file(seeds_dir + "/hf_bpe_bytes.dat", crayon::fuzz_seeds::hf_image());
    std::printf("wrote %d seeds to %s\n", k + 1, seeds_dir.c_str());
    return 0;
  }
  std::vector<std::string> pool;
  for (const std::string& f : inputs) {
    pool.push_back(read_file(f));
    run(pool.back());
  }
  std::printf("replayed %zu inputs\n", pool.size());
  if (n_mutations <= 0) return 0;
  if (pool.empty()) {
    for (const std::string& img : crayon::fuzz_seeds::tiktoken_images()) pool.push_back(img);
    pool.push_back(crayon::fuzz_seeds::hf_image());
  }
  std::mt19937_64 rng(seed);
  auto t0 = std::chrono::steady_clock::now();
  long long i = 0;
  for (; i < n_mutations; ++i) {
    if (seconds > 0 && (i & 15) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds) break;
    std::string s = pool[rng() % pool.size()];
    mutate(s, pool, rng);
    if (!crashes.empty()) write_file(crashes + "/current", s);
    run(s);
  }
  std::printf("ran %lld mutations (seed %llu)\n", i, static_cast<unsigned long long>(seed));
  return 0;
}
