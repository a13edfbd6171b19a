#include "engines/piece_batch.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>

#include "core/parallel.h"

namespace crayon {

namespace {

// Runs fn(i) for i in [0, n) on threads, a block of indexes per task.
template <class F>
void for_blocks(size_t n, size_t threads, F&& fn) {
  constexpr size_t kBlock = 4096;
  parallel_for((n + kBlock - 1) / kBlock, threads, [&](size_t block) {
    const size_t end = std::min(n, (block + 1) * kBlock);
    for (size_t i = block * kBlock; i < end; ++i) fn(i);
  });
}

}  // namespace

uint64_t batch_bytes(const std::vector<std::string_view>& texts) {
  uint64_t total = 0;
  for (std::string_view t : texts) total += t.size();
  if (total > kMaxBatchBytes) throw std::length_error("a batch for the piece stages holds less than 4 GiB of text");
  return total;
}

MarkedBatch mark_batch(const TiktokenEngine& e, const std::vector<std::string_view>& texts,
                       const std::vector<uint8_t>& allowed, const std::vector<uint8_t>& disallowed, bool ordinary,
                       size_t threads, uint8_t* text_out, uint8_t* marks_out) {
  MarkedBatch b;
  const size_t n_docs = texts.size();
  b.doc_bytes.assign(n_docs + 1, 0);
  for (size_t d = 0; d < n_docs; ++d) b.doc_bytes[d + 1] = b.doc_bytes[d] + texts[d].size();
  if (b.doc_bytes[n_docs] > kMaxBatchBytes) throw std::length_error("a batch for the piece stages holds less than 4 GiB of text");

  const bool check = std::find(disallowed.begin(), disallowed.end(), 1) != disallowed.end();
  const std::vector<uint8_t> none;
  const std::vector<uint8_t>& allow = ordinary ? none : allowed;
  const bool any_allowed = std::find(allow.begin(), allow.end(), 1) != allow.end();
  std::vector<int32_t> denied(check ? n_docs : 0, -1);
  // Special tokens per document (rare; only documents that hold one get a list).
  std::vector<std::vector<SpecialAt>> specials(any_allowed ? n_docs : 0);
  const auto t0 = std::chrono::steady_clock::now();
  parallel_for(n_docs, threads, [&](size_t d) {
    if (check) {
      const SpecialMatch m = e.find_special(texts[d], disallowed);
      if (m.index >= 0) {
        denied[d] = m.index;
        return;
      }
    }
    const uint64_t at = b.doc_bytes[d];
    std::copy(texts[d].begin(), texts[d].end(), text_out + at);
    thread_local std::vector<SpecialAt> none_found;
    e.mark_pieces(texts[d], allow, marks_out + at, at, any_allowed ? specials[d] : none_found);
  });
  b.mark_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (size_t d = 0; d < denied.size(); ++d) {
    if (denied[d] >= 0) {
      MarkedBatch out;
      out.denied_text = static_cast<int64_t>(d);
      out.denied_special = denied[d];
      return out;
    }
  }
  for (const auto& v : specials) b.specials.insert(b.specials.end(), v.begin(), v.end());
  return b;
}

std::vector<uint32_t> piece_starts(const uint8_t* marks, uint64_t n_bytes) {
  std::vector<uint32_t> starts;
  for (uint64_t i = 0; i < n_bytes; ++i) {
    if (marks[i] != kMarkInside) starts.push_back(static_cast<uint32_t>(i));
  }
  starts.push_back(static_cast<uint32_t>(n_bytes));
  return starts;
}

void encode_reference(const TiktokenEngine& e, const uint8_t* text, const uint32_t* starts, const uint32_t* lens,
                      size_t n, size_t threads, std::vector<int32_t>& counts, std::vector<uint32_t>& ids) {
  std::vector<std::vector<uint32_t>> each(n);
  parallel_for(n, threads, [&](size_t k) { e.encode_piece(text + starts[k], lens[k], each[k]); });
  counts.resize(n);
  ids.clear();
  for (size_t k = 0; k < n; ++k) {
    counts[k] = static_cast<int32_t>(each[k].size());
    ids.insert(ids.end(), each[k].begin(), each[k].end());
  }
}

void encode_batch_staged(const TiktokenEngine& e, const std::vector<std::string_view>& texts,
                         const std::vector<uint8_t>& allowed, const std::vector<uint8_t>& disallowed, bool ordinary,
                         size_t threads, std::vector<uint32_t>& ids, std::vector<int64_t>& offsets, MarkedBatch& info) {
  const uint64_t n_bytes = batch_bytes(texts);
  std::vector<uint8_t> text(n_bytes), marks(n_bytes);
  info = mark_batch(e, texts, allowed, disallowed, ordinary, threads, text.data(), marks.data());
  if (info.denied_text >= 0) return;
  run_stages_on_host(e, text.data(), marks.data(), info, threads, ids, offsets);
}

void run_stages_on_host(const TiktokenEngine& e, const uint8_t* text, const uint8_t* marks, const MarkedBatch& info,
                        size_t threads, std::vector<uint32_t>& ids, std::vector<int64_t>& offsets) {
  const uint64_t n_bytes = info.doc_bytes.back();
  const std::vector<uint32_t> starts = piece_starts(marks, n_bytes);
  const size_t n = starts.size() - 1;
  std::vector<uint32_t> slots(n_bytes);
  std::vector<int32_t> counts(n);
  for_blocks(info.specials.size(), threads, PresetSpecialsStage{info.specials.data(), slots.data()});
  const piece::PieceTables& tables = e.piece_tables();
  for_blocks(n, threads, EncodeStage{&tables, text, marks, starts.data(), slots.data(), counts.data()});

  // What the stage left to the CPU engine, encoded and patched in as the GPU path does.
  std::vector<uint32_t> left, left_start, left_len;
  for (size_t k = 0; k < n; ++k) {
    if (counts[k] >= 0) continue;
    left.push_back(static_cast<uint32_t>(k));
    left_start.push_back(starts[k]);
    left_len.push_back(starts[k + 1] - starts[k]);
  }
  std::vector<int32_t> left_counts;
  std::vector<uint32_t> left_ids;
  encode_reference(e, text, left_start.data(), left_len.data(), left.size(), threads, left_counts, left_ids);
  size_t at = 0;
  for (size_t j = 0; j < left.size(); ++j) {
    std::copy(left_ids.begin() + at, left_ids.begin() + at + left_counts[j], slots.begin() + left_start[j]);
    counts[left[j]] = left_counts[j];
    at += left_counts[j];
  }

  std::vector<uint32_t> positions(n + 1, 0);
  for (size_t k = 0; k < n; ++k) positions[k + 1] = positions[k] + static_cast<uint32_t>(counts[k]);
  ids.resize(positions[n]);
  for_blocks(n, threads, GatherStage{starts.data(), slots.data(), positions.data(), ids.data()});
  offsets.resize(info.doc_bytes.size());
  for_blocks(info.doc_bytes.size(), threads,
             DocOffsetsStage{info.doc_bytes.data(), starts.data(), n, positions.data(), offsets.data()});
}

HfMarkedBatch mark_hf_batch(const HfEngine& e, const std::vector<std::string_view>& texts, bool encode_special_tokens,
                            size_t threads, uint8_t* text_out, uint8_t* marks_out) {
  HfMarkedBatch m;
  MarkedBatch& b = m.batch;
  const size_t n_docs = texts.size();
  b.doc_bytes.assign(n_docs + 1, 0);
  for (size_t d = 0; d < n_docs; ++d) b.doc_bytes[d + 1] = b.doc_bytes[d] + texts[d].size();
  if (b.doc_bytes[n_docs] > kMaxBatchBytes) throw std::length_error("a batch for the piece stages holds less than 4 GiB of text");
  m.on_cpu.assign(n_docs, 0);
  m.encode_special_tokens = encode_special_tokens;
  std::vector<std::vector<std::pair<uint32_t, HfAddedAt>>> added(n_docs);
  const auto t0 = std::chrono::steady_clock::now();
  parallel_for(n_docs, threads, [&](size_t d) {
    const uint64_t at = b.doc_bytes[d];
    m.on_cpu[d] = !e.mark_pieces(texts[d], encode_special_tokens, text_out + at, marks_out + at, added[d]);
  });
  b.mark_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const uint32_t n_ranks = e.piece_engine()->n_ids();
  for (size_t d = 0; d < n_docs; ++d) {
    for (const auto& [pos, a] : added[d]) {
      if (m.added.size() >= 0xFFFFFFFFull - n_ranks) throw std::length_error("too many added tokens in one batch");
      b.specials.push_back(SpecialAt{static_cast<uint32_t>(b.doc_bytes[d] + pos), n_ranks + static_cast<uint32_t>(m.added.size())});
      m.added.push_back(a);
    }
  }
  return m;
}

void hf_raw_batch(const HfEngine& e, const std::vector<std::string_view>& texts, const HfMarkedBatch& m,
                  const uint32_t* values, uint64_t n_values, const int64_t* doc_offsets, bool offsets, int64_t limit,
                  size_t threads, std::vector<RawEncoding>& docs) {
  const size_t n_docs = texts.size();
  if (m.on_cpu.size() != n_docs) throw std::invalid_argument("the marked batch holds another number of documents");
  for (size_t d = 0; d < n_docs; ++d) {
    if (doc_offsets[d] < 0 || doc_offsets[d] > doc_offsets[d + 1] || static_cast<uint64_t>(doc_offsets[d + 1]) > n_values) {
      throw std::invalid_argument("document offsets outside the ids");
    }
  }
  docs.resize(n_docs);
  parallel_for(n_docs, threads, [&](size_t d) {
    RawEncoding& r = docs[d];
    r.with_offsets = offsets;
    if (limit >= 0) r.limit = static_cast<size_t>(limit);
    if (m.on_cpu[d]) {
      e.encode(texts[d], m.encode_special_tokens, r);
    } else {
      e.raw_from_pieces(texts[d], values + doc_offsets[d], static_cast<size_t>(doc_offsets[d + 1] - doc_offsets[d]),
                        m.added.data(), m.added.size(), r);
    }
    if (offsets) to_char_offsets(texts[d], r.starts, r.ends);
  });
}

void to_char_offsets(std::string_view text, std::vector<uint32_t>& starts, std::vector<uint32_t>& ends) {
  bool ascii = true;
  for (unsigned char c : text) {
    if (c >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return;
  std::vector<uint32_t> chars(text.size() + 1);
  uint32_t count = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    chars[i] = count;
    if ((static_cast<uint8_t>(text[i]) & 0xC0) != 0x80) ++count;
  }
  // A position inside a character (never produced by the engine) rounds up to the next one.
  chars[text.size()] = count;
  for (size_t i = text.size(); i-- > 0;) {
    if ((static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) chars[i] = chars[i + 1];
  }
  for (uint32_t& s : starts) s = chars[std::min<size_t>(s, text.size())];
  for (uint32_t& e : ends) e = chars[std::min<size_t>(e, text.size())];
}

}  // namespace crayon
