// The stages of a batch encoded piece by piece, shared by the CPU host loop and the CUDA kernels.
//
//   texts --mark (CPU threads: TiktokenEngine::mark_pieces)--> text bytes + one mark per byte
//         --select the marked bytes--> starts: piece k is bytes [starts[k], starts[k + 1])
//         --PresetSpecialsStage--> each special token's id in its slot
//         --EncodeStage (one call per piece)--> ids in the piece's slots + a count per piece;
//                      pieces the stage leaves (count < 0: longer than kDevicePieceMax, a slow
//                      pair, a byte without a token, damaged tables) are encoded by the CPU
//                      engine and patched in
//         --exclusive scan of the counts--> each piece's first output position
//         --GatherStage (per piece)--> flat ids; DocOffsetsStage (per document) --> offsets
//
// Marks: the split writes one byte per text byte, in place, so splitting needs no per-document
// lists and no assembly, and the upload is two bytes per text byte: kMarkPiece where a piece
// starts, kMarkSpecial where an allowed special token starts, kMarkDropped on each byte no piece
// covers (a split regex's unmatched text: a one-byte "piece" of no tokens), kMarkInside elsewhere.
// Every document's first byte is marked, so no piece runs across documents.
//
// Slots: the ids of the piece starting at byte s go to slots[s, s + count). A piece of n bytes
// has at most n tokens, and a special token's text is at least one byte, so every piece owns its
// slots and no stage needs another piece's count before the scan.
//
// Each stage is a functor over an index with plain pointers, __host__ __device__ (see
// models/piece_encoder.h): engines/piece_batch.cc runs them in a loop on CPU threads (what CI
// checks against the CPU engine on every corpus and vocabulary, with sanitizers), and
// native/cuda/device_engine.cu runs the very same functors as kernels, one GPU thread per index.
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/piece_encoder.h"

namespace crayon {

enum BatchMark : uint8_t { kMarkInside = 0, kMarkPiece = 1, kMarkDropped = 2, kMarkSpecial = 3 };

// An allowed special token at byte `pos` of the batch text.
struct SpecialAt {
  uint32_t pos;
  uint32_t id;
};

// The longest piece the GPU encodes itself (one thread per piece keeps its dead-end bitmap in
// local memory); longer ones go to the CPU. The host loop uses the same limit so that it
// exercises the same hand-off.
constexpr uint32_t kDevicePieceMax = 1024;
constexpr size_t kDeviceDeadEndWords = kDevicePieceMax / 64 + 1;

struct PresetSpecialsStage {
  const SpecialAt* specials;
  uint32_t* slots;

  CRAYON_HD void operator()(size_t i) const { slots[specials[i].pos] = specials[i].id; }
};

struct EncodeStage {
  const piece::PieceTables* tables;
  const uint8_t* text;
  const uint8_t* marks;
  const uint32_t* starts;  // n_pieces + 1, the last one the text's size
  uint32_t* slots;         // one per text byte
  int32_t* counts;         // one per piece: ids written, or piece::kUseReference

  CRAYON_HD void operator()(size_t k) const {
    const uint32_t s = starts[k];
    const uint32_t n = starts[k + 1] - s;
    const uint8_t mark = marks[s];
    if (mark == kMarkDropped) {
      counts[k] = 0;
    } else if (mark == kMarkSpecial) {
      counts[k] = 1;  // PresetSpecialsStage wrote the id
    } else if (n > kDevicePieceMax) {
      counts[k] = piece::kUseReference;
    } else {
      uint64_t dead_end_free[kDeviceDeadEndWords];
      piece::SpinePairCheck check{*tables};
      counts[k] = piece::encode_piece(*tables, text + s, n, slots + s, dead_end_free, check);
    }
  }
};

struct GatherStage {
  const uint32_t* starts;
  const uint32_t* slots;
  const uint32_t* positions;  // n_pieces + 1: exclusive scan of the counts
  uint32_t* ids;

  CRAYON_HD void operator()(size_t k) const {
    const uint32_t* from = slots + starts[k];
    uint32_t* to = ids + positions[k];
    const uint32_t n = positions[k + 1] - positions[k];
    for (uint32_t j = 0; j < n; ++j) to[j] = from[j];
  }
};

struct DocOffsetsStage {
  const uint64_t* doc_bytes;  // n_docs + 1: document d is bytes [doc_bytes[d], doc_bytes[d + 1])
  const uint32_t* starts;
  uint64_t n_pieces;
  const uint32_t* positions;
  int64_t* offsets;           // n_docs + 1

  // Document d's ids start at its first piece: the first with starts[k] >= doc_bytes[d].
  CRAYON_HD void operator()(size_t d) const {
    uint64_t lo = 0, hi = n_pieces;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (starts[mid] < doc_bytes[d]) lo = mid + 1;
      else hi = mid;
    }
    offsets[d] = positions[lo];
  }
};

}  // namespace crayon
