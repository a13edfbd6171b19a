// The CUDA batch engine (device_engine.h): the batch stages of engines/batch_stages.h as kernels.
#include "cuda/device_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

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

// Pieces that `want` selects, listed as (index, start, length) through an atomic counter; a list
// longer than `capacity` only counts (the caller then takes every count back instead).
struct PieceList {
  uint32_t* index;
  uint32_t* start;
  uint32_t* len;
  unsigned long long* n;
  uint64_t capacity;

  __device__ void add(uint64_t k, uint32_t s, uint32_t l) const {
    const unsigned long long at = atomicAdd(n, 1ull);
    if (at < capacity) {
      index[at] = static_cast<uint32_t>(k);
      start[at] = s;
      len[at] = l;
    }
  }
};

// The pieces over kDevicePieceMax bytes: the CPU's, known before the encode kernel starts.
__global__ void list_long_kernel(const uint8_t* marks, const uint32_t* starts, uint64_t n, PieceList out) {
  for (uint64_t k = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; k < n; k += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t s = starts[k], l = starts[k + 1] - starts[k];
    if (marks[s] == kMarkPiece && l > kDevicePieceMax) out.add(k, s, l);
  }
}

// The pieces the encode kernel left (count < 0), except the long ones the CPU already has.
__global__ void list_left_kernel(const int32_t* counts, const uint32_t* starts, uint64_t n, PieceList out) {
  for (uint64_t k = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; k < n; k += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t s = starts[k], l = starts[k + 1] - starts[k];
    if (counts[k] < 0 && l <= kDevicePieceMax) out.add(k, s, l);
  }
}

// Writes the CPU's results into the pieces' slots and counts.
__global__ void apply_kernel(const uint32_t* indexes, const int32_t* counts_in, const uint64_t* first, const uint32_t* ids,
                             uint64_t n, const uint32_t* starts, uint32_t* slots, int32_t* counts) {
  for (uint64_t j = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; j < n; j += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t k = indexes[j];
    const int32_t c = counts_in[j];
    uint32_t* to = slots + starts[k];
    for (int32_t i = 0; i < c; ++i) to[i] = ids[first[j] + i];
    counts[k] = c;
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

// memcpy on several threads: one thread moves ~5-10 GB/s, less than a PCIe or C2C link.
void parallel_copy(void* dst, const void* src, size_t bytes) {
  constexpr size_t kSlice = 4 << 20;
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>({hw, 16, bytes / kSlice + 1});
  if (threads <= 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  const size_t per = (bytes + threads - 1) / threads;
  auto part = [&](size_t t) {
    const size_t a = std::min(bytes, t * per), b = std::min(bytes, a + per);
    if (b > a) std::memcpy(static_cast<char*>(dst) + a, static_cast<const char*>(src) + a, b - a);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(part, t);
  part(0);
  for (std::thread& th : pool) th.join();
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

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
  // Pinned host memory for the copies both ways (grow-only): DMA from it runs at the link's
  // speed, where pageable memory goes through the driver's small staging buffers.
  void* pinned = nullptr;
  size_t pinned_bytes = 0;

  uint64_t marks_at = 0;  // the marks' offset in `pinned` for the batch reserved last

  void* staging(size_t bytes) {
    if (bytes > pinned_bytes) {
      const size_t grown = std::max(bytes, pinned_bytes + pinned_bytes / 2);
      if (pinned != nullptr) cudaFreeHost(pinned);
      pinned = nullptr;
      pinned_bytes = 0;
      CRAYON_CUDA_CHECK(cudaHostAlloc(&pinned, grown, cudaHostAllocDefault));
      pinned_bytes = grown;
    }
    return pinned;
  }

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
  if (m.pinned != nullptr) cudaFreeHost(m.pinned);
  cudaEventDestroy(m.start);
  cudaEventDestroy(m.stop);
  cudaStreamDestroy(m.stream);
  cudaSetDevice(previous);
}

namespace {
uint64_t align16(uint64_t x) { return (x + 15) & ~uint64_t{15}; }
}  // namespace

void DeviceEngine::reserve_staging(uint64_t bytes) {
  ScopedDevice sd(device_);
  impl_->marks_at = align16(bytes);
  impl_->staging(impl_->marks_at + bytes);
}
uint8_t* DeviceEngine::staging_text() const { return static_cast<uint8_t*>(impl_->pinned); }
uint8_t* DeviceEngine::staging_marks() const { return static_cast<uint8_t*>(impl_->pinned) + impl_->marks_at; }

BatchOutput DeviceEngine::encode(const BatchInput& in, const ReferenceFn& reference, const HostSink* host) {
  ScopedDevice sd(device_);
  Impl& m = *impl_;
  const cudaStream_t s = m.stream;
  const uint64_t bytes = in.text_bytes;
  if (bytes > 0 && (m.pinned == nullptr || m.marks_at != align16(bytes))) {
    throw std::logic_error("DeviceEngine::encode: the batch was not staged with reserve_staging");
  }
  BatchOutput out;
  const auto t0 = std::chrono::steady_clock::now();

  // The upload: text and marks in one copy from pinned memory, then the small arrays.
  const uint64_t upload_bytes = m.marks_at + bytes;
  PoolBuffer upload(upload_bytes, s);
  if (bytes > 0) CRAYON_CUDA_CHECK(cudaMemcpyAsync(upload.as<char>(), m.pinned, upload_bytes, cudaMemcpyHostToDevice, s));
  const uint8_t* text_d = upload.as<uint8_t>();
  const uint8_t* marks_d = upload.as<uint8_t>() + m.marks_at;
  PoolBuffer docs(align16((in.n_docs + 1) * sizeof(uint64_t)), s), specials(in.n_specials * sizeof(SpecialAt), s);
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(docs.as<void>(), in.doc_bytes, (in.n_docs + 1) * sizeof(uint64_t),
                                    cudaMemcpyHostToDevice, s));
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(specials.as<void>(), in.specials, in.n_specials * sizeof(SpecialAt),
                                    cudaMemcpyHostToDevice, s));

  // Piece starts: every marked byte, then the text's size.
  PoolBuffer starts((bytes + 1) * sizeof(uint32_t), s), n_sel(sizeof(uint64_t), s);
  size_t temp_bytes = 0;
  const thrust::counting_iterator<uint32_t> byte_index(0);
  CRAYON_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, temp_bytes, byte_index, marks_d, starts.as<uint32_t>(),
                                               n_sel.as<uint64_t>(), static_cast<int64_t>(bytes), s));
  {
    PoolBuffer temp(temp_bytes, s);
    CRAYON_CUDA_CHECK(cub::DeviceSelect::Flagged(temp.as<void>(), temp_bytes, byte_index, marks_d,
                                                 starts.as<uint32_t>(), n_sel.as<uint64_t>(),
                                                 static_cast<int64_t>(bytes), s));
  }
  uint64_t n = 0;
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(&n, n_sel.as<void>(), sizeof n, cudaMemcpyDeviceToHost, s));
  CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
  const uint32_t end = static_cast<uint32_t>(bytes);
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(starts.as<uint32_t>() + n, &end, sizeof end, cudaMemcpyHostToDevice, s));
  out.n_pieces = n;

  // The long pieces, listed first so the CPU can take them while the encode kernel runs. Each is
  // over kDevicePieceMax bytes, so the list cannot overflow.
  const uint64_t long_cap = bytes / (kDevicePieceMax + 1) + 1;
  PoolBuffer long_index(long_cap * 4, s), long_start(long_cap * 4, s), long_len(long_cap * 4, s);
  PoolBuffer long_n(sizeof(unsigned long long), s);
  CRAYON_CUDA_CHECK(cudaMemsetAsync(long_n.as<void>(), 0, sizeof(unsigned long long), s));
  const PieceList longs{long_index.as<uint32_t>(), long_start.as<uint32_t>(), long_len.as<uint32_t>(),
                        long_n.as<unsigned long long>(), long_cap};
  if (n > 0) list_long_kernel<<<blocks_for(n), kThreads, 0, s>>>(marks_d, starts.as<uint32_t>(), n, longs);
  CRAYON_CUDA_CHECK(cudaGetLastError());
  unsigned long long n_long = 0;
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(&n_long, long_n.as<void>(), sizeof n_long, cudaMemcpyDeviceToHost, s));
  CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<uint32_t> fix_index(n_long), fix_start(n_long), fix_len(n_long);
  if (n_long > 0) {
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fix_index.data(), long_index.as<void>(), n_long * 4, cudaMemcpyDeviceToHost, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fix_start.data(), long_start.as<void>(), n_long * 4, cudaMemcpyDeviceToHost, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fix_len.data(), long_len.as<void>(), n_long * 4, cudaMemcpyDeviceToHost, s));
  }
  out.n_long = n_long;

  // Specials into their slots, then the encode kernel.
  PoolBuffer slots(bytes * sizeof(uint32_t), s), counts((n + 1) * sizeof(int32_t), s);
  PoolBuffer positions((n + 1) * sizeof(uint32_t), s);
  CRAYON_CUDA_CHECK(cudaMemsetAsync(counts.as<int32_t>() + n, 0, sizeof(int32_t), s));
  if (in.n_specials > 0) {
    for_each_kernel<<<blocks_for(in.n_specials), kThreads, 0, s>>>(
        PresetSpecialsStage{specials.as<SpecialAt>(), slots.as<uint32_t>()}, in.n_specials);
  }
  const EncodeStage stage{m.tables, text_d, marks_d, starts.as<uint32_t>(), slots.as<uint32_t>(), counts.as<int32_t>()};
  CRAYON_CUDA_CHECK(cudaEventRecord(m.start, s));
  if (n > 0) for_each_kernel<<<blocks_for(n), kThreads, 0, s>>>(stage, n);
  CRAYON_CUDA_CHECK(cudaGetLastError());
  CRAYON_CUDA_CHECK(cudaEventRecord(m.stop, s));
  out.upload_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();

  // Meanwhile, on this thread: the long pieces (their lists were copied before the kernel).
  std::vector<int32_t> fix_count;
  std::vector<uint32_t> fix_ids;
  if (n_long > 0) reference(fix_start.data(), fix_len.data(), n_long, fix_count, fix_ids);

  // Then the pieces the kernel could not decide (slow pairs, bytes without a token).
  const uint64_t left_cap = std::max<uint64_t>(n / 64, 1024);
  PoolBuffer left_index(left_cap * 4, s), left_start(left_cap * 4, s), left_len(left_cap * 4, s);
  PoolBuffer left_n(sizeof(unsigned long long), s);
  CRAYON_CUDA_CHECK(cudaMemsetAsync(left_n.as<void>(), 0, sizeof(unsigned long long), s));
  const PieceList lefts{left_index.as<uint32_t>(), left_start.as<uint32_t>(), left_len.as<uint32_t>(),
                        left_n.as<unsigned long long>(), left_cap};
  if (n > 0) list_left_kernel<<<blocks_for(n), kThreads, 0, s>>>(counts.as<int32_t>(), starts.as<uint32_t>(), n, lefts);
  CRAYON_CUDA_CHECK(cudaGetLastError());
  unsigned long long n_left = 0;
  CRAYON_CUDA_CHECK(cudaMemcpyAsync(&n_left, left_n.as<void>(), sizeof n_left, cudaMemcpyDeviceToHost, s));
  CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<uint32_t> li, ls, ll;
  if (n_left > left_cap) {
    // More than the list holds (a vocabulary where many pairs are slow): take every count back.
    std::vector<int32_t> all(n);
    std::vector<uint32_t> st(n + 1);
    CRAYON_CUDA_CHECK(cudaMemcpy(all.data(), counts.as<void>(), n * sizeof(int32_t), cudaMemcpyDeviceToHost));
    CRAYON_CUDA_CHECK(cudaMemcpy(st.data(), starts.as<void>(), (n + 1) * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    for (uint64_t k = 0; k < n; ++k) {
      if (all[k] < 0 && st[k + 1] - st[k] <= kDevicePieceMax) {
        li.push_back(static_cast<uint32_t>(k));
        ls.push_back(st[k]);
        ll.push_back(st[k + 1] - st[k]);
      }
    }
  } else if (n_left > 0) {
    li.resize(n_left);
    ls.resize(n_left);
    ll.resize(n_left);
    CRAYON_CUDA_CHECK(cudaMemcpy(li.data(), left_index.as<void>(), n_left * 4, cudaMemcpyDeviceToHost));
    CRAYON_CUDA_CHECK(cudaMemcpy(ls.data(), left_start.as<void>(), n_left * 4, cudaMemcpyDeviceToHost));
    CRAYON_CUDA_CHECK(cudaMemcpy(ll.data(), left_len.as<void>(), n_left * 4, cudaMemcpyDeviceToHost));
  }
  out.n_left = li.size();
  if (!li.empty()) {
    std::vector<int32_t> c;
    std::vector<uint32_t> ids;
    reference(ls.data(), ll.data(), li.size(), c, ids);
    fix_index.insert(fix_index.end(), li.begin(), li.end());
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
    for (uint64_t j = 0; j < nf; ++j) {
      first[j] = at;
      at += static_cast<uint64_t>(fix_count[j]);
    }
    PoolBuffer fi(nf * sizeof(uint32_t), s), fc(nf * sizeof(int32_t), s), ff(nf * sizeof(uint64_t), s);
    PoolBuffer fids(fix_ids.size() * sizeof(uint32_t), s);
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fi.as<void>(), fix_index.data(), nf * sizeof(uint32_t), cudaMemcpyHostToDevice, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fc.as<void>(), fix_count.data(), nf * sizeof(int32_t), cudaMemcpyHostToDevice, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(ff.as<void>(), first.data(), nf * sizeof(uint64_t), cudaMemcpyHostToDevice, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(fids.as<void>(), fix_ids.data(), fix_ids.size() * sizeof(uint32_t),
                                      cudaMemcpyHostToDevice, s));
    apply_kernel<<<blocks_for(nf), kThreads, 0, s>>>(fi.as<uint32_t>(), fc.as<int32_t>(), ff.as<uint64_t>(),
                                                     fids.as<uint32_t>(), nf, starts.as<uint32_t>(),
                                                     slots.as<uint32_t>(), counts.as<int32_t>());
    CRAYON_CUDA_CHECK(cudaGetLastError());
    CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));  // the host vectors above go out of scope
  }
  out.fix_ms = ms_since(t1);
  const auto t2 = std::chrono::steady_clock::now();

  // Counts -> first output position of each piece (every count is >= 0 now).
  const uint32_t* counts_u = reinterpret_cast<const uint32_t*>(counts.as<int32_t>());
  temp_bytes = 0;
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
        GatherStage{starts.as<uint32_t>(), slots.as<uint32_t>(), positions.as<uint32_t>(), ids_d}, n);
    CRAYON_CUDA_CHECK(cudaGetLastError());
  }
  for_each_kernel<<<blocks_for(in.n_docs + 1), kThreads, 0, s>>>(
      DocOffsetsStage{docs.as<uint64_t>(), starts.as<uint32_t>(), n, positions.as<uint32_t>(), offsets_d}, in.n_docs + 1);
  CRAYON_CUDA_CHECK(cudaGetLastError());
  if (host != nullptr) {
    // Back through pinned memory (after the upload's bytes, which are no longer needed), then
    // into the caller's arrays on several threads.
    const uint64_t ids_bytes = uint64_t{total} * sizeof(uint32_t);
    const uint64_t off_at = align16(ids_bytes);
    CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
    char* back = static_cast<char*>(m.staging(off_at + (in.n_docs + 1) * sizeof(int64_t)));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(back, ids_d, ids_bytes, cudaMemcpyDeviceToHost, s));
    CRAYON_CUDA_CHECK(cudaMemcpyAsync(back + off_at, offsets_d, (in.n_docs + 1) * sizeof(int64_t),
                                      cudaMemcpyDeviceToHost, s));
    uint32_t* dst = host->ids(total);
    CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
    parallel_copy(dst, back, ids_bytes);
    std::memcpy(host->offsets, back + off_at, (in.n_docs + 1) * sizeof(int64_t));
  }
  CRAYON_CUDA_CHECK(cudaStreamSynchronize(s));
  out.tail_ms = ms_since(t2);
  return out;
}

}  // namespace cuda
}  // namespace crayon
