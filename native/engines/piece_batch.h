// A batch of texts as pieces, and the batch stages (engines/batch_stages.h) run on CPU threads.
//
//   texts --split_batch--> PieceBatch {text, pieces, doc_pieces}     (pre-tokenization, CPU)
//         --encode_batch_staged--> EncodeStage, reference fix-ups, scan, GatherStage, DocOffsetsStage
//                                  in a host loop: flat ids + document offsets
//
// The host loop is the CUDA module's pipeline without the GPU: the same functors on the same
// data, so CI (which has no GPU) checks every stage against the CPU engine. It is not a faster
// CPU path (the engine encodes straight into its output); the CUDA module reuses split_batch and
// encode_reference for its pre-tokenization and hand-offs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engines/batch_stages.h"
#include "engines/tiktoken_engine.h"

namespace crayon {

struct PieceBatch {
  std::string text;                  // every document's bytes, concatenated
  std::vector<BatchPiece> pieces;    // in document order
  std::vector<uint64_t> doc_pieces;  // n_docs + 1: document d owns pieces [doc_pieces[d], doc_pieces[d + 1])
  std::vector<uint32_t> long_pieces; // indexes of pieces longer than kDevicePieceMax (for the CPU)
  // The first document holding a special token flagged in `disallowed` (then nothing else is set).
  int64_t denied_text = -1;
  int32_t denied_special = -1;
};

// The largest batch text split_batch takes: slots and piece offsets are 32-bit.
constexpr uint64_t kMaxBatchBytes = 0xFFFFFFFFull;

// Pre-tokenizes texts on up to `threads` threads. `allowed` flags the special tokens encoded as
// themselves (none when `ordinary`); a text holding one flagged in `disallowed` ends the split
// with denied_text set, as the engine's batch does. Throws std::length_error past kMaxBatchBytes.
PieceBatch split_batch(const TiktokenEngine& e, const std::vector<std::string_view>& texts,
                       const std::vector<uint8_t>& allowed, const std::vector<uint8_t>& disallowed, bool ordinary,
                       size_t threads);

// Encodes pieces `indexes[0, n)` of the batch with the CPU engine (its whole per-piece path) into
// their slots and counts. Throws BpeError for a byte without a token.
void encode_reference(const TiktokenEngine& e, const PieceBatch& b, const uint32_t* indexes, size_t n,
                      uint32_t* slots, int32_t* counts, size_t threads);

// Every stage on CPU threads: the ids of the batch and n_docs + 1 document offsets.
void encode_batch_staged(const TiktokenEngine& e, const PieceBatch& b, size_t threads, std::vector<uint32_t>& ids,
                         std::vector<int64_t>& offsets);

}  // namespace crayon
