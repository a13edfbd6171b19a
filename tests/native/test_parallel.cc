// Standalone test of parallel_for's worker pool (native/core/parallel.cc): no framework, a CHECK macro
// and the exit status.
//
//   g++ -O2 -std=c++17 -pthread -I native native/core/parallel.cc tests/native/test_parallel.cc
//       -o /tmp/tp && /tmp/tp [--no-fork]
//
// Checked: every index runs exactly once, for any n and thread count; the first exception reaches
// the caller and the pool keeps working; the pool's threads are the same from call to call, so
// their thread_local state survives (what the word caches rely on); many callers at once and
// nested calls neither deadlock nor lose work; and a forked child, even one forked while another
// thread was inside a job, gets a working pool of its own. Run it under -fsanitize=thread too
// (with --no-fork: ThreadSanitizer does not support threads started after a multi-threaded fork).
#include "core/parallel.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

using crayon::parallel_for;

namespace {

int g_failures = 0;

#define CHECK(cond)                                                                       \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      if (++g_failures <= 20) std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                                     \
  } while (0)

// Runs parallel_for(n, threads) and checks that every index ran exactly once.
bool covers_once(size_t n, size_t threads) {
  std::vector<std::atomic<int>> hits(n);
  for (auto& h : hits) h.store(0);
  parallel_for(n, threads, [&](size_t i) { hits[i].fetch_add(1, std::memory_order_relaxed); });
  for (auto& h : hits)
    if (h.load() != 1) return false;
  return true;
}

void test_coverage() {
  for (size_t n : {0, 1, 2, 3, 7, 64, 1000, 100000})
    for (size_t threads : {0, 1, 2, 3, 8, 64}) CHECK(covers_once(n, threads));
}

void test_exceptions() {
  for (int round = 0; round < 50; ++round) {
    bool caught = false;
    try {
      parallel_for(1000, 0, [&](size_t i) {
        if (i == static_cast<size_t>(round) * 7) throw std::runtime_error("boom");
      });
    } catch (const std::runtime_error& e) {
      caught = std::strcmp(e.what(), "boom") == 0;
    }
    CHECK(caught);
    CHECK(covers_once(1000, 0));  // the pool still works, and nothing of the failed job lingers
  }
}

// The pool's workers are the same threads from call to call: their thread_local state survives.
void test_threads_persist() {
  thread_local int calls_on_this_thread = 0;
  std::mutex m;
  std::set<std::thread::id> seen;
  std::atomic<int> warm{0};
  for (int call = 0; call < 100; ++call) {
    parallel_for(256, 0, [&](size_t) {
      if (calls_on_this_thread++ > 0) warm.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(m);
      seen.insert(std::this_thread::get_id());
    });
  }
  CHECK(seen.size() <= crayon::hardware_threads());  // a thread per call would make ~100
  CHECK(warm.load() >= 100 * 256 - static_cast<int>(crayon::hardware_threads()));
  CHECK(crayon::pool_workers() + 1 >= seen.size());
}

// Callers on many threads at once (the GIL is released during batches): each call does all of
// its own work, whether it got the pool or ran inline.
void test_concurrent_callers() {
  std::atomic<int> bad{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&, t] {
      for (int call = 0; call < 200; ++call) {
        const size_t n = 1 + static_cast<size_t>((t * 131 + call * 17) % 500);
        if (!covers_once(n, 0)) bad.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  CHECK(bad.load() == 0);
}

// fn calling parallel_for runs the inner call inline (the pool is busy with the outer one).
void test_nested() {
  std::atomic<size_t> total{0};
  parallel_for(64, 0, [&](size_t) {
    parallel_for(100, 0, [&](size_t) { total.fetch_add(1, std::memory_order_relaxed); });
  });
  CHECK(total.load() == 6400);
}

// Forks, runs body in the child (exit status 0 when it passes) and waits at most 20 s for it.
bool child_passes(void (*body)()) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(20);  // a deadlocked child dies of SIGALRM instead of hanging the test
    body();
    std::_Exit(g_failures == 0 ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void child_uses_pool() {
  CHECK(crayon::pool_workers() == 0);  // the parent's workers do not exist here
  for (int call = 0; call < 20; ++call) CHECK(covers_once(10000, 0));
  CHECK(crayon::hardware_threads() == 1 || crayon::pool_workers() >= 1);
  CHECK(child_passes([] { CHECK(covers_once(10000, 0)); }));  // and a grandchild
}

void test_fork() {
  CHECK(covers_once(10000, 0));  // the parent's pool is running
  CHECK(child_passes(child_uses_pool));
  // Fork while another thread is inside a job: the parent's pool mutex may be held at fork time.
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop.load()) covers_once(5000, 0);
  });
  for (int i = 0; i < 20; ++i) CHECK(child_passes(child_uses_pool));
  stop = true;
  busy.join();
  CHECK(covers_once(10000, 0));  // and the parent's pool is unaffected
}

}  // namespace

int main(int argc, char** argv) {
  const bool fork_tests = !(argc > 1 && std::strcmp(argv[1], "--no-fork") == 0);
  const auto t0 = std::chrono::steady_clock::now();
  test_coverage();
  test_exceptions();
  test_threads_persist();
  test_concurrent_callers();
  test_nested();
  if (fork_tests) test_fork();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("parallel_for pool: %s (%zu hardware threads, %zu workers, %.0f ms)\n",
              g_failures == 0 ? "ok" : "FAILED", crayon::hardware_threads(), crayon::pool_workers(), ms);
  return g_failures == 0 ? 0 : 1;
}
