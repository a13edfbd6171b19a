// Python bindings of the BPE trainer (bpe_trainer.h): WordCounter and train_bpe.
// Policy (defaults, argument checks, tokenizer.json) lives in crayon_hf/train.py.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "train/bpe_trainer.h"
#include "text/regex.h"

namespace py = pybind11;
using namespace crayon;

void bind_trainer(py::module_& m) {
  py::class_<WordCounter>(m, "WordCounter")
      .def(py::init([](const std::string& pattern) {
             try {
               return std::make_unique<WordCounter>(pattern);
             } catch (const RegexError& e) {
               throw py::value_error(std::string("pattern is not supported: ") + e.what());
             }
           }),
           py::arg("pattern"))
      .def(
          "add_lines",
          [](WordCounter& self, const py::bytes& text, size_t threads) {
            std::string_view v = text;  // the bytes object stays alive while we hold it
            py::gil_scoped_release release;
            self.add_lines(v, threads);
          },
          py::arg("text"), py::arg("threads") = 0,
          "Counts pre-tokens of UTF-8 text made of whole lines; each line (with its '\\n') is one sequence.")
      .def(
          "add_sequences",
          [](WordCounter& self, const py::list& seqs, size_t threads) {
            std::vector<std::string> owned;
            owned.reserve(seqs.size());
            for (const auto& s : seqs) {
              if (!py::isinstance<py::str>(s))
                throw py::type_error("train_bpe: the iterator must yield str or lists of str, got " +
                                     std::string(py::str(py::type::of(s).attr("__name__"))));
              owned.push_back(s.cast<std::string>());
            }
            std::vector<std::string_view> views(owned.begin(), owned.end());
            py::gil_scoped_release release;
            self.add_sequences(views, threads);
          },
          py::arg("sequences"), py::arg("threads") = 0, "Counts pre-tokens; each string is one sequence.")
      .def("__len__", &WordCounter::size)
      .def(
          "byte_level_words",
          [](const WordCounter& self) {
            std::vector<std::pair<std::string, uint64_t>> out;
            {
              py::gil_scoped_release release;
              out.reserve(self.size());
              for (const auto& [k, v] : self.counts()) out.emplace_back(byte_level_string(k), v);
            }
            py::dict d;
            for (const auto& [k, v] : out) d[py::str(k)] = v;
            return d;
          },
          "Word counts keyed by the byte-level form of each word (for tests and inspection).");

  m.def(
      "train_bpe_words",
      [](const WordCounter& counter, bool byte_level, size_t vocab_size, uint64_t min_frequency,
         const std::vector<std::string>& special_tokens, py::object limit_alphabet,
         const std::vector<uint32_t>& initial_alphabet, py::object prefix, py::object suffix,
         py::object max_token_length, py::object progress) {
        BpeTrainerConfig cfg;
        cfg.vocab_size = vocab_size;
        cfg.min_frequency = min_frequency;
        cfg.special_tokens = special_tokens;
        if (!limit_alphabet.is_none()) cfg.limit_alphabet = limit_alphabet.cast<size_t>();
        cfg.initial_alphabet = initial_alphabet;
        if (!prefix.is_none()) cfg.has_prefix = true, cfg.continuing_subword_prefix = prefix.cast<std::string>();
        if (!suffix.is_none()) cfg.has_suffix = true, cfg.end_of_word_suffix = suffix.cast<std::string>();
        if (!max_token_length.is_none()) cfg.max_token_length = max_token_length.cast<size_t>();
        std::function<void(size_t)> report;
        if (!progress.is_none()) {
          report = [progress](size_t done) {
            py::gil_scoped_acquire acquire;
            progress(done);
          };
        }
        BpeTrainResult r;
        {
          py::gil_scoped_release release;
          std::vector<std::pair<std::string, uint64_t>> words;
          words.reserve(counter.size());
          for (const auto& [k, v] : counter.counts())
            words.emplace_back(byte_level ? byte_level_string(k) : k, v);
          // A fixed order, so ids of prefixed/suffixed chars do not depend on hashing.
          std::sort(words.begin(), words.end());
          r = train_bpe(words, cfg, report);
        }
        py::list vocab;
        for (const auto& s : r.vocab) vocab.append(py::str(s));
        return py::make_tuple(vocab, r.merges, r.merge_steps);
      },
      py::arg("counter"), py::arg("byte_level"), py::arg("vocab_size"), py::arg("min_frequency"),
      py::arg("special_tokens"), py::arg("limit_alphabet"), py::arg("initial_alphabet"),
      py::arg("continuing_subword_prefix"), py::arg("end_of_word_suffix"), py::arg("max_token_length"),
      py::arg("progress"),
      "Trains BPE on the counted words. Returns (vocab by id, merges as id pairs in saved order, merge steps).");
}
