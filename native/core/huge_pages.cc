#include "core/huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace crayon {

namespace {

#if defined(__linux__)
// Whether the kernel hands out transparent huge pages to a region advised MADV_HUGEPAGE.
bool kernel_offers_thp() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (!std::getline(f, line)) return false;
  return line.find("[always]") != std::string::npos || line.find("[madvise]") != std::string::npos;
}
#endif

HugePagePolicy read_policy() {
#if defined(__linux__)
  const char* env = std::getenv("CRAYON_HUGE_PAGES");
  if (env != nullptr && *env != '\0') {
    if (std::strcmp(env, "0") == 0) return HugePagePolicy::kOff;
    if (std::strcmp(env, "1") == 0) return HugePagePolicy::kNow;
  }
  return kernel_offers_thp() ? HugePagePolicy::kAuto : HugePagePolicy::kOff;
#else
  return HugePagePolicy::kOff;
#endif
}

}  // namespace

HugePagePolicy huge_page_policy() {
  static const HugePagePolicy policy = read_policy();
  return policy;
}

void* map_huge_aligned(size_t bytes, bool writable) {
#if defined(__linux__)
  if (bytes == 0 || bytes % kHugePage != 0) return nullptr;
  // Over-map by one huge page, keep the aligned part, give back the ends.
  const int prot = writable ? PROT_READ | PROT_WRITE : PROT_NONE;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (writable ? 0 : MAP_NORESERVE);
  void* raw = ::mmap(nullptr, bytes + kHugePage, prot, flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  auto* r = static_cast<uint8_t*>(raw);
  auto* a = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(r) + kHugePage - 1) & ~uintptr_t{kHugePage - 1});
  if (a > r) ::munmap(r, static_cast<size_t>(a - r));
  if (r + bytes + kHugePage > a + bytes) ::munmap(a + bytes, static_cast<size_t>(r + bytes + kHugePage - (a + bytes)));
  return a;
#else
  (void)bytes;
  (void)writable;
  return nullptr;
#endif
}

void* alloc_huge_zeroed(size_t bytes) {
#if defined(__linux__)
  if (huge_page_policy() == HugePagePolicy::kOff) return nullptr;
  void* a = map_huge_aligned(bytes, /*writable=*/true);
  if (a != nullptr) ::madvise(a, bytes, MADV_HUGEPAGE);  // a kernel without THP leaves 4 KiB pages: still correct
  return a;
#else
  (void)bytes;
  return nullptr;
#endif
}

void advise_huge(void* p, size_t bytes) {
#if defined(__linux__)
  if (bytes < 2 * kHugePage || huge_page_policy() == HugePagePolicy::kOff) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t{kHugePage - 1};
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~uintptr_t{kHugePage - 1};
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void free_huge(void* p, size_t bytes) {
#if defined(__linux__)
  if (p != nullptr) ::munmap(p, bytes);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace crayon
