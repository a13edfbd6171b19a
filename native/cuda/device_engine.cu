// The CUDA batch engine (device_engine.h): the batch stages of engines/batch_stages.h as kernels.
#include "cuda/device_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <cub/device/device_scan.cuh>

namespace crayon {
namespace cuda {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(err));
  }
}
#define CRAYON_CUDA_CHECK(call) check((call), #call)

// Makes `device` current for a scope and restores the caller's device after it.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    CRAYON_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) CRAYON_CUDA_CHECK(cudaSetDevice(device));
  }
  ~ScopedDevice() { cudaSetDevice(previous_); }

 private:
  int previous_ = 0;
};

constexpr int kThreads = 128;

unsigned blocks_for(uint64_t n) {
  const uint64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<uint64_t>(std::max<uint64_t>(b, 1), 1u << 20));
}

template <class Stage>
__global__ void for_each_kernel(Stage stage, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    stage(i);
  }
}

// EncodeStage over pieces in `order` (grouped by length, so a warp's threads do similar work).
__global__ void encode_kernel(EncodeStage stage, const uint32_t* order, uint64_t n) {
  for (uint64_t k = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; k < n; k += uint64_t{gridDim.x} * blockDim.x) {
    stage(order[k]);
  }
}

// The pieces the encode kernel left (count < 0), except the long ones the CPU has already done.
__global__ void collect_left_kernel(const int32_t* counts, const BatchPiece* pieces, uint64_t n, uint32_t* left,
                                    unsigned long long* n_left, uint64_t capacity) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    if (counts[i] >= 0 || pieces[i].len > kDevicePieceMax) continue;
    const unsigned long long k = atomicAdd(n_left, 1ull);
    if (k < capacity) left[k] = static_cast<uint32_t>(i);
  }
}

// Writes the CPU's results into the pieces' slots and counts.
__global__ void apply_kernel(const uint32_t* indexes, const int32_t* counts_in, const uint64_t* first, const uint32_t* ids,
                             uint64_t n, const BatchPiece* pieces, uint32_t* slots, int32_t* counts) {
  for (uint64_t k = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; k < n; k += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t i = indexes[k];
    const int32_t c = counts_in[k];
    uint32_t* to = slots + pieces[i].start;
    for (int32_t j = 0; j < c; ++j) to[j] = ids[first[k] + j];
    counts[i] = c;
  }
}

// A temporary device allocation from the stream-ordered pool, returned to it at scope exit.
class PoolBuffer {
 public:
  PoolBuffer(size_t bytes, cudaStream_t stream) : stream_(stream) {
    CRAYON_CUDA_CHECK(cudaMallocAsync(&data_, std::max<size_t>(bytes, 16), stream));
  }
  ~PoolBuffer() { cudaFreeAsync(data_, stream_); }
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  cudaStream_t stream_;
};

// Length buckets for the encode kernel: single-token pieces are most of them and short; long
// multi-token ones take a hundred times longer, so mixing them in a warp idles its other threads.
int bucket_of(uint32_t len) {
  if (len & kSpecialPiece) return 0;
  if (len <= 4) return 1;
  if (len <= 8) return 2;
  if (len <= 16) return 3;
  if (len <= 64) return 4;
  return 5;
}
constexpr int kBuckets = 6;

}  // namespace

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why != nullptr) *why = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (n == 0 && why != nullptr) *why = "no CUDA device found";
  return n;
}

DeviceBuffer::DeviceBuffer(int device, size_t bytes) : device_(device), bytes_(bytes) {
  ScopedDevice sd(device);
  CRAYON_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(bytes, 16)));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr) return;
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device_);
  cudaFree(data_);  // synchronizes: a consumer's pending work on the memory finishes first
  cudaSetDevice(previous);
}

void DeviceBuffer::to_host(void* dst, size_t bytes) const {
  ScopedDevice sd(device_);
  CRAYON_CUDA_CHECK(cudaMemcpy(dst, data_, std::min(bytes, bytes_), cudaMemcpyDeviceToHost));
}

struct DeviceEngine::Impl {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<void*> arrays;             // the tables' copies, freed with the engine
  piece::PieceTables* tables = nullptr;  // device copy of the struct, pointing at `arrays`

  template <class T>
  const T* upload(const T* host, uint64_t count) {
    if (host == nullptr) return nullptr;
    void* d = nullptr;
    CRAYON_CUDA_CHECK(cudaMalloc(&d, std::max<uint64_t>(count * sizeof(T), 16)));
    arrays.push_back(d);
    CRAYON_CUDA_CHECK(cudaMemcpy(d, host, count * sizeof(T), cudaMemcpyHostToDevice));
    return static_cast<const T*>(d);
  }
};

DeviceEngine::DeviceEngine(const piece::PieceTables& host, const TableSizes& sizes, int device)
    : device_(device), impl_(new Impl) {
  ScopedDevice sd(device);
  Impl& m = *impl_;
  try {
    CRAYON_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
    CRAYON_CUDA_CHECK(cudaEventCreate(&m.start));
    CRAYON_CUDA_CHECK(cudaEventCreate(&m.stop));
    // Keep freed pool memory for the next call instead of returning it to the driver.
    cudaMemPool_t pool;
    CRAYON_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t keep = ~uint64_t{0};
    CRAYON_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));

    piece::PieceTables d = host;  // byte_rank and the sizes carry over; pointers are replaced
    d.trie_units = m.upload(host.trie_units, uint64_t{host.trie_size} * 2);
    d.trie_values = m.upload(host.trie_values, host.trie_size);
    d.token_offsets = m.upload(host.token_offsets, uint64_t{host.n_ids} + 1);
    d.split_left = m.upload(host.split_left, host.n_ids);
    d.split_right = m.upload(host.split_right, host.n_ids);
    d.slow = m.upload(host.slow, host.n_ids);
    d.pairs = m.upload(host.pairs, host.pair_capacity);
    d.bloom = sizes.bloom_words > 0 ? m.upload(host.bloom, sizes.bloom_words) : nullptr;
    void* t = nullptr;
    CRAYON_CUDA_CHECK(cudaMalloc(&t, sizeof d));
    m.arrays.push_back(t);
    CRAYON_CUDA_CHECK(cudaMemcpy(t, &d, sizeof d, cudaMemcpyHostToDevice));
    m.tables = static_cast<piece::PieceTables*>(t);
  } catch (...) {
    for (void* p : m.arrays) cudaFree(p);
    if (m.start) cudaEventDestroy(m.start);
    if (m.stop) cudaEventDestroy(m.stop);
    if (m.stream) cudaStreamDestroy(m.stream);
    throw;
  }
}

DeviceEngine::~DeviceEngine() {
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(device_);
  Impl& m = *impl_;
  cudaStreamSynchronize(m.stream);
  for (void* p : m.arrays) cudaFree(p);
  cudaEventDestroy(m.start);
  cudaEventDestroy(m.stop);
  cudaStreamDestroy(m.stream);
  cudaSetDevice(previous);
}

BatchOutput DeviceEngine::encode(const BatchInput& in, const ReferenceFn& reference, const HostSink* host) {
  ScopedDevice sd(device_);
  Impl& m = *impl_;
  const cudaStream_t s = m.stream;
  const uint64_t n = in.n_pieces;
  BatchOutput out;

  // Pieces grouped by length bucket (a counting sort; stable within a bucket).
  std::vector<uint32_t> order(n);
  {
    std::array<uint64_t, kBuckets + 1> start{};
    for (uint64_t i = 0; i < n; ++i) ++start[bucket_of(in.pieces[i].len) + 1];
    for (int b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
    for (uint64_t i = 0; i < n; ++i) order[start[bucket_of(in.pieces[i].len)]++] = static_cast<uint32_t>(i);
  }

  PoolBuffer text(in.text_bytes, s), pieces(n * sizeof(BatchPiece), s), order_d(n * sizeof(uint32_t), s);
  PoolBuffer slots(in.text_bytes * sizeof(uint32_t), s), counts((n + 1) * sizeof(int32_t), s);
  PoolBuffer positions((n + 1) * sizeof(uint32_t), s), doc_pieces(in.n_docs * sizeof(uint64_t) + sizeof(uint64_t), s);
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(text.as<void>(), in.text, in.text_bytes, cudaMemcpyHostToDevice, s));
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(pieces.as<void>(), in.pieces, n * sizeof(BatchPiece), cudaMemcpyHostToDevice, s));
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(order_d.as<void>(), order.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice, s));
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(doc_pieces.as<void>(), in.doc_pieces, (in.n_docs + 1) * sizeof(uint64_t),
                                    cudaMemcpyHostToDevice, s));
  CRAYON_CUDA_CHECK(cudaMemsetAsync(counts.as<int32_t>() + n, 0, sizeof(int32_t), s));

  const EncodeStage stage{m.tables, text.as<uint8_t>(), pieces.as<BatchPiece>(), slots.as<uint32_t>(),
                          counts.as<int32_t>()};
  CRAYON_CUDA_CHECK(cudaEventRecord(m.start, s));
  if (n > 0) encode_kernel<<<blocks_for(n), kThreads, 0, s>>>(stage, order_d.as<uint32_t>(), n);
  CRAYON_CUDA_CHECK(cudaGetLastError());
  CRAYON_CUDA_CHECK(cudaEventRecord(m.stop, s));

  // Meanwhile, on this thread: the long pieces, which the kernel leaves to the CPU.
  std::vector<uint32_t> fix_index(in.long_pieces, in.long_pieces + in.n_long);
  std::vector<int32_t> fix_count;
  std::vector<uint32_t> fix_ids;
  if (!fix_index.empty()) reference(fix_index.data(), fix_index.size(), fix_count, fix_ids);

  // Then the pieces the kernel could not decide (slow pairs, bytes without a token).
  PoolBuffer left_n(sizeof(unsigned long long), s);
  CRAYON_CUDA_CHECK(cudaMemsetAsync(left_n.as<void>(), 0, sizeof(unsigned long long), s));
  const uint64_t left_cap = std::max<uint64_t>(n / 64, 1024);
  PoolBuffer left(left_cap * sizeof(uint32_t), s);
  if (n > 0) {
    collect_left_kernel<<<blocks_for(n), kThreads, 0, s>>>(counts.as<int32_t>(), pieces.as<BatchPiece>(), n,
                                                           left.as<uint32_t>(), left_n.as<unsigned long long>(), left_cap);
  }
  CRAYON_CUDA_CHECK(cudaGetLastError());
  unsigned long long n_left = 0;
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(&n_left, left_n.as<void>(), sizeof n_left, cudaMemcpyDeviceToHost, s));
  CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<uint32_t> left_index;
  if (n_left > left_cap) {
    // More than the list holds (a vocabulary where many pairs are slow): take every count back.
    std::vector<int32_t> all(n);
    CRAYON_CUDA_CHECK(cudaMemcpy(all.data(), counts.as<void>(), n * sizeof(int32_t), cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < n; ++i) {
      if (all[i] < 0 && in.pieces[i].len <= kDevicePieceMax) left_index.push_back(static_cast<uint32_t>(i));
    }
  } else {
    left_index.resize(n_left);
    CRAYON_CUDA_CHECK(cudaMemcpy(left_index.data(), left.as<void>(), n_left * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  }
  out.n_left = left_index.size();
  if (!left_index.empty()) {
    std::vector<int32_t> c;
    std::vector<uint32_t> ids;
    reference(left_index.data(), left_index.size(), c, ids);
    fix_index.insert(fix_index.end(), left_index.begin(), left_index.end());
    fix_count.insert(fix_count.end(), c.begin(), c.end());
    fix_ids.insert(fix_ids.end(), ids.begin(), ids.end());
  }
  float ms = 0;
  CRAYON_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  out.kernel_ms = ms;

  if (!fix_index.empty()) {
    const uint64_t nf = fix_index.size();
    std::vector<uint64_t> first(nf);
    uint64_t at = 0;
    for (uint64_t k = 0; k < nf; ++k) {
      first[k] = at;
      at += static_cast<uint64_t>(fix_count[k]);
    }
    PoolBuffer fi(nf * sizeof(uint32_t), s), fc(nf * sizeof(int32_t), s), ff(nf * sizeof(uint64_t), s);
    PoolBuffer fids(fix_ids.size() * sizeof(uint32_t), s);
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fi.as<void>(), fix_index.data(), nf * sizeof(uint32_t), cudaMemcpyHostToDevice, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fc.as<void>(), fix_count.data(), nf * sizeof(int32_t), cudaMemcpyHostToDevice, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(ff.as<void>(), first.data(), nf * sizeof(uint64_t), cudaMemcpyHostToDevice, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fids.as<void>(), fix_ids.data(), fix_ids.size() * sizeof(uint32_t),
                                      cudaMemcpyHostToDevice, s));
    apply_kernel<<<blocks_for(nf), kThreads, 0, s>>>(fi.as<uint32_t>(), fc.as<int32_t>(), ff.as<uint64_t>(),
                                                     fids.as<uint32_t>(), nf, pieces.as<BatchPiece>(),
                                                     slots.as<uint32_t>(), counts.as<int32_t>());
    CRAYON_CUDA_CHECK(cudaGetLastError());
    CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));  // the host vectors above go out of scope
  }

  // Counts -> first output position of each piece (every count is >= 0 now).
  size_t temp_bytes = 0;
  const uint32_t* counts_u = reinterpret_cast<const uint32_t*>(counts.as<int32_t>());
  CRAYON_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, counts_u, positions.as<uint32_t>(),
                                                  static_cast<int64_t>(n + 1), s));
  PoolBuffer temp(temp_bytes, s);
  CRAYON_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(temp.as<void>(), temp_bytes, counts_u, positions.as<uint32_t>(),
                                                  static_cast<int64_t>(n + 1), s));
  uint32_t total = 0;
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(&total, positions.as<uint32_t>() + n, sizeof total, cudaMemcpyDeviceToHost, s));
  CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
  out.n_tokens = total;

  // Gather into the output: a pooled buffer copied back, or buffers the caller will own.
  std::unique_ptr<PoolBuffer> pooled_ids, pooled_offsets;
  uint32_t* ids_d;
  int64_t* offsets_d;
  if (host != nullptr) {
    pooled_ids.reset(new PoolBuffer(uint64_t{total} * sizeof(uint32_t), s));
    pooled_offsets.reset(new PoolBuffer((in.n_docs + 1) * sizeof(int64_t), s));
    ids_d = pooled_ids->as<uint32_t>();
    offsets_d = pooled_offsets->as<int64_t>();
  } else {
    out.ids = std::make_shared<DeviceBuffer>(device_, uint64_t{total} * sizeof(uint32_t));
    out.offsets = std::make_shared<DeviceBuffer>(device_, (in.n_docs + 1) * sizeof(int64_t));
    ids_d = static_cast<uint32_t*>(out.ids->data());
    offsets_d = static_cast<int64_t*>(out.offsets->data());
  }
  if (n > 0) {
    for_each_kernel<<<blocks_for(n), kThreads, 0, s>>>(
        GatherStage{pieces.as<BatchPiece>(), slots.as<uint32_t>(), positions.as<uint32_t>(), ids_d}, n);
    CRAYON_CUDA_CHECK(cudaGetLastError());
  }
  for_each_kernel<<<blocks_for(in.n_docs + 1), kThreads, 0, s>>>(
      DocOffsetsStage{doc_pieces.as<uint64_t>(), positions.as<uint32_t>(), offsets_d}, in.n_docs + 1);
  CRAYON_CUDA_CHECK(cudaGetLastError());
  if (host != nullptr) {
    uint32_t* dst = host->ids(total);
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(dst, ids_d, uint64_t{total} * sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(host->offsets, offsets_d, (in.n_docs + 1) * sizeof(int64_t),
                                      cudaMemcpyDeviceToHost, s));
  }
  CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
  return out;
}

}  // namespace cuda
}  // namespace crayon
