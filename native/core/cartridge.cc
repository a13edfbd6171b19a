#include "core/cartridge.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "core/huge_pages.h"
#include "core/xxhash64.h"

#if defined(_WIN32)
#define CRAYON_NO_MMAP 1
#else
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

// No MAP_POPULATE: loading touches the header and the section table only, and a section's pages
// are faulted in when the engine first reads them (most of a vocabulary is never read by a short
// encode). Populating a 40 MB cartridge cost 15 ms per load.

namespace crayon {
namespace {

static_assert(sizeof(void*) == 8, "cartridges are mapped on 64-bit platforms only");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "cartridges are little-endian and read in place: big-endian targets are not supported"
#endif

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void store(std::string& s, size_t at, T v) {
  std::memcpy(&s[at], &v, sizeof(T));
}

constexpr size_t kChecksumOffset = 56;

size_t align_up(size_t n) { return (n + kSectionAlign - 1) / kSectionAlign * kSectionAlign; }

}  // namespace

namespace detail {

#if defined(CRAYON_NO_MMAP)
bool run_with_sigbus_guard(void (*call)(void*), void* ctx) {
  call(ctx);
  return true;
}
#else
namespace {

// One process-wide SIGBUS handler, installed on first use. A fault on a thread inside a guarded
// call jumps back to it; any other SIGBUS goes to the handler that was there before (Python's
// faulthandler, say) or, if there was none, gets the default action, exactly as without us.
// Not initial-exec TLS: that would take static TLS space that libraries loaded after this module
// (libgomp, torch) need. The handler reads t_guard only after this thread has set it, so its TLS
// block exists by then.
thread_local sigjmp_buf* t_guard = nullptr;
struct sigaction g_previous;
std::once_flag g_installed;

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (sigjmp_buf* jump = t_guard) siglongjmp(*jump, 1);
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  signal(sig, SIG_DFL);  // returning re-runs the faulting read, which now takes the default action
}

}  // namespace

bool run_with_sigbus_guard(void (*call)(void*), void* ctx) {
  std::call_once(g_installed, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_previous);
  });
  sigjmp_buf jump;
  sigjmp_buf* const outer = t_guard;  // guarded calls may nest (an engine loading its cartridge)
  if (sigsetjmp(jump, 1) != 0) {
    t_guard = outer;
    return false;
  }
  t_guard = &jump;
  try {
    call(ctx);
  } catch (...) {
    t_guard = outer;
    throw;
  }
  t_guard = outer;
  return true;
}
#endif

}  // namespace detail

std::string fourcc_name(uint32_t id) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const char c = static_cast<char>((id >> (8 * i)) & 0xFF);
    s += (c >= 0x20 && c < 0x7F) ? c : '?';
  }
  return s;
}

uint64_t cartridge_checksum(const uint8_t* data, size_t size) {
  // The body after the header is cut into four parts (the first three of equal length, a multiple
  // of 32 bytes; the last takes the rest), hashed as four XXH64 streams at once with seeds 0..3;
  // their four digests, little-endian, are hashed once more, seeded by the XXH64 of the header's
  // first 56 bytes. See docs/cartridge.md.
  const uint8_t* body = data + kHeaderSize;
  const size_t n = size - kHeaderSize;
  const size_t q = n / 4 / 32 * 32;
  const uint8_t* parts[4] = {body, body + q, body + 2 * q, body + 3 * q};
  const size_t sizes[4] = {q, q, q, n - 3 * q};
  const uint64_t seeds[4] = {0, 1, 2, 3};
  uint64_t digests[4];
  xxhash64_x4(parts, sizes, seeds, digests);
  uint8_t joined[32];
  std::memcpy(joined, digests, sizeof joined);  // little-endian: checked at the top of this file
  return xxhash64(joined, sizeof joined, xxhash64(data, kChecksumOffset, 0));
}

bool FileIdentity::operator<(const FileIdentity& o) const {
  if (dev != o.dev) return dev < o.dev;
  if (ino != o.ino) return ino < o.ino;
  if (size != o.size) return size < o.size;
  if (mtime_ns != o.mtime_ns) return mtime_ns < o.mtime_ns;
  return ctime_ns < o.ctime_ns;
}

namespace {
// Files that passed every deferred check in this process (Cartridge::known_good). Grows by one small entry per distinct file.
std::mutex g_verified_mutex;
std::set<FileIdentity>& verified_files() {
  static std::set<FileIdentity>* s = new std::set<FileIdentity>();  // never destroyed: safe at exit
  return *s;
}
}  // namespace

bool Cartridge::checksum_ok() const {
  int state = checksum_state_.load(std::memory_order_acquire);
  if (state == 0) {
    bool ok = false;
    guard_mapped_reads(label_, [&] { ok = cartridge_checksum(data_, size_) == header_.checksum; });
    state = ok ? 1 : 2;
    checksum_state_.store(state, std::memory_order_release);
  }
  return state == 1;
}

void Cartridge::verify_checksum() const {
  if (checksum_exempt_) return;
  if (!checksum_ok()) fail("checksum mismatch (the file is damaged or was modified)");
}

bool Cartridge::known_good() const {
  if (!has_identity_) return false;
  std::lock_guard<std::mutex> lock(g_verified_mutex);
  return verified_files().count(identity_) != 0;
}

void Cartridge::mark_good() const {
  if (!has_identity_) return;
  std::lock_guard<std::mutex> lock(g_verified_mutex);
  verified_files().insert(identity_);
}

void Cartridge::fail(const std::string& what) const {
  throw CartridgeError("invalid cartridge " + label_ + ": " + what);
}

#ifndef CRAYON_NO_MMAP
namespace {

// Maps the file read-only. Where huge pages may be used, the mapping starts on a 2 MiB boundary
// inside a reservation of whole huge pages (the tail past the file stays PROT_NONE), so that any
// 2 MiB chunk of it can later be replaced by one huge page at the same address.
void* map_file(int fd, size_t size, size_t* mapped) {
  *mapped = size;
#if defined(__linux__)
  if (huge_page_policy() != HugePagePolicy::kOff) {
    const size_t span = (size + kHugePage - 1) / kHugePage * kHugePage;
    if (void* a = map_huge_aligned(span, /*writable=*/false)) {
      void* m = ::mmap(a, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
      if (m != MAP_FAILED) {
        *mapped = span;
        return m;
      }
      ::munmap(a, span);
    }
  }
#endif
  return ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
}

// Replaces chunk [at, at + kHugePage) of a mapping by a huge page holding the same `n` first bytes
// (the rest zero): the copy is made aside, made read-only, then moved over the chunk in one
// mremap, so a reader never sees anything but these bytes. False (chunk unchanged) on failure.
bool move_chunk_to_huge_page(uint8_t* at, size_t n) {
#if defined(__linux__)
  void* fresh = alloc_huge_zeroed(kHugePage);
  if (fresh == nullptr) return false;
  struct Copy {
    void* to;
    const uint8_t* from;
    size_t n;
  } copy{fresh, at, n};
  // A file truncated under the mapping faults here: the chunk then keeps its file pages.
  const bool copied = detail::run_with_sigbus_guard([](void* p) {
    auto* c = static_cast<Copy*>(p);
    std::memcpy(c->to, c->from, c->n);
  }, &copy);
  if (!copied || ::mprotect(fresh, kHugePage, PROT_READ) != 0 ||
      ::mremap(fresh, kHugePage, kHugePage, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) {
    free_huge(fresh, kHugePage);
    return false;
  }
  return true;
#else
  (void)at;
  (void)n;
  return false;
#endif
}

}  // namespace
#endif

void Cartridge::mark_hot(uint32_t id) const {
  const SectionInfo* s = find(id);
  const Cartridge& r = *root_;
  if (s == nullptr || s->size == 0 || r.huge_state_.load(std::memory_order_relaxed) == kHugeOff) return;
  const size_t begin = static_cast<size_t>(data_ - r.data_) + s->offset;
  std::lock_guard<std::mutex> lock(r.huge_mutex_);
  r.hot_ranges_.emplace_back(begin, begin + s->size);
  r.hot_total_.fetch_add(s->size, std::memory_order_relaxed);
  if (r.huge_state_.load(std::memory_order_relaxed) == kHugeMoved) r.promote_hot_locked();
}

void Cartridge::count_encoded(size_t text_bytes) const {
  const uint64_t total = encoded_bytes_.fetch_add(text_bytes, std::memory_order_relaxed) + text_bytes;
  const uint64_t hot = hot_total_.load(std::memory_order_relaxed);
  if (hot == 0) return;
  if (huge_page_policy() != HugePagePolicy::kNow) {
    // Hot tables under kMinHotBytes are within the TLB's reach on small pages already (bert's
    // 0.75 MiB: the copy cost more than it gained), and the copy waits for an eighth of them in text.
    if (hot < kMinHotBytes) {
      huge_state_.store(kHugeOff, std::memory_order_relaxed);
      return;
    }
    if (total < hot / 8) return;
  }
  std::lock_guard<std::mutex> lock(huge_mutex_);
  if (huge_state_.load(std::memory_order_relaxed) != kHugeCounting) return;
  promote_hot_locked();
  huge_state_.store(kHugeMoved, std::memory_order_relaxed);
}

void Cartridge::promote_hot_locked() const {
#ifndef CRAYON_NO_MMAP
  auto* base = static_cast<uint8_t*>(mapping_);
  chunk_moved_.resize(mapping_size_ / kHugePage, 0);
  for (const auto& [begin, end] : hot_ranges_) {
    for (size_t k = begin / kHugePage; k * kHugePage < end && k < chunk_moved_.size(); ++k) {
      if (chunk_moved_[k] != 0) continue;
      const size_t at = k * kHugePage;
      const bool moved = move_chunk_to_huge_page(base + at, std::min(kHugePage, size_ - at));
      chunk_moved_[k] = moved ? 1 : 2;  // a failed chunk is not tried again
      if (moved) huge_bytes_ += kHugePage;
    }
  }
#endif
}

size_t Cartridge::hot_bytes() const { return static_cast<size_t>(root_->hot_total_.load(std::memory_order_relaxed)); }

size_t Cartridge::huge_bytes() const {
  std::lock_guard<std::mutex> lock(root_->huge_mutex_);
  return root_->huge_bytes_;
}

std::shared_ptr<Cartridge> Cartridge::open(const std::string& path, bool verify_checksum) {
  std::shared_ptr<Cartridge> c(new Cartridge());
  c->label_ = "'" + path + "'";
#ifndef CRAYON_NO_MMAP
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CartridgeError("cannot open cartridge '" + path + "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw CartridgeError("cannot stat cartridge '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CartridgeError("cartridge '" + path + "' is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kHeaderSize) {
    ::close(fd);
    c->fail("file is " + std::to_string(size) + " bytes, smaller than the 64-byte header");
  }
  // MAP_PRIVATE: a process that writes to the file does not change what we read through pages
  // already touched; a file truncated under us can still fault, see docs/cartridge.md.
  void* m = map_file(fd, size, &c->mapping_size_);
  ::close(fd);
  if (m == MAP_FAILED) throw CartridgeError("cannot map cartridge '" + path + "': " + std::strerror(errno));
  c->mapping_ = m;
  if (c->mapping_size_ % kHugePage == 0) c->huge_state_.store(kHugeCounting, std::memory_order_relaxed);
  c->data_ = static_cast<const uint8_t*>(m);
  c->size_ = size;
  c->has_identity_ = true;
  c->identity_.dev = static_cast<uint64_t>(st.st_dev);
  c->identity_.ino = static_cast<uint64_t>(st.st_ino);
  c->identity_.size = static_cast<uint64_t>(st.st_size);
  c->identity_.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  c->identity_.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
#else
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CartridgeError("cannot open cartridge '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  c->owned_ = ss.str();
  c->data_ = reinterpret_cast<const uint8_t*>(c->owned_.data());
  c->size_ = c->owned_.size();
#endif
  guard_mapped_reads(c->label_, [&] { c->validate(verify_checksum); });
  return c;
}

std::shared_ptr<Cartridge> Cartridge::nested(std::shared_ptr<const Cartridge> outer, uint32_t id) {
  const std::string_view b = outer->bytes(id);
  std::shared_ptr<Cartridge> c(new Cartridge());
  c->label_ = outer->label() + "#" + fourcc_name(id);
  c->data_ = reinterpret_cast<const uint8_t*>(b.data());
  c->size_ = b.size();
  c->root_ = outer->root_;
  c->outer_ = std::move(outer);
  if (reinterpret_cast<uintptr_t>(c->data_) % 8 != 0) c->fail("nested cartridge is not 8-byte aligned");
  c->checksum_exempt_ = true;
  c->checksum_state_.store(1);
  c->validate(false);
  return c;
}

std::shared_ptr<Cartridge> Cartridge::from_bytes(std::string bytes, const std::string& label,
                                                 bool verify_checksum) {
  std::shared_ptr<Cartridge> c(new Cartridge());
  c->label_ = label;
#ifndef CRAYON_NO_MMAP
  // An image of a real vocabulary (a megabyte or more) lives on huge pages where the kernel
  // offers them (core/huge_pages.h): all of it at once, in place of the string's heap copy.
  const size_t span = (bytes.size() + kHugePage - 1) / kHugePage * kHugePage;
  if (bytes.size() >= kHugePage / 2) {
    if (void* m = alloc_huge_zeroed(span)) {
      std::memcpy(m, bytes.data(), bytes.size());
      ::mprotect(m, span, PROT_READ);
      c->mapping_ = m;
      c->mapping_size_ = span;
      c->huge_bytes_ = span;
      c->data_ = static_cast<const uint8_t*>(m);
      c->size_ = bytes.size();
      std::string().swap(bytes);
      c->checksum_exempt_ = !verify_checksum;
      c->validate(verify_checksum);
      return c;
    }
  }
#endif
  c->owned_ = std::move(bytes);
  // std::string storage is not guaranteed 64-byte aligned; arrays are read through typed
  // pointers, so copy into an aligned buffer when needed.
  c->data_ = reinterpret_cast<const uint8_t*>(c->owned_.data());
  c->size_ = c->owned_.size();
  if (reinterpret_cast<uintptr_t>(c->data_) % 8 != 0) {
    c->fail("internal: in-memory image is not 8-byte aligned");
  }
  c->checksum_exempt_ = !verify_checksum;
  c->validate(verify_checksum);
  return c;
}

Cartridge::~Cartridge() {
#ifndef CRAYON_NO_MMAP
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_size_);
#endif
}

void Cartridge::validate(bool verify_checksum) {
  const uint8_t* d = data_;
  if (size_ < kHeaderSize) fail("file is " + std::to_string(size_) + " bytes, smaller than the 64-byte header");
  if (std::memcmp(d, kCartridgeMagic, 8) != 0) fail("bad magic (not a crayon-hf cartridge)");
  header_.major = load<uint16_t>(d + 8);
  header_.minor = load<uint16_t>(d + 10);
  const uint32_t header_size = load<uint32_t>(d + 12);
  const uint32_t count = load<uint32_t>(d + 16);
  header_.file_size = load<uint64_t>(d + 24);
  const uint64_t table_offset = load<uint64_t>(d + 32);
  header_.unicode_version = load<uint32_t>(d + 40);
  header_.checksum = load<uint64_t>(d + kChecksumOffset);

  if (header_.major != kFormatMajor) {
    fail("format version " + std::to_string(header_.major) + "." + std::to_string(header_.minor) +
         " is not supported by this crayon-hf (reads " + std::to_string(kFormatMajor) +
         ".x); rebuild the cartridge with `crayon convert` or upgrade crayon-hf");
  }
  if (header_size != kHeaderSize) fail("header size " + std::to_string(header_size) + " != 64");
  if (header_.file_size != size_) {
    fail("header says " + std::to_string(header_.file_size) + " bytes but the file has " +
         std::to_string(size_) + " (truncated or padded?)");
  }
  if (count > kMaxSections) fail("section count " + std::to_string(count) + " is implausible");
  if (table_offset != kHeaderSize) fail("section table must follow the header");
  const uint64_t table_end = table_offset + uint64_t{count} * kSectionEntrySize;
  if (table_end > size_) fail("section table runs past the end of the file");

  if (verify_checksum) this->verify_checksum();

  sections_.clear();
  sections_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t* e = d + table_offset + uint64_t{i} * kSectionEntrySize;
    SectionInfo s{load<uint32_t>(e), load<uint32_t>(e + 4), load<uint64_t>(e + 8), load<uint64_t>(e + 16)};
    const std::string name = fourcc_name(s.id);
    if (s.offset % kSectionAlign != 0) fail("section " + name + " is not 64-byte aligned");
    if (s.offset < table_end) fail("section " + name + " overlaps the header or section table");
    if (s.offset > size_ || s.size > size_ - s.offset) fail("section " + name + " runs past the end of the file");
    for (const SectionInfo& o : sections_) {
      if (o.id == s.id) fail("section " + name + " appears twice");
    }
    sections_.push_back(s);
  }
  // Sections must not overlap one another.
  std::vector<SectionInfo> sorted = sections_;
  // An empty section shares its offset with the section after it; ordering by size too puts it
  // first, whatever the sort does with ties (std::sort is not stable, and past 16 sections it
  // stopped leaving them in table order).
  std::sort(sorted.begin(), sorted.end(), [](const SectionInfo& a, const SectionInfo& b) {
    return a.offset < b.offset || (a.offset == b.offset && a.size < b.size);
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i - 1].offset + sorted[i - 1].size > sorted[i].offset) {
      fail("sections " + fourcc_name(sorted[i - 1].id) + " and " + fourcc_name(sorted[i].id) + " overlap");
    }
  }
}

const SectionInfo* Cartridge::find(uint32_t id) const {
  for (const SectionInfo& s : sections_) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

std::string_view Cartridge::bytes(uint32_t id) const {
  const SectionInfo* s = find(id);
  if (s == nullptr) fail("required section " + fourcc_name(id) + " is missing");
  return std::string_view(reinterpret_cast<const char*>(data_ + s->offset), s->size);
}

void CartridgeWriter::add(uint32_t id, std::string bytes, uint32_t flags) {
  for (const Pending& p : sections_) {
    if (p.id == id) throw std::invalid_argument("duplicate cartridge section " + fourcc_name(id));
  }
  sections_.push_back(Pending{id, flags, std::move(bytes)});
}

std::string CartridgeWriter::finish() const {
  const size_t table_end = kHeaderSize + sections_.size() * kSectionEntrySize;
  size_t cursor = align_up(table_end);
  std::vector<uint64_t> offsets;
  for (const Pending& p : sections_) {
    offsets.push_back(cursor);
    cursor = align_up(cursor + p.bytes.size());
  }
  std::string out(cursor, '\0');
  std::memcpy(&out[0], kCartridgeMagic, 8);
  store<uint16_t>(out, 8, kFormatMajor);
  store<uint16_t>(out, 10, kFormatMinor);
  store<uint32_t>(out, 12, kHeaderSize);
  store<uint32_t>(out, 16, static_cast<uint32_t>(sections_.size()));
  store<uint32_t>(out, 20, 0);
  store<uint64_t>(out, 24, out.size());
  store<uint64_t>(out, 32, kHeaderSize);
  store<uint32_t>(out, 40, kUnicodeVersion);
  for (size_t i = 0; i < sections_.size(); ++i) {
    const size_t e = kHeaderSize + i * kSectionEntrySize;
    store<uint32_t>(out, e, sections_[i].id);
    store<uint32_t>(out, e + 4, sections_[i].flags);
    store<uint64_t>(out, e + 8, offsets[i]);
    store<uint64_t>(out, e + 16, sections_[i].bytes.size());
    if (!sections_[i].bytes.empty()) {
      std::memcpy(&out[offsets[i]], sections_[i].bytes.data(), sections_[i].bytes.size());
    }
  }
  store<uint64_t>(out, kChecksumOffset,
                  cartridge_checksum(reinterpret_cast<const uint8_t*>(out.data()), out.size()));
  return out;
}

DoubleArrayView load_trie(const Cartridge& c, uint32_t units_id, uint32_t values_id) {
  size_t n, nv;
  const DoubleArrayUnit* units = c.array<DoubleArrayUnit>(units_id, &n);
  const int32_t* values = c.array<int32_t>(values_id, &nv);
  if (n == 0 || n > 0x7FFFFFFF) c.fail("trie " + fourcc_name(units_id) + " has an invalid size");
  if (nv != n) c.fail("trie values " + fourcc_name(values_id) + " do not match its units");
  return DoubleArrayView(units, values, static_cast<uint32_t>(n));
}

}  // namespace crayon
