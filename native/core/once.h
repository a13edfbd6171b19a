// A value built on first use, for lookups on the hot path.
//
// std::call_once costs the same on every call, built or not: libstdc++ stores two thread-local
// pointers (the callable and its trampoline) before asking pthread_once, and clears them after,
// and from a shared library (the Python module) each of those is a call to __tls_get_addr. Asked
// per piece (whether a CJK piece has its SafeCuts, whether BPE has its byte-pair table) that was
// 2.7M instructions of DeepSeek-V3's 105M on 20 Chinese documents. Once asks an atomic flag
// first and goes to call_once only until the value is built. (Cartridge checks deferred to first
// use, FirstUse in core/cartridge.h, run through it too.)
#pragma once

#include <atomic>
#include <mutex>

namespace crayon {

class Once {
 public:
  // Runs f the first time (concurrent callers wait for it, as with std::call_once); every later
  // call is an acquire load. If f throws, nothing is recorded and the next call runs it again.
  template <class F>
  void operator()(F&& f) {
    if (done_.load(std::memory_order_acquire)) return;
    std::call_once(flag_, [&] {
      f();
      done_.store(true, std::memory_order_release);
    });
  }

 private:
  std::once_flag flag_;
  std::atomic<bool> done_{false};
};

}  // namespace crayon
