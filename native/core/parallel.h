// parallel_for: run fn(i) for i in [0, n) on up to `threads` threads, the caller's among them.
//
//   caller --parallel_for(n, threads)--> threads == 1, n <= 1, or pool busy: fn(0..n) inline
//          --else--> publish the job to the pool; workers 0..threads-2 and the caller each take
//                    the next index from an atomic counter until n (or until fn throws)
//          <-- the caller returns once every helper has left the job; the first exception
//              thrown by fn is rethrown here
//
// Work goes out one index at a time, so a few long documents do not leave the other threads
// idle. `threads == 0` means every hardware thread; more than that is clamped to it.
//
// The workers are one process-wide pool (parallel.cc), started on first use and asleep on a
// condition variable between calls. Threads started per call cost a thread start each, and every
// call met cold per-thread state (word_cache.h's word caches, the backtracking encoder's pair
// memo, scratch buffers) on all threads but the caller's; pool worker k is the same thread from
// one call to the next, so its caches are as warm as the caller's. That matters most for the
// small batches a map() over a dataset makes (benchmarks/scaling.py --batch-size).
//
// Concurrency: one job at a time. A call that finds the pool busy (another Python thread's batch,
// or fn itself calling parallel_for) runs inline on its own thread: concurrent callers already
// keep cores busy, and a nested call must never wait for the pool it runs on.
//
// Fork: a forked child has none of the parent's threads, and the pool's mutex may have been held
// at fork time. The pool remembers the pid that made it; a call from another process leaves that
// pool untouched (leaked) and makes a fresh one, with fresh workers.
//
// Exit: the pool is never destroyed and its threads are detached; they sleep in a wait when the
// process exits, and nothing of the pool runs at exit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <thread>
#include <type_traits>

namespace crayon {

// std::thread::hardware_concurrency() reads /sys on every call (microseconds): ask once.
inline size_t hardware_threads() {
  static const size_t hw = std::max<size_t>(1, std::thread::hardware_concurrency());
  return hw;
}

namespace detail {

using IndexFn = void (*)(void* ctx, size_t i);

// Runs call(ctx, i) for every i in [0, n) on `threads` (>= 2) threads: the caller and pool
// workers, or the caller alone when the pool is busy. Rethrows the first exception.
void run_parallel(size_t n, size_t threads, IndexFn call, void* ctx);

}  // namespace detail

// Workers this process's pool has started (0 before the first parallel call, and in a forked
// child until its first one). For tests and diagnostics.
size_t pool_workers();

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
  using Fn = std::remove_reference_t<F>;
  auto* ctx = const_cast<std::remove_const_t<Fn>*>(std::addressof(fn));
  detail::run_parallel(n, threads, [](void* c, size_t i) { (*static_cast<Fn*>(c))(i); }, ctx);
}

}  // namespace crayon
