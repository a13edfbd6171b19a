// BPE training with the exact semantics of `tokenizers`' BpeTrainer (0.23), byte-level words.
//
//   text --WordCounter (regex split, all cores, per-thread maps merged)--> word -> count
//        --train_bpe--> specials, alphabet (sorted by code point), then merges:
//
//   words: each word type is an array of symbol ids (+ char lengths); pair_counts: pair -> count
//   summed over words (signed, see below); heap entries (count, pair, pos) where pos is a set of
//   word indices, ordered by count, then by the smaller (left id, right id) pair.
//   loop: pop the top; if its count differs from pair_counts, push it back with the current
//   count (keeping its pos) and pop again; stop at vocab_size, an empty heap, count < 1 or
//   count < min_frequency; else form the token left+right (right without the continuing-subword
//   prefix), give it the next id unless that string exists, merge the pair in the words of pos
//   only, apply each word's pair deltas to pair_counts, and push one entry per pair that gained
//   occurrences, with the words where it did.
//
// Why mirror tokenizers this literally: parity of merges depends on its quirks, which are kept:
//   - the merged pair's own count is not decremented (only its neighbours' pairs change);
//   - a pair can have several heap entries with different pos sets (when two merges form the
//     same string, e.g. ("a","bc") and ("ab","c")); each entry merges its own words, so the same
//     pair may be recorded twice; the saved merge list keeps one copy at its last rank;
//   - max_token_length: a new pair is counted only if the char lengths sum to < max_token_length;
//     a pair never counted is still decremented later (counts may go negative).
//
// Performance notes (measured on the 28 MB shared corpus, 467k word types, 2 cores): the merge
// loop is bound by memory latency of visiting scattered words (most visited words no longer hold
// the pair; tokenizers' pos sets are kept for parity). So all symbols live in one flat array
// (words only shrink and compact in place), pair counts are an open-addressing table, a merge over
// >= 4096 words runs on the thread pool (each word touched by one thread; deltas applied in order
// afterwards), and word visits are prefetched ahead. std::unordered_map pair counts and a vector
// per word were 1.8x slower.
//
// Bounds: memory O(sum over word types of their length) for words, pair counts and pos sets;
// independent of corpus size (only word types are kept). Each merge costs O(occurrences of the
// pair's words' lengths + log heap). Counting is linear in the text; texts are split at '\n' into
// sequences (tokenizers' train_from_files reads line by line, keeping line endings).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace crayon {

class Regex;

// Counts pre-tokens (raw UTF-8 bytes, before the byte-level mapping) over many texts.
class WordCounter {
 public:
  // `pattern`: the Oniguruma split pattern; pieces are its matches and the gaps between them
  // ("isolated"), exactly like tokenizers' Split / ByteLevel(use_regex=true).
  explicit WordCounter(const std::string& pattern);
  ~WordCounter();

  // Each string is one sequence (train_from_iterator).
  void add_sequences(const std::vector<std::string_view>& seqs, size_t threads);
  // A text of whole lines: each line, with its '\n', is one sequence (train_from_files).
  void add_lines(std::string_view text, size_t threads);

  size_t size() const { return counts_.size(); }
  const std::unordered_map<std::string, uint64_t>& counts() const { return counts_; }

 private:
  using Map = std::unordered_map<std::string, uint64_t>;
  void count_into(std::string_view seq, Map& map) const;
  void merge_maps(std::vector<Map>& maps);
  std::unique_ptr<Regex> re_;
  Map counts_;
};

struct BpeTrainerConfig {
  size_t vocab_size = 30000;
  uint64_t min_frequency = 0;
  std::vector<std::string> special_tokens;
  size_t limit_alphabet = SIZE_MAX;         // SIZE_MAX: no limit
  std::vector<uint32_t> initial_alphabet;   // code points
  bool has_prefix = false;
  std::string continuing_subword_prefix;
  bool has_suffix = false;
  std::string end_of_word_suffix;
  size_t max_token_length = SIZE_MAX;       // SIZE_MAX: no limit
};

struct BpeTrainResult {
  std::vector<std::string> vocab;                     // index = id
  std::vector<std::pair<uint32_t, uint32_t>> merges;  // saved order: one copy per pair, at its last rank
  size_t merge_steps = 0;                             // merges performed, duplicates included
};

// `words`: (UTF-8 word, count); the order fixes ids of prefixed/suffixed chars only.
// `progress(vocabulary size so far)` is called every 256 merges and at the end (may be empty).
BpeTrainResult train_bpe(const std::vector<std::pair<std::string, uint64_t>>& words, const BpeTrainerConfig& config,
                         const std::function<void(size_t)>& progress);

// GPT-2's bytes_to_unicode: the code point byte-level BPE shows for each byte.
uint32_t byte_level_char(uint8_t b);
// Raw bytes -> their byte-level characters, UTF-8.
std::string byte_level_string(std::string_view raw);

}  // namespace crayon
