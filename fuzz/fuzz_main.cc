// A main() for fuzz targets when libFuzzer is not available (gcc, or no clang runtime): replays
// every file given, then mutates them for a while with a fixed seed.
//
//   fuzz_cartridge [-runs=N] [-seed=S] [-max_total_time=SECONDS] [-artifact=PATH] FILE_OR_DIR...
//
// The mutations know the cartridge layout a little (the 64-byte header, 32-byte section entries
// with 8-byte offsets and sizes): besides bit flips, truncations and splices they write boundary
// values (0, 1, the file size and its neighbours, 2^31, 2^32 - 1, 2^63, ...) into aligned 4- and
// 8-byte fields, which is how a crafted file lies about sizes and offsets. Without coverage
// feedback this is a plain mutation fuzzer; with clang, build the same target with
// -fsanitize=fuzzer instead for a guided one (fuzz/README.md).
//
// Before each mutated input runs, it is written to the artifact path, so whatever kills the
// process leaves the input behind; the file is removed when the run ends normally.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <iterator>
#include <random>
#include <string>
#include <sys/stat.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool read_file(const std::string& path, std::string& out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  char buf[1 << 16];
  size_t n;
  out.clear();
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return true;
}

void collect(const std::string& path, std::vector<std::string>& files) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "fuzz: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    files.push_back(path);
    return;
  }
  DIR* d = opendir(path.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] != '.') collect(path + "/" + e->d_name, files);
  }
  if (d) closedir(d);
}

void run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

template <class T>
void put(std::string& s, size_t at, T v) {
  if (at + sizeof v <= s.size()) std::memcpy(&s[at], &v, sizeof v);
}

std::string mutate(const std::vector<std::string>& seeds, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  std::string s = seeds[pick(seeds.size())];
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < steps && !s.empty(); ++k) {
    const uint64_t n = s.size();
    // Half the field writes go to the header and the section table, where the layout lives.
    const size_t table = std::min<size_t>(n, 64 + 32 * 24);
    const size_t where = rng() % 2 ? pick(table) : pick(n);
    const uint64_t boundary[] = {0, 1, 2, 63, 64, n - 1, n, n + 1, n / 2, 0x7FFFFFFFu, 0x80000000u,
                                 0xFFFFFFFFu, 0x100000000ull, 1ull << 63, ~0ull, rng() % 4096};
    switch (rng() % 8) {
      case 0:
        s[pick(n)] ^= static_cast<char>(1u << (rng() % 8));
        break;
      case 1:
        put<uint32_t>(s, where & ~size_t{3}, static_cast<uint32_t>(boundary[pick(std::size(boundary))]));
        break;
      case 2:
        put<uint64_t>(s, where & ~size_t{7}, boundary[pick(std::size(boundary))]);
        break;
      case 3:
        s.resize(pick(n));
        break;
      case 4: {  // copy a chunk over another place
        const size_t from = pick(n), to = pick(n), len = std::min<size_t>({1 + pick(256), n - from, n - to});
        std::memmove(&s[to], &s[from], len);
        break;
      }
      case 5: {  // splice: this seed's head, another's tail
        const std::string& other = seeds[pick(seeds.size())];
        const size_t cut = pick(std::min<size_t>(n, other.size()) + 1);
        s = s.substr(0, cut) + other.substr(std::min(cut, other.size()));
        break;
      }
      case 6:
        s[pick(n)] = static_cast<char>("\x00\x01\x7f\x80\xff"[rng() % 5]);
        break;
      default:  // nudge a 4-byte field by a little
        if (n >= 4) {
          const size_t at = where & ~size_t{3};
          if (at + 4 <= n) {
            uint32_t v;
            std::memcpy(&v, &s[at], 4);
            v += static_cast<uint32_t>(static_cast<int>(rng() % 17) - 8);
            std::memcpy(&s[at], &v, 4);
          }
        }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  long long runs = 0;
  uint64_t seed = 1;
  double max_seconds = 0;
  std::string artifact = "fuzz-crash-candidate";
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-runs=", 0) == 0) runs = std::atoll(a.c_str() + 6);
    else if (a.rfind("-seed=", 0) == 0) seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    else if (a.rfind("-max_total_time=", 0) == 0) max_seconds = std::atof(a.c_str() + 16);
    else if (a.rfind("-artifact=", 0) == 0) artifact = a.substr(10);
    else if (!a.empty() && a[0] == '-') std::fprintf(stderr, "fuzz: ignoring %s\n", a.c_str());
    else collect(a, files);
  }
  std::vector<std::string> seeds;
  for (const std::string& f : files) {
    std::string data;
    if (!read_file(f, data)) {
      std::fprintf(stderr, "fuzz: cannot read %s\n", f.c_str());
      return 2;
    }
    std::fprintf(stderr, "fuzz: replay %s (%zu bytes)\n", f.c_str(), data.size());
    run(data);
    seeds.push_back(std::move(data));
  }
  if (seeds.empty()) seeds.emplace_back();
  std::mt19937_64 rng(seed);
  const auto start = std::chrono::steady_clock::now();
  long long done = 0;
  for (; runs == 0 ? max_seconds > 0 : done < runs; ++done) {
    if (max_seconds > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > max_seconds) break;
    const std::string input = mutate(seeds, rng);
    if (FILE* f = std::fopen(artifact.c_str(), "wb")) {
      std::fwrite(input.data(), 1, input.size(), f);
      std::fclose(f);
    }
    run(input);
  }
  std::remove(artifact.c_str());
  std::fprintf(stderr, "fuzz: %zu files replayed, %lld mutated inputs (seed %llu), no crash\n", files.size(), done,
               static_cast<unsigned long long>(seed));
  return 0;
}
