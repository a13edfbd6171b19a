// Command-line driver for tests/test_regex_oniguruma.py: runs regex Split / literal Split and the
// char-class pre-tokenizers on a batch of cases and prints the pieces as byte offsets.
//
// Input (file given as argv[1], or stdin): records of
//   <kind> <behavior> <invert> <pattern bytes> <text bytes> <repeat>\n<pattern><text>
// kind: regex | literal | whitespace | whitespace_split | digits | digits_individual | punctuation
//       | compile (only compiles the pattern)
// behavior: 0 removed, 1 isolated, 2 merged_with_previous, 3 merged_with_next, 4 contiguous
// repeat: run the case that many times and report the thread CPU time (for benchmarks).
// Output: one line per record: "ok <nanoseconds> <scanner> <start> <end> <start> <end> ...",
// or "err <message>" when the pattern is refused (RegexError).
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "text/regex.h"
#include "text/split.h"

namespace {

// Thread CPU time in nanoseconds: the timings must not count time other processes take.
long long cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

const char* scanner_name(crayon::Regex::Scanner s) {
  switch (s) {
    case crayon::Regex::Scanner::kGpt2: return "gpt2";
    case crayon::Regex::Scanner::kLlama3: return "llama3";
    case crayon::Regex::Scanner::kQwen2: return "qwen2";
    case crayon::Regex::Scanner::kDeepSeekDigits: return "deepseek_digits";
    case crayon::Regex::Scanner::kDeepSeekCjk: return "deepseek_cjk";
    case crayon::Regex::Scanner::kDeepSeekWords: return "deepseek_main";
    case crayon::Regex::Scanner::kNone: break;
  }
  return "vm";
}

}  // namespace

int main(int argc, char** argv) {
  std::string data;
  if (argc > 1) {
    std::ifstream in(argv[1], std::ios::binary);
    data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    data.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  std::map<std::string, std::shared_ptr<crayon::Regex>> cache;
  std::map<std::string, std::string> errors;
  std::string out;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) break;
    std::istringstream header(data.substr(pos, nl - pos));
    std::string kind;
    int behavior = 0, invert = 0;
    size_t plen = 0, tlen = 0, repeat = 1;
    header >> kind >> behavior >> invert >> plen >> tlen >> repeat;
    pos = nl + 1;
    const std::string pattern = data.substr(pos, plen);
    pos += plen;
    const std::string_view text(data.data() + pos, tlen);
    pos += tlen;
    const auto beh = static_cast<crayon::SplitBehavior>(behavior);

    std::shared_ptr<crayon::Regex> re;
    const char* scanner = "-";
    if (kind == "regex" || kind == "compile") {
      auto it = cache.find(pattern);
      if (it == cache.end()) {
        auto err = errors.find(pattern);
        if (err == errors.end()) {
          try {
            it = cache.emplace(pattern, std::make_shared<crayon::Regex>(pattern)).first;
          } catch (const crayon::RegexError& e) {
            err = errors.emplace(pattern, e.what()).first;
          }
        }
        if (err != errors.end()) {
          std::string msg = err->second;
          for (char& c : msg) if (c == '\n') c = ' ';
          out += "err " + msg + "\n";
          continue;
        }
      }
      re = it->second;
      scanner = scanner_name(re->scanner());
    }
    std::vector<crayon::MatchSpan> matches;
    crayon::Pieces pieces;
    const auto t0 = cpu_now();
    for (size_t r = 0; r < repeat; ++r) {
      matches.clear();
      pieces.clear();
      if (kind == "regex") {
        crayon::find_matches(*re, text, matches);
        crayon::split_pieces_by(matches, beh, invert != 0, pieces);
      } else if (kind == "literal") {
        crayon::find_matches_literal(pattern, text, matches);
        crayon::split_pieces_by(matches, beh, invert != 0, pieces);
      } else if (kind == "whitespace") {
        crayon::pretokenize_whitespace(text, pieces);
      } else if (kind == "whitespace_split") {
        crayon::pretokenize_whitespace_split(text, pieces);
      } else if (kind == "digits") {
        crayon::pretokenize_digits(text, false, pieces);
      } else if (kind == "digits_individual") {
        crayon::pretokenize_digits(text, true, pieces);
      } else if (kind == "punctuation") {
        crayon::pretokenize_punctuation(text, beh, pieces);
      }
    }
    const long long ns = cpu_now() - t0;
    out += "ok " + std::to_string(ns) + " " + scanner;
    for (const auto& p : pieces) {
      out += ' ';
      out += std::to_string(p.first);
      out += ' ';
      out += std::to_string(p.second);
    }
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
