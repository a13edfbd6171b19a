// A batch of texts marked into pieces, and the batch stages (engines/batch_stages.h) on CPU threads.
//
//   texts --mark_batch--> text bytes + marks, in memory the caller provides (the CUDA module
//                         passes its pinned upload buffer, so nothing is copied again)
//         --encode_batch_staged--> every stage in a host loop: flat ids + document offsets
//
// The host loop is the CUDA module's pipeline without the GPU: the same functors on the same
// data, so CI (which has no GPU) checks every stage against the CPU engine. It is not a faster CPU
// path (the engine encodes straight into its output). The CUDA module reuses mark_batch for its
// pre-tokenization and encode_reference for the pieces it hands back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engines/batch_stages.h"
#include "engines/hf_engine.h"
#include "engines/tiktoken_engine.h"

namespace crayon {

// The largest batch text a marked batch holds: slots and piece offsets are 32-bit.
constexpr uint64_t kMaxBatchBytes = 0xFFFFFFFFull;

struct MarkedBatch {
  std::vector<uint64_t> doc_bytes;   // n_docs + 1: document d is bytes [doc_bytes[d], doc_bytes[d + 1])
  std::vector<SpecialAt> specials;   // the allowed special tokens, in text order
  // The first document holding a special token flagged in `disallowed` (nothing else is then set).
  int64_t denied_text = -1;
  int32_t denied_special = -1;
  double mark_ms = 0;                // time on the threads
};

// Total UTF-8 bytes of texts; throws std::length_error past kMaxBatchBytes.
uint64_t batch_bytes(const std::vector<std::string_view>& texts);

// Copies texts into text_out and marks their pieces into marks_out (batch_bytes(texts) bytes each)
// on up to `threads` threads. `allowed` flags the special tokens encoded as themselves (none when
// `ordinary`); a text holding one flagged in `disallowed` ends it with denied_text set, as the
// engine's batch does.
MarkedBatch mark_batch(const TiktokenEngine& e, const std::vector<std::string_view>& texts,
                       const std::vector<uint8_t>& allowed, const std::vector<uint8_t>& disallowed, bool ordinary,
                       size_t threads, uint8_t* text_out, uint8_t* marks_out);

// The bytes that start a piece (every marked byte), then `n_bytes`: piece k is [s[k], s[k + 1]).
std::vector<uint32_t> piece_starts(const uint8_t* marks, uint64_t n_bytes);

// The CPU engine's encoding of the pieces text[starts[i], starts[i] + lens[i]), i < n: their
// counts and ids (concatenated). Throws BpeError for a byte without a token.
void encode_reference(const TiktokenEngine& e, const uint8_t* text, const uint32_t* starts, const uint32_t* lens,
                      size_t n, size_t threads, std::vector<int32_t>& counts, std::vector<uint32_t>& ids);

// Every stage after marking, on CPU threads: the ids of a marked batch and its n_docs + 1
// document offsets.
void run_stages_on_host(const TiktokenEngine& e, const uint8_t* text, const uint8_t* marks, const MarkedBatch& info,
                        size_t threads, std::vector<uint32_t>& ids, std::vector<int64_t>& offsets);

// Every stage on CPU threads: the ids of the batch and n_docs + 1 document offsets, or
// info.denied_text set (then ids and offsets are left empty).
void encode_batch_staged(const TiktokenEngine& e, const std::vector<std::string_view>& texts,
                         const std::vector<uint8_t>& allowed, const std::vector<uint8_t>& disallowed, bool ordinary,
                         size_t threads, std::vector<uint32_t>& ids, std::vector<int64_t>& offsets, MarkedBatch& info);

// The tokenizers face on the stages (HfEngine::piece_engine() non-null). Marking is mark_batch's
// with HfEngine::mark_pieces; each added token becomes a special whose slot value is
// n_ranks + its index in `added`, and a document mark_pieces gives up on is flagged in on_cpu
// (its bytes are all dropped, so the stages give it no tokens).
struct HfMarkedBatch {
  MarkedBatch batch;
  std::vector<HfAddedAt> added;
  std::vector<uint8_t> on_cpu;  // per document: encode it with HfEngine::encode instead
  bool encode_special_tokens = false;
};

HfMarkedBatch mark_hf_batch(const HfEngine& e, const std::vector<std::string_view>& texts, bool encode_special_tokens,
                            size_t threads, uint8_t* text_out, uint8_t* marks_out);

// The raw encodings of a marked batch from the stages' output (`values`, rank or added slot per
// token; `doc_offsets`, n_docs + 1), each as HfEngine::encode would give it with `offsets` (char
// offsets when true) and `limit` (< 0: none), word indexes 0. Documents flagged on_cpu are encoded.
void hf_raw_batch(const HfEngine& e, const std::vector<std::string_view>& texts, const HfMarkedBatch& m,
                  const uint32_t* values, uint64_t n_values, const int64_t* doc_offsets, bool offsets, int64_t limit,
                  size_t threads, std::vector<RawEncoding>& docs);

// Byte offsets (at character boundaries) to character offsets, in place.
void to_char_offsets(std::string_view text, std::vector<uint32_t>& starts, std::vector<uint32_t>& ends);

}  // namespace crayon
