// Per-thread working memory, reached through one call per use site.
//
// A reference bound straight to a thread_local is re-derived at every use inside a loop and its
// lambdas, and in a shared library (the Python module) each derivation is a call to
// __tls_get_addr: measured at 12-17% of a SentencePiece-style encode, a few percent of a
// byte-level one. thread_scratch<T>() returns the thread's T from a call the compiler cannot see
// into, so the caller keeps the address in a register: one lookup per call of the caller.
// (The initial-exec TLS model would make every lookup a load, but a module loaded at run time
// then needs all of its thread_locals in the small static TLS reserve, and the import fails.)
#pragma once

namespace crayon {

template <class T>
[[gnu::noinline]] T& thread_scratch() {
  thread_local T scratch;
  return scratch;
}

}  // namespace crayon
