// Transparent huge pages for the tables every piece reads.
//
// A first sighting walks the trie, the split and pair tables and the rank maps: 10-17 MB of a
// cartridge for o200k_base or Llama 3, on 2,500-4,500 pages of 4 KiB, far more than the TLB holds
// (1,500-2,000 entries). Each cold node then costs a page walk on top of its cache miss. On 2 MiB
// pages the same bytes take 5-9 TLB entries. Measured on new text with cold caches
// (docs/benchmarks.md, "Huge pages"): o200k_base +12-25%, cl100k_base +7-17%, llama3_1 +6-15%.
//
// Two users:
//   - the per-thread ShortPieceCache (2 MiB) is allocated on one huge page (alloc_huge_zeroed);
//   - a mapped cartridge is mapped at a 2 MiB-aligned address, and once its engines have encoded
//     enough text, the 2 MiB chunks holding their hot sections are copied onto anonymous huge
//     pages and moved over the file's pages at the same addresses (Cartridge::note_encoded), so
//     no pointer into the file changes.
//
// Linux only (madvise(MADV_HUGEPAGE), mremap); elsewhere both keep 4 KiB pages. The policy comes
// from the environment, read once per process:
//   CRAYON_HUGE_PAGES=0   never (plain mapping and calloc, as before)
//   CRAYON_HUGE_PAGES=1   always, and a cartridge's hot chunks at its first encode (tests, benchmarks)
//   unset                 when the kernel offers transparent huge pages (its `enabled` setting is
//                         `always` or `madvise`), a cartridge's hot chunks after its engines have
//                         encoded an eighth of the hot bytes in text (the copy costs about what
//                         encoding that much text gains back), if they add up to 2 MiB or more
#pragma once

#include <cstddef>

namespace crayon {

constexpr size_t kHugePage = size_t{2} << 20;
// A cartridge whose hot sections add up to less keeps its file pages (unless CRAYON_HUGE_PAGES=1).
constexpr size_t kMinHotBytes = kHugePage;

enum class HugePagePolicy { kOff, kAuto, kNow };

// The process's policy (above), computed on first call.
HugePagePolicy huge_page_policy();

// `bytes` (a multiple of kHugePage) of zeroed memory at a kHugePage-aligned address, advised as
// huge pages; nullptr when the policy is off or the mapping fails. Free with free_huge().
void* alloc_huge_zeroed(size_t bytes);
void free_huge(void* p, size_t bytes);

// Advises the 2 MiB pages inside [p, p + bytes) as huge (as numpy does for its large arrays), for
// a buffer about to be written in full; nothing for buffers under two huge pages, when the policy
// is off, or off Linux.
void advise_huge(void* p, size_t bytes);

// An anonymous mapping of `bytes` (a multiple of kHugePage) at a kHugePage-aligned address,
// read-write or reserved (PROT_NONE, nothing committed), or nullptr. Linux only (else nullptr).
void* map_huge_aligned(size_t bytes, bool writable);

}  // namespace crayon
