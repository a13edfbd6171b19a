// The stages of a batch encoded piece by piece, shared by the CPU host loop and the CUDA kernels.
//
//   texts --pre-tokenize (CPU threads: TiktokenEngine::split_pieces)--> text bytes + BatchPiece[]
//         --EncodeStage (one call per piece)--> ids in the piece's slots + a count per piece
//                      pieces the stage leaves (count < 0: longer than max_len, a slow pair, a byte
//                      without a token, damaged tables) are encoded by the CPU engine and patched in
//         --exclusive scan of the counts--> each piece's first output position
//         --GatherStage (one call per piece)--> flat ids; DocOffsetsStage --> document offsets
//
// Slots: the ids of the piece starting at byte s of the batch text go to slots[s, s + count).
// A piece of n bytes has at most n tokens, and a special token's text is at least one byte, so
// every piece owns its slots and no stage needs to know another piece's count before the scan.
//
// Each stage is a functor over an index with plain pointers, __host__ __device__ (see
// models/piece_encoder.h): engines/piece_batch.cc runs them in a loop on CPU threads (what CI
// checks against the CPU engine on every corpus and vocabulary, with sanitizers), and
// native/cuda/batch_kernels.cu runs the very same functors as kernels, one GPU thread per index.
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/piece_encoder.h"

namespace crayon {

// Bytes [start, start + len) of the batch text; with kSpecialPiece set in len, a special token
// whose id is len & ~kSpecialPiece (one id, in slot `start`).
struct BatchPiece {
  uint32_t start;
  uint32_t len;
};
constexpr uint32_t kSpecialPiece = 0x80000000u;

// The longest piece the GPU encodes itself (one thread per piece keeps its dead-end bitmap in
// registers/local memory); longer ones go to the CPU. The host loop uses the same limit so that
// it exercises the same hand-off.
constexpr uint32_t kDevicePieceMax = 1024;
constexpr size_t kDeviceDeadEndWords = kDevicePieceMax / 64 + 1;

struct EncodeStage {
  const piece::PieceTables* tables;
  const uint8_t* text;
  const BatchPiece* pieces;
  uint32_t* slots;  // one per text byte
  int32_t* counts;  // one per piece: ids written, or piece::kUseReference

  CRAYON_HD void operator()(size_t i) const {
    const BatchPiece p = pieces[i];
    if (p.len & kSpecialPiece) {
      slots[p.start] = p.len & ~kSpecialPiece;
      counts[i] = 1;
      return;
    }
    if (p.len == 0 || p.len > kDevicePieceMax) {
      counts[i] = piece::kUseReference;
      return;
    }
    uint64_t dead_end_free[kDeviceDeadEndWords];
    piece::SpinePairCheck check{*tables};
    counts[i] = piece::encode_piece(*tables, text + p.start, p.len, slots + p.start, dead_end_free, check);
  }
};

struct GatherStage {
  const BatchPiece* pieces;
  const uint32_t* slots;
  const uint32_t* positions;  // n_pieces + 1: exclusive scan of the counts
  uint32_t* ids;

  CRAYON_HD void operator()(size_t i) const {
    const uint32_t* from = slots + pieces[i].start;
    uint32_t* to = ids + positions[i];
    const uint32_t n = positions[i + 1] - positions[i];
    for (uint32_t k = 0; k < n; ++k) to[k] = from[k];
  }
};

struct DocOffsetsStage {
  const uint64_t* doc_pieces;  // n_docs + 1: document d's pieces are [doc_pieces[d], doc_pieces[d + 1])
  const uint32_t* positions;
  int64_t* offsets;            // n_docs + 1

  CRAYON_HD void operator()(size_t d) const { offsets[d] = positions[doc_pieces[d]]; }
};

}  // namespace crayon
