// The process-wide worker pool behind parallel_for (see parallel.h for the contract).
//
//   run_parallel --try_acquire--> busy: inline on the caller
//                --start_workers(threads - 1)--> publish {job, generation + 1} under mutex_,
//                  notify_all --> workers whose index < job.helpers run job.work()
//                --caller runs job.work() too, then waits on done_ until active_ == 0
//
// Invariants:
//   - Only the thread holding busy_ publishes jobs, starts workers or reads started_ for writing;
//     so one job at a time, and generation_ changes only under busy_ (and mutex_).
//   - A job stays published (job_ set) until every helper counted in active_ has finished it:
//     no helper can miss the job it was counted for, and job_ (on the caller's stack) outlives
//     every worker's use of it. A worker that is not a helper may sleep through jobs; it only
//     compares generations.
//   - A worker starts with the generation current when it was made, so the job about to be
//     published is new to it, and it never mistakes an older one for new.
#include "core/parallel.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>

#ifdef _WIN32
#include <process.h>
#else
#include <unistd.h>
#endif

namespace crayon {
namespace {

long current_pid() {
#ifdef _WIN32
  return static_cast<long>(_getpid());
#else
  return static_cast<long>(getpid());
#endif
}

// One parallel_for call as the pool sees it; it lives on the caller's stack.
struct Job {
  size_t n = 0;
  size_t helpers = 0;  // pool workers 0..helpers-1 take part
  detail::IndexFn call = nullptr;
  void* ctx = nullptr;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr error;

  void work() noexcept {
    try {
      for (size_t i; !stop.load(std::memory_order_relaxed) && (i = next.fetch_add(1, std::memory_order_relaxed)) < n;)
        call(ctx, i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      stop.store(true, std::memory_order_relaxed);
    }
  }
};

class Pool {
 public:
  explicit Pool(long pid) : pid_(pid) {}

  long pid() const { return pid_; }
  size_t workers() const { return started_.load(std::memory_order_relaxed); }

  bool try_acquire() { return !busy_.exchange(true, std::memory_order_acquire); }
  void release() { busy_.store(false, std::memory_order_release); }

  // With the pool acquired: runs the job on the caller and up to job.helpers workers, and returns
  // once all of them have left it.
  void run(Job& job) {
    job.helpers = start_workers(job.helpers);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      active_ = job.helpers;
      ++generation_;
    }
    wake_.notify_all();
    job.work();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0; });
    job_ = nullptr;
  }

 private:
  // Starts workers until `want` exist, or until the system refuses a thread; returns how many of
  // the wanted ones exist.
  size_t start_workers(size_t want) {
    size_t have = started_.load(std::memory_order_relaxed);
    for (; have < want; ++have) {
      try {
        std::thread(&Pool::worker, this, have, generation_).detach();
      } catch (const std::system_error&) {
        break;  // fewer helpers; the caller still does the whole job if need be
      }
      started_.store(have + 1, std::memory_order_relaxed);
    }
    return std::min(want, have);
  }

  void worker(size_t index, uint64_t seen) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      Job* job = job_;
      if (job == nullptr || index >= job->helpers) continue;  // not ours, or over before we woke
      lock.unlock();
      job->work();
      lock.lock();
      if (--active_ == 0) done_.notify_one();
    }
  }

  const long pid_;
  std::atomic<bool> busy_{false};
  std::atomic<size_t> started_{0};
  std::mutex mutex_;
  std::condition_variable wake_;  // a job was published
  std::condition_variable done_;  // the last helper left the job
  uint64_t generation_ = 0;       // jobs published so far
  Job* job_ = nullptr;
  size_t active_ = 0;             // helpers still in job_
};

// Never destroyed (no destructor may run at exit while a worker sleeps on the pool's mutex).
std::atomic<Pool*> g_pool{nullptr};

// This process's pool. Lock-free, because a forked child must not wait on any lock the parent's
// threads may have held at fork time: a pool made by another pid is left as it is (its threads
// do not exist here) and replaced.
Pool& pool_of_this_process() {
  const long pid = current_pid();
  Pool* p = g_pool.load(std::memory_order_acquire);
  while (p == nullptr || p->pid() != pid) {
    Pool* fresh = new Pool(pid);
    if (g_pool.compare_exchange_strong(p, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) return *fresh;
    delete fresh;  // another thread of this process won; p is now its pool
  }
  return *p;
}

}  // namespace

namespace detail {

void run_parallel(size_t n, size_t threads, IndexFn call, void* ctx) {
  Pool& pool = pool_of_this_process();
  if (!pool.try_acquire()) {
    for (size_t i = 0; i < n; ++i) call(ctx, i);
    return;
  }
  struct Release {
    Pool& pool;
    ~Release() { pool.release(); }
  } release{pool};
  Job job;
  job.n = n;
  job.helpers = threads - 1;
  job.call = call;
  job.ctx = ctx;
  pool.run(job);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace detail

size_t pool_workers() {
  const Pool* p = g_pool.load(std::memory_order_acquire);
  return p != nullptr && p->pid() == current_pid() ? p->workers() : 0;
}

}  // namespace crayon
