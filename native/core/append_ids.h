// Appending the few ids of one piece (a cache hit, a short BPE) to an output vector.
//
// out.insert(out.end(), ids, ids + n) is a call into vector's range insert and a memmove of a
// size known only at run time: ~60 instructions and a mispredicted size class for 2-7 ids, and on
// text of other scripts (pieces of several tokens, most of them cache hits) 5% of an encode. A
// push_back per id is a few instructions whose capacity check is always predicted.
#pragma once

#include <cstddef>
#include <cstdint>

namespace crayon {

template <class Out>
inline void append_few_ids(Out& out, const uint32_t* ids, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(ids[i]);
}

}  // namespace crayon
