// parallel_for: run fn(i) for i in [0, n) on up to `threads` OS threads (the caller's thread is one
// of them). Work is handed out one index at a time from an atomic counter, so a few long
// documents do not leave the other threads idle. The first exception thrown by fn is rethrown in
// the caller after every thread has stopped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace crayon {

// std::thread::hardware_concurrency() reads /sys on every call (microseconds): ask once.
inline size_t hardware_threads() {
  static const size_t hw = std::max<size_t>(1, std::thread::hardware_concurrency());
  return hw;
}

template <class F>
void parallel_for(size_t n, size_t threads, F&& fn) {
  if (n <= 1 || threads == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const size_t hw = hardware_threads();
  threads = std::min({threads == 0 ? hw : threads, hw, n});
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&]() {
    try {
      for (size_t i; !stop.load(std::memory_order_relaxed) && (i = next.fetch_add(1)) < n;) fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace crayon
