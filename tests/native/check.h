// The failure count of a standalone native test: check() prints what failed (the first 20) and
// the test's main returns exit_code(), which the Python side turns into a failure.
#pragma once

#include <cstdio>

namespace native_test {

inline int failures = 0;

inline void check(bool ok, const char* what) {
  if (!ok && failures++ < 20) std::printf("FAILED: %s\n", what);
}

inline int exit_code() { return failures == 0 ? 0 : 1; }

}  // namespace native_test
