// The CUDA batch engine's host interface, free of CUDA types so the pybind11 module that uses it
// (native/python/bindings_cuda.cc) compiles with the host compiler.
//
//   DeviceEngine(tables, device)   the per-piece encoder's tables, copied to one GPU once
//   encode(staged text + marks)    select the marked bytes (CUB) | EncodeStage kernel (one thread
//                                  per piece) | CPU: long pieces, concurrently | CPU: pieces the
//                                  kernel left | CUB exclusive scan | GatherStage + DocOffsetsStage
//
// Memory: device buffers come from the device's stream-ordered pool (cudaMallocAsync with the
// release threshold raised), so after the first call of a size no call allocates from the driver.
// Output kept on the GPU is a DeviceBuffer owned by whoever holds it (DLPack, numpy copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engines/batch_stages.h"

namespace crayon {
namespace cuda {

// How many CUDA devices are usable; on failure 0, with the runtime's reason in *why.
int device_count(std::string* why);

// A device allocation (freed when the last owner lets go).
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }
  // Copies the first `bytes` bytes to host memory.
  void to_host(void* dst, size_t bytes) const;

 private:
  int device_;
  size_t bytes_;
  void* data_ = nullptr;
};

// Sizes of the arrays behind a host PieceTables (models/piece_encoder.h), which does not keep them.
struct TableSizes {
  uint64_t bloom_words = 0;  // 0 when there is no filter
};

// What the CPU does for the GPU: encode the pieces text[starts[i], starts[i] + lens[i]) with the CPU
// engine and report their counts and ids (concatenated), as TiktokenEngine.encode_pieces does.
using ReferenceFn = std::function<void(const uint32_t* starts, const uint32_t* lens, size_t n,
                                       std::vector<int32_t>& counts, std::vector<uint32_t>& ids)>;

// A batch whose text and marks (engines/batch_stages.h) were written into the engine's staging
// buffers, plus its document boundaries and special tokens.
struct BatchInput {
  uint64_t text_bytes = 0;
  const uint64_t* doc_bytes = nullptr;  // n_docs + 1
  uint64_t n_docs = 0;
  const SpecialAt* specials = nullptr;
  uint64_t n_specials = 0;
};

// Where a batch's result goes when it is copied back: `ids(n_tokens)` returns host memory for the
// ids (called once, on the calling thread), `offsets` has room for n_docs + 1.
struct HostSink {
  std::function<uint32_t*(uint64_t n_tokens)> ids;
  int64_t* offsets = nullptr;
};

struct BatchOutput {
  // Kept on the GPU (encode without a HostSink): uint32 [n_tokens] and int64 [n_docs + 1].
  std::shared_ptr<DeviceBuffer> ids;
  std::shared_ptr<DeviceBuffer> offsets;
  uint64_t n_tokens = 0;
  uint64_t n_pieces = 0;
  uint64_t n_long = 0;    // pieces over kDevicePieceMax, encoded by the CPU while the kernel runs
  uint64_t n_left = 0;    // pieces the kernel left to the CPU (slow pairs, bytes without a token)
  double kernel_ms = 0;   // the encode kernel alone (CUDA events)
  double upload_ms = 0;   // the upload and the piece selection, until the encode kernel is queued
  double fix_ms = 0;      // from the launch until the CPU's pieces are patched in
  double tail_ms = 0;     // scan, gather, and the copy back
};

class DeviceEngine {
 public:
  DeviceEngine(const piece::PieceTables& host, const TableSizes& sizes, int device);
  ~DeviceEngine();
  DeviceEngine(const DeviceEngine&) = delete;
  DeviceEngine& operator=(const DeviceEngine&) = delete;
  int device() const { return device_; }

  // Pinned host memory for a batch of `bytes` bytes (grow-only, reused by every call): the text
  // goes to staging_text(), its marks to staging_marks(). Valid until the next reserve_staging.
  void reserve_staging(uint64_t bytes);
  uint8_t* staging_text() const;
  uint8_t* staging_marks() const;

  // Encodes the staged batch; `reference` runs on the calling thread (long pieces while the kernel runs,
  // then the pieces it left). With `host`, the result is copied there (through pooled device
  // buffers only); without, it stays on the GPU in two DeviceBuffers. One call at a time per
  // engine (the caller serializes).
  BatchOutput encode(const BatchInput& in, const ReferenceFn& reference, const HostSink* host);

 private:
  struct Impl;
  int device_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuda
}  // namespace crayon
