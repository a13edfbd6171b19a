#include "models/short_token_index.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "core/huge_pages.h"
#include "models/bpe.h"

namespace crayon {

namespace {

// The shape of the pieces the index answers for: ASCII-led, 1-16 bytes.
bool shaped(const BpeTables& t, uint32_t id) {
  const uint32_t a = t.token_offsets[id];
  const uint32_t n = t.token_offsets[id + 1] - a;
  return n >= 1 && n <= ShortPieceCache::kMaxLen && t.token_bytes[a] < 0x80;
}

// The tokens the index holds: of that shape and reachable (see the header).
bool indexable(const BpeTables& t, const uint32_t* split_left, uint32_t id) {
  return shaped(t, id) && split_left[id] != piece::kNoSplit;
}

// The ShortPieceCache key of token `id` (an indexable one).
ShortPieceCache::Key key_of(const BpeTables& t, uint32_t id) {
  const uint32_t a = t.token_offsets[id];
  const uint32_t n = t.token_offsets[id + 1] - a;
  // make_key reads 16 bytes and masks off those past the token; near the table's end, a copy.
  if (a + uint64_t{ShortPieceCache::kMaxLen} <= t.token_bytes_size) return ShortPieceCache::make_key(t.token_bytes + a, n, 0);
  uint8_t padded[ShortPieceCache::kMaxLen] = {};
  std::memcpy(padded, t.token_bytes + a, n);
  return ShortPieceCache::make_key(padded, n, 0);
}

}  // namespace

std::unique_ptr<const ShortTokenIndex> ShortTokenIndex::build(const BpeTables& t, const uint32_t* split_left,
                                                             const uint8_t* kinds, uint8_t mergeable) {
  if (split_left == nullptr) return nullptr;
  size_t count = 0;
  // Mergeable tokens of the indexed shape that BPE does not reach (or that another id shadows in
  // the trie): the whole-piece walk may find them, so find() must not answer kNoToken for their
  // buckets. Without kinds no token can be told apart, and find() never answers kNoToken.
  std::vector<uint32_t> unreached;
  for (uint32_t id = 0; id < t.n_ids; ++id) {
    const bool held = indexable(t, split_left, id);
    count += held;
    if (!held && kinds != nullptr && kinds[id] == mergeable && shaped(t, id)) unreached.push_back(id);
  }
  if (count == 0) return nullptr;
  std::unique_ptr<ShortTokenIndex> index(new ShortTokenIndex());
  index->complete_ = kinds != nullptr;
  unsigned bits = 1;
  while ((size_t{1} << bits) < count) ++bits;  // buckets >= tokens: at most half the slots used
  index->bucket_bits_ = bits;
  index->lacking_.assign(((size_t{1} << bits) + 63) / 64, 0);
  for (const uint32_t id : unreached) index->mark(index->bucket_of(key_of(t, id)));
  index->unreached_ = unreached.size();
  // The tokens are grouped by the top bits of their bucket first (a stable counting sort over the
  // token table, read front to back twice), so that each group's writes land in a region of the
  // table that stays in cache; within a group ids stay ascending, so a full bucket keeps its lower
  // ids (the earlier merges). Written in id order, one cache miss per token, the table took
  // 20-30 ms for o200k_base. The groups' buffer (5 MB there) is on huge pages too: on 4 KiB pages
  // its page faults cost more than the rest of the build.
  const unsigned shift = bits - (bits > 8 ? 8 : bits);
  std::vector<uint32_t> next((size_t{1} << (bits - shift)) + 1, 0);
  for (uint32_t id = 0; id < t.n_ids; ++id) {
    if (indexable(t, split_left, id)) ++next[(index->bucket_of(key_of(t, id)) >> shift) + 1];
  }
  for (size_t g = 1; g < next.size(); ++g) next[g] += next[g - 1];
  const size_t grouped_bytes = (count * sizeof(Slot) + kHugePage - 1) / kHugePage * kHugePage;
  std::vector<Slot> fallback;
  Slot* grouped = static_cast<Slot*>(alloc_huge_zeroed(grouped_bytes));
  if (grouped == nullptr) {
    fallback.resize(count);
    grouped = fallback.data();
  }
  for (uint32_t id = 0; id < t.n_ids; ++id) {
    if (!indexable(t, split_left, id)) continue;
    const ShortPieceCache::Key k = key_of(t, id);
    grouped[next[index->bucket_of(k) >> shift]++] = Slot{k.a, k.b, id, k.len};
  }

  index->bytes_ = (size_t{2} << bits) * sizeof(Slot);
  if (index->bytes_ % kHugePage == 0) {
    index->slots_ = static_cast<Slot*>(alloc_huge_zeroed(index->bytes_));
    index->huge_ = index->slots_ != nullptr;
  }
  if (index->slots_ == nullptr) {
    // aligned_alloc wants a size that is a multiple of the alignment: 64 * 2^bits is.
    index->slots_ = static_cast<Slot*>(std::aligned_alloc(64, index->bytes_));
    if (index->slots_ == nullptr) {
      if (fallback.empty()) free_huge(grouped, grouped_bytes);
      throw std::bad_alloc();
    }
    std::memset(static_cast<void*>(index->slots_), 0, index->bytes_);
  }
  for (size_t i = 0; i < count; ++i) {
    const Slot& e = grouped[i];
    Slot* s = index->slots_ + 2 * size_t{index->bucket_of(ShortPieceCache::Key{e.a, e.b, e.len, 0})};
    if (s[0].len != 0) ++s;
    if (s->len != 0) {
      index->mark(static_cast<uint32_t>((s - index->slots_) / 2));
      ++index->left_out_;
      continue;
    }
    *s = e;
    ++index->indexed_;
  }
  if (fallback.empty()) free_huge(grouped, grouped_bytes);
  return index;
}

ShortTokenIndex::~ShortTokenIndex() {
  if (huge_) free_huge(slots_, bytes_);
  else std::free(slots_);
}

}  // namespace crayon
