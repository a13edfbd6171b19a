// Small per-thread tags for engines, for per-thread caches whose entries have no room for an
// engine's 64-bit owner id (models/short_piece_cache.h, the backtracking pair memo).
//
//   owner (process-unique, never 0) --tag_of--> tag in [1, 65535], handed out by this thread
//
// Exactness: a tag is handed out once per thread until all 65,535 are used; then the caller's
// clear() drops every entry the cache holds and tags start again from 1. So an entry tagged t
// was made by the one engine that holds t on this thread. Up to kOwners engines are remembered;
// an engine forgotten since gets a new tag (its old entries then only cost space).
#pragma once

#include <cstddef>
#include <cstdint>

namespace crayon {

class EngineTags {
 public:
  // The tag of `owner`. Calls clear() first when every tag has been handed out. Call it once per
  // encode call (the last owner asked for is answered without a search).
  template <class Clear>
  uint16_t tag_of(uint64_t owner, Clear&& clear) {
    if (owner == last_owner_) return last_tag_;
    uint16_t tag = 0;
    for (const Owner& o : owners_) {
      if (o.owner == owner) tag = o.tag;
    }
    if (tag == 0) {
      if (next_tag_ == 0) {
        clear();
        for (Owner& o : owners_) o = Owner{};
        next_tag_ = 1;
      }
      Owner& o = owners_[next_owner_++ % kOwners];
      o.owner = owner;
      o.tag = tag = next_tag_++;
    }
    last_owner_ = owner;
    last_tag_ = tag;
    return tag;
  }

  // Tests only: the next engine new to this thread gets the last tag, and the one after it
  // starts the wrap-around (the tags in between are skipped, never reused).
  void skip_to_last_tag() {
    if (next_tag_ != 0) next_tag_ = 0xFFFF;
  }

 private:
  struct Owner {
    uint64_t owner = 0;
    uint16_t tag = 0;
  };
  static constexpr size_t kOwners = 64;

  Owner owners_[kOwners];
  size_t next_owner_ = 0;
  uint16_t next_tag_ = 1;
  uint64_t last_owner_ = 0;
  uint16_t last_tag_ = 0;
};

}  // namespace crayon
