// Command-line driver for native/models/wordpiece.cc, unigram.cc and wordlevel.cc, used by
// tests/test_hf_models_native.py.
//
//   model_driver VOCAB PIECES OUT          encode every piece, write ids + offsets
//   model_driver --bench VOCAB PIECES [PATH]  time encode_word and its twins over all pieces (MB/s
//                                          on stdout); PATH picks one ("none" times only loading)
//   model_driver --damage VOCAB PIECES N   encode every piece over N randomly damaged tries
//                                          (for the sanitizer build: wrong ids, never a bad read)
//
// Every piece is encoded by the fast path (twice, so the second call meets the word cache), by the
// uncached path where there is one, and by the reference twin. Any difference, or an error on one
// path only, prints the piece and exits 2, so the Python side only compares with tokenizers.
//
// Binary formats, little-endian; bytes = { u32 len, len bytes }:
//   VOCAB:  u32 kind, u32 n_ids, then by kind
//             1 WordPiece: u32 unk_id, u32 max_input_chars_per_word, bytes prefix
//             2 Unigram:   i32 unk_id (-1: none), u32 byte_fallback, n_ids x f64 score
//             3 WordLevel: u32 unk_id
//           then u32 n_keys, n_keys x { bytes key, u32 value }   (the trie; values may be >= n_ids)
//   PIECES: repeated bytes
//   OUT:    per piece u32 count, count x { u32 id, u32 start, u32 end }; or 0xFFFFFFFF where the
//           model reports tokenizers' MissingUnkId error
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/double_array.h"
#include "models/hf_model.h"
#include "models/unigram.h"
#include "models/wordlevel.h"
#include "models/wordpiece.h"
#include "driver_io.h"

namespace {

using driver_io::Reader;
using driver_io::read_file;
using driver_io::put_u32;

using crayon::HfToken;

std::vector<std::string> read_pieces(const char* path) {
  Reader r{read_file(path)};
  std::vector<std::string> pieces;
  while (!r.at_end()) pieces.push_back(r.bytes());
  return pieces;
}

// A model and the tables it borrows.
struct Loaded {
  uint32_t kind = 0;
  uint32_t n_ids = 0;
  crayon::DoubleArrayData trie;
  std::vector<double> scores;
  crayon::WordPieceOptions wordpiece;
  crayon::UnigramOptions unigram;
  uint32_t unk_id = 0;  // WordLevel

  std::unique_ptr<crayon::HfModel> make(crayon::DoubleArrayView view) const {
    switch (kind) {
      case 1: return std::make_unique<crayon::WordPieceModel>(view, n_ids, wordpiece);
      case 2: {
        auto m = std::make_unique<crayon::UnigramModel>(view, scores.data(), n_ids, unigram);
        m->prepare();  // what HfEngine::ready() does before the first encode
        return m;
      }
      case 3: return std::make_unique<crayon::WordLevelModel>(view, n_ids, unk_id);
      default: throw std::runtime_error("unknown model kind " + std::to_string(kind));
    }
  }
};

Loaded load_vocab(const char* path) {
  Reader r{read_file(path)};
  Loaded m;
  m.kind = r.u32();
  m.n_ids = r.u32();
  if (m.kind == 1) {
    m.wordpiece.unk_id = r.u32();
    m.wordpiece.max_input_chars_per_word = r.u32();
    m.wordpiece.prefix = r.bytes();
  } else if (m.kind == 2) {
    m.unigram.unk_id = static_cast<int32_t>(r.u32());
    m.unigram.byte_fallback = r.u32() != 0;
    m.scores.resize(m.n_ids);
    for (double& s : m.scores) s = r.f64();
  } else if (m.kind == 3) {
    m.unk_id = r.u32();
  }
  std::vector<std::string> keys(r.u32());
  std::vector<std::pair<std::string_view, int32_t>> entries;
  entries.reserve(keys.size());
  for (std::string& k : keys) {
    k = r.bytes();
    entries.emplace_back(k, static_cast<int32_t>(r.u32()));
  }
  m.trie = crayon::build_double_array(entries);
  return m;
}

// The paths to compare: [0] the fast one (the second call meets the word cache), then the twins.
std::vector<std::vector<HfToken>> encode_all_paths(const crayon::HfModel& model, const std::string& piece,
                                                   bool* error) {
  const auto* p = reinterpret_cast<const uint8_t*>(piece.data());
  const size_t n = piece.size();
  std::vector<std::vector<HfToken>> results;
  int errors = 0, paths = 0;
  auto run = [&](auto&& f) {
    ++paths;
    std::vector<HfToken> out;
    try {
      f(out);
    } catch (const crayon::UnigramMissingUnk&) {
      ++errors;
      out.clear();
    }
    results.push_back(std::move(out));
  };
  run([&](std::vector<HfToken>& out) { model.encode_word(p, n, out); });
  run([&](std::vector<HfToken>& out) { model.encode_word(p, n, out); });
  if (const auto* wp = dynamic_cast<const crayon::WordPieceModel*>(&model)) {
    run([&](std::vector<HfToken>& out) { wp->encode_word_reference(p, n, out); });
  } else if (const auto* ug = dynamic_cast<const crayon::UnigramModel*>(&model)) {
    run([&](std::vector<HfToken>& out) { ug->encode_word_uncached(p, n, out); });
    run([&](std::vector<HfToken>& out) { ug->encode_word_reference(p, n, out); });
  }
  if (errors != 0 && errors != paths) throw std::logic_error("an error on some paths only");
  *error = errors != 0;
  return results;
}

bool same(const std::vector<HfToken>& a, const std::vector<HfToken>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].start != b[i].start || a[i].end != b[i].end) return false;
  }
  return true;
}

std::string describe(const std::vector<HfToken>& t) {
  std::ostringstream o;
  for (const HfToken& x : t) o << x.id << '(' << x.start << ',' << x.end << ") ";
  return o.str();
}

std::string hex(const std::string& s) {
  std::ostringstream o;
  for (unsigned char c : s) o << std::hex << static_cast<int>(c) << ' ';
  return o.str();
}

int run_cases(const char* vocab_path, const char* pieces_path, const char* out_path) {
  const Loaded loaded = load_vocab(vocab_path);
  const auto model = loaded.make(crayon::DoubleArrayView(loaded.trie));
  const std::vector<std::string> pieces = read_pieces(pieces_path);
  std::string out;
  auto put = [&out](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  for (size_t index = 0; index < pieces.size(); ++index) {
    bool error = false;
    std::vector<std::vector<HfToken>> results;
    try {
      results = encode_all_paths(*model, pieces[index], &error);
    } catch (const std::logic_error& e) {
      std::cerr << "piece " << index << " [" << hex(pieces[index]) << "]: " << e.what() << "\n";
      return 2;
    }
    for (size_t k = 1; k < results.size(); ++k) {
      if (!same(results[0], results[k])) {
        std::cerr << "piece " << index << " [" << hex(pieces[index]) << "]: path " << k
                  << " differs\n  fast " << describe(results[0]) << "\n  twin " << describe(results[k]) << "\n";
        return 2;
      }
    }
    if (error) {
      put(0xFFFFFFFFu);
      continue;
    }
    put(static_cast<uint32_t>(results[0].size()));
    for (const HfToken& t : results[0]) {
      if (t.id >= model->n_ids() || t.start > t.end || t.end > pieces[index].size()) {
        std::cerr << "piece " << index << ": token out of range " << describe({t}) << "\n";
        return 2;
      }
      put(t.id);
      put(t.start);
      put(t.end);
    }
  }
  std::ofstream f(out_path, std::ios::binary);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  std::cout << pieces.size() << " pieces\n";
  return f ? 0 : 1;
}

// Damaged tables: random units and values, random trie values out of range. Each model must
// still only read in range (checked by the sanitizer build) and only give ids < n_ids.
int run_damage(const char* vocab_path, const char* pieces_path, int rounds) {
  Loaded loaded = load_vocab(vocab_path);
  const std::vector<std::string> pieces = read_pieces(pieces_path);
  std::mt19937_64 rng(12345);
  size_t tokens = 0;
  for (int round = 0; round < rounds; ++round) {
    crayon::DoubleArrayData d = loaded.trie;
    const size_t size = d.units.size();
    const size_t hits = 1 + rng() % std::max<size_t>(1, size / 16);
    for (size_t i = 0; i < hits; ++i) {
      const size_t at = rng() % size;
      switch (rng() % 4) {
        case 0: d.units[at].base = static_cast<int32_t>(rng()); break;
        case 1: d.units[at].check = static_cast<int32_t>(rng() % (size + 2)) - 1; break;
        case 2: d.value[at] = static_cast<int32_t>(rng()); break;
        default: d.value[at] = static_cast<int32_t>(loaded.n_ids + rng() % 4); break;
      }
    }
    const auto model = loaded.make(crayon::DoubleArrayView(d));
    for (const std::string& piece : pieces) {
      bool error = false;
      for (const auto& r : encode_all_paths(*model, piece, &error)) {
        for (const HfToken& t : r) {
          if (t.id >= model->n_ids() || t.start > t.end || t.end > piece.size()) {
            std::cerr << "damaged round " << round << ": token out of range " << describe({t}) << "\n";
            return 2;
          }
        }
        tokens += r.size();
      }
    }
  }
  std::cout << rounds << " rounds, " << tokens << " tokens\n";
  return 0;
}

int run_bench(const char* vocab_path, const char* pieces_path, const std::string& only) {
  const Loaded loaded = load_vocab(vocab_path);
  const auto model = loaded.make(crayon::DoubleArrayView(loaded.trie));
  const std::vector<std::string> pieces = read_pieces(pieces_path);
  size_t bytes = 0;
  for (const std::string& p : pieces) bytes += p.size();
  std::printf("pieces %zu bytes %zu\n", pieces.size(), bytes);
  std::vector<HfToken> out;
  out.reserve(1 << 16);
  auto time = [&](const char* name, auto&& encode) {
    if (!only.empty() && only != name) return;
    double best = 1e30;
    size_t tokens = 0;
    for (int rep = 0; rep < 7; ++rep) {
      tokens = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (const std::string& p : pieces) {
        out.clear();
        encode(reinterpret_cast<const uint8_t*>(p.data()), p.size(), out);
        tokens += out.size();
      }
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%s %.1f MB/s %.1f Mpieces/s (%zu tokens)\n", name, static_cast<double>(bytes) / 1e6 / best,
                static_cast<double>(pieces.size()) / 1e6 / best, tokens);
  };
  time("encode_word", [&](const uint8_t* p, size_t n, std::vector<HfToken>& o) { model->encode_word(p, n, o); });
  if (const auto* wp = dynamic_cast<const crayon::WordPieceModel*>(model.get())) {
    time("reference", [&](const uint8_t* p, size_t n, std::vector<HfToken>& o) { wp->encode_word_reference(p, n, o); });
  } else if (const auto* ug = dynamic_cast<const crayon::UnigramModel*>(model.get())) {
    time("uncached", [&](const uint8_t* p, size_t n, std::vector<HfToken>& o) { ug->encode_word_uncached(p, n, o); });
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if ((argc == 4 || argc == 5) && std::strcmp(argv[1], "--bench") == 0) {
      return run_bench(argv[2], argv[3], argc == 5 ? argv[4] : "");
    }
    if (argc == 5 && std::strcmp(argv[1], "--damage") == 0) return run_damage(argv[2], argv[3], std::atoi(argv[4]));
    if (argc == 4) return run_cases(argv[1], argv[2], argv[3]);
    std::cerr << "usage: model_driver VOCAB PIECES OUT | --bench VOCAB PIECES [PATH] | --damage VOCAB PIECES N\n";
    return 64;
  } catch (const std::exception& e) {
    std::cerr << "model_driver: " << e.what() << "\n";
    return 1;
  }
}
