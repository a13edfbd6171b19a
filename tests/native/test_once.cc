// core/once.h: the function runs once however many threads ask at the same time, every caller
// returns after it has finished (and sees what it wrote), and a run that throws leaves the value
// unbuilt, so the next call runs it again.
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "check.h"
#include "core/once.h"

using native_test::check;

int main() {
  // Many threads released together, many rounds: one run each round, and no caller returns
  // before the value is there.
  for (int round = 0; round < 200; ++round) {
    crayon::Once once;
    std::atomic<int> runs{0}, ready{0};
    std::atomic<bool> go{false};
    int value = 0;  // written inside the run only; read by every caller after it returns
    std::atomic<int> saw_value{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&] {
        ready.fetch_add(1);
        while (!go.load()) {
        }
        for (int k = 0; k < 100; ++k) {
          once([&] {
            runs.fetch_add(1);
            std::this_thread::yield();
            value = 42;
          });
          if (value == 42) saw_value.fetch_add(1);
        }
      });
    }
    while (ready.load() != 8) {
    }
    go.store(true);
    for (std::thread& t : threads) t.join();
    check(runs.load() == 1, "the function ran exactly once");
    check(saw_value.load() == 800, "every call returned after the value was built");
  }

  // A throwing run records nothing: the next call runs again, and once it succeeds, never again.
  crayon::Once once;
  int attempts = 0;
  for (int k = 0; k < 3; ++k) {
    try {
      once([&] {
        ++attempts;
        throw std::runtime_error("not yet");
      });
      check(false, "the exception reached the caller");
    } catch (const std::runtime_error&) {
    }
  }
  check(attempts == 3, "each call after a throw ran the function again");
  once([&] { ++attempts; });
  once([&] { ++attempts; });
  check(attempts == 4, "after a run that returned, the function is not run again");

  if (native_test::failures == 0) std::printf("once: ALL OK\n");
  return native_test::exit_code();
}
