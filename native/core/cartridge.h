// Cartridge: one memory-mapped file holding a compiled tokenizer.
//
//   +------------------+ 0
//   | header (64 B)    |  magic "CRAYONHF", format version, sizes, Unicode version, checksum
//   +------------------+ 64
//   | section table    |  count x 32 B: {fourcc id, flags, offset, size, reserved}
//   +------------------+ 64-byte aligned
//   | sections ...     |  each 64-byte aligned, little-endian arrays or UTF-8 JSON
//   +------------------+ file_size
//
// The full specification (and the compatibility promise) is docs/cartridge.md. Loading maps the
// file and checks every header field and section bound: O(1) + O(section count), never a pass over
// the file, so any cartridge opens in microseconds. Work proportional to the file (the XXH64
// checksum, an engine's O(n_ids) table checks) is deferred to first use and done once (FirstUse,
// check_cartridge_once below); `verify_checksum = true` does the hash at open instead. Any problem
// is a CartridgeError whose message names the file and what was wrong.
#pragma once

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/double_array.h"
#include "core/once.h"

namespace crayon {

class CartridgeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr char kCartridgeMagic[8] = {'C', 'R', 'A', 'Y', 'O', 'N', 'H', 'F'};
constexpr uint16_t kFormatMajor = 1;
constexpr uint16_t kFormatMinor = 0;
constexpr uint32_t kHeaderSize = 64;
constexpr uint32_t kSectionEntrySize = 32;
constexpr uint32_t kSectionAlign = 64;
constexpr uint32_t kMaxSections = 4096;
// Unicode version the engine's character tables follow, packed as major<<16 | minor<<8 | update.
constexpr uint32_t kUnicodeVersion = (16u << 16) | (0u << 8) | 0u;

// A section reader that does not know this id must refuse the file (instead of ignoring it).
constexpr uint32_t kSectionRequired = 1u;

constexpr uint32_t fourcc(const char (&s)[5]) {
  return static_cast<uint32_t>(static_cast<uint8_t>(s[0])) |
         static_cast<uint32_t>(static_cast<uint8_t>(s[1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(s[3])) << 24;
}
std::string fourcc_name(uint32_t id);

struct SectionInfo {
  uint32_t id;
  uint32_t flags;
  uint64_t offset;
  uint64_t size;
};

struct CartridgeHeaderInfo {
  uint16_t major;
  uint16_t minor;
  uint64_t file_size;
  uint32_t unicode_version;
  uint64_t checksum;
};

// Who a mapped file is: a file replaced by rename (new inode) or rewritten in place (new mtime and
// ctime) is a different file. Key of the process-wide memo of files whose checksum was verified.
struct FileIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator<(const FileIdentity& o) const;
};

// A read-only cartridge. Holds the mapping (or an owned copy of the bytes) for its lifetime.
class Cartridge {
 public:
  // Maps `path` and validates its header and section table (O(1) in the file size: nothing is
  // read beyond the table, no page of a section is touched). verify_checksum=true also hashes
  // the whole file now (`crayon inspect`, `convert --verify`, an explicit `verify=True`);
  // otherwise the hash is left to the engines' ready(), which the Python faces call on first use.
  static std::shared_ptr<Cartridge> open(const std::string& path, bool verify_checksum = false);
  // Validates an in-memory image (copied). verify_checksum=false exempts it from the checksum for
  // good (images this process just built; fuzz inputs, whose structure is what is under test).
  static std::shared_ptr<Cartridge> from_bytes(std::string bytes, const std::string& label,
                                               bool verify_checksum = true);
  // A cartridge stored as section `id` of `outer`, read in place (no copy). Its bytes are already
  // covered by the outer checksum, so only its structure is validated.
  static std::shared_ptr<Cartridge> nested(std::shared_ptr<const Cartridge> outer, uint32_t id);
  ~Cartridge();
  Cartridge(const Cartridge&) = delete;
  Cartridge& operator=(const Cartridge&) = delete;

  const CartridgeHeaderInfo& header() const { return header_; }
  const std::vector<SectionInfo>& sections() const { return sections_; }
  const std::string& label() const { return label_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Whether the stored checksum matches the bytes: hashes the whole file (under the SIGBUS guard)
  // unless that was done already. For reports (`crayon inspect`); loading uses the next one.
  bool checksum_ok() const;
  // Throws CartridgeError unless the checksum matches (nested cartridges and from_bytes(.., false)
  // images are exempt: their bytes are covered elsewhere).
  void verify_checksum() const;
  // The memo of files that passed every deferred check (checksum and an engine's table checks),
  // keyed by file identity (dev, inode, size, mtime, ctime): loading the same unchanged file
  // again, as swapping vocabularies does, skips them. A file replaced by rename or rewritten in
  // place has a new identity and is checked again. In-memory images are never known good.
  bool known_good() const;
  void mark_good() const;

  // Huge pages (core/huge_pages.h). An engine names the sections it reads for every piece; they
  // are counted against the file this cartridge lives in (the outer one, for a nested cartridge).
  // note_encoded() counts the text its engines encode: past an eighth of the hot bytes, when they
  // add up to kMinHotBytes or more (at once under CRAYON_HUGE_PAGES=1), the file's 2 MiB chunks
  // that hold hot bytes are copied onto huge pages and moved over the file's pages in place. The
  // bytes and every address stay the same, so readers on other threads see no change but speed;
  // a chunk whose copy or move fails keeps its file pages. Sections marked later move at once.
  void mark_hot(uint32_t id) const;
  void note_encoded(size_t text_bytes) const {
    const Cartridge& r = *root_;
    if (r.huge_state_.load(std::memory_order_relaxed) == kHugeCounting) r.count_encoded(text_bytes);
  }
  // Bytes of the file marked hot, and bytes moved onto huge pages so far (whole chunks).
  size_t hot_bytes() const;
  size_t huge_bytes() const;

  const SectionInfo* find(uint32_t id) const;
  // The bytes of a section; throws CartridgeError when a required section is missing.
  std::string_view bytes(uint32_t id) const;
  // A section read as an array of T; throws when missing or when its size is not a multiple of T.
  template <class T>
  const T* array(uint32_t id, size_t* count) const {
    std::string_view b = bytes(id);
    if (b.size() % sizeof(T) != 0) fail("section " + fourcc_name(id) + " has a size that is not a multiple of its element");
    *count = b.size() / sizeof(T);
    return reinterpret_cast<const T*>(b.data());
  }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  Cartridge() = default;
  void validate(bool verify_checksum);
  void count_encoded(size_t text_bytes) const;
  void promote_hot_locked() const;  // huge_mutex_ held

  static constexpr int kHugeOff = 0;       // not a file mapped for it, the policy is off, or too little is hot
  static constexpr int kHugeCounting = 1;  // counting text until the hot chunks are worth moving
  static constexpr int kHugeMoved = 2;     // hot chunks moved (and later marks moved at once)

  std::string label_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;  // non-null when data_ comes from mmap
  size_t mapping_size_ = 0;  // bytes mapped at mapping_ (a whole number of huge pages when aligned for them)
  const Cartridge* root_ = this;  // the cartridge holding the mapping (outermost of nested ones)
  mutable std::atomic<int> huge_state_{kHugeOff};
  mutable std::atomic<uint64_t> encoded_bytes_{0};
  mutable std::atomic<uint64_t> hot_total_{0};
  mutable std::mutex huge_mutex_;
  mutable std::vector<std::pair<size_t, size_t>> hot_ranges_;  // [begin, end) offsets into the mapping
  mutable std::vector<uint8_t> chunk_moved_;                    // per 2 MiB chunk of the mapping
  mutable size_t huge_bytes_ = 0;
  std::string owned_;        // used when the bytes are held in memory
  std::shared_ptr<const Cartridge> outer_;  // keeps the enclosing cartridge alive (nested())
  CartridgeHeaderInfo header_{};
  std::vector<SectionInfo> sections_;
  // 0 not computed yet, 1 matches, 2 does not; set under the checksum's own once-per-object rule.
  mutable std::atomic<int> checksum_state_{0};
  bool checksum_exempt_ = false;  // nested (the outer file's checksum covers it), or from_bytes(.., false)
  bool has_identity_ = false;   // mapped from a file whose identity is in identity_
  FileIdentity identity_;
};

// Runs the deferred checks of a cartridge once: skipped when the file is known good, else the
// checksum, then `checks` (an engine's table checks), then the file is remembered as good.
template <class F>
void check_cartridge_once(const Cartridge& c, F&& checks) {
  if (c.known_good()) return;
  c.verify_checksum();
  checks();
  c.mark_good();
}

// Work deferred from load to first use, run exactly once whatever the number of threads asking:
// the first caller runs it, the others wait; a failure is remembered and every later call throws
// the same CartridgeError (so a hostile file fails on each use, never half-works).
class FirstUse {
 public:
  template <class F>
  void run(F&& f) const {
    once_([&] {
      try {
        f();
      } catch (const std::exception& e) {
        error_ = e.what();
        if (error_.empty()) error_ = "invalid cartridge";
      }
    });
    if (!error_.empty()) throw CartridgeError(error_);  // written before once_ recorded the run
  }

 private:
  mutable Once once_;
  mutable std::string error_;
};

// Runs f(), which reads a freshly mapped cartridge, so that a file truncated under the mapping
// while it loads cannot kill the process: the SIGBUS such a read raises on this thread becomes a
// CartridgeError naming `label`. Only reads on the calling thread inside f are covered; after
// loading, replacing a cartridge must be done by renaming a new file over it (docs/cartridge.md).
// POSIX only (elsewhere f just runs). f must not hold locks or own resources across its reads.
namespace detail {
bool run_with_sigbus_guard(void (*call)(void*), void* ctx);  // false: a SIGBUS interrupted it
}
template <class F>
void guard_mapped_reads(const std::string& label, F&& f) {
  if (!detail::run_with_sigbus_guard([](void* c) { (*static_cast<std::remove_reference_t<F>*>(c))(); }, &f)) {
    throw CartridgeError("cartridge " + label + " changed while it was being loaded (truncated or rewritten in "
                         "place); replace cartridges by renaming a new file over the old one");
  }
}

// Assembles a cartridge image: add sections, then finish() lays them out, aligned, and stamps the
// checksum. Section ids must be unique.
class CartridgeWriter {
 public:
  void add(uint32_t id, std::string bytes, uint32_t flags = 0);
  template <class T>
  void add_array(uint32_t id, const std::vector<T>& v, uint32_t flags = 0) {
    add(id, std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)), flags);
  }
  std::string finish() const;

 private:
  struct Pending {
    uint32_t id;
    uint32_t flags;
    std::string bytes;
  };
  std::vector<Pending> sections_;
};

// A double-array trie stored as two sections (units and values), checked for matching sizes.
DoubleArrayView load_trie(const Cartridge& c, uint32_t units_id, uint32_t values_id);

// The checksum a cartridge image should carry (XXH64 of the header's first 56 bytes seeds the
// XXH64 of everything after the header).
uint64_t cartridge_checksum(const uint8_t* data, size_t size);

}  // namespace crayon
