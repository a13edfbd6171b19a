// core/engine_tags.h: every tag a thread hands out names one engine until the caller's clear()
// has run, across the owners it forgets and the wrap-around after 65,535 tags.
#include <cstdio>
#include <map>
#include <set>

#include "check.h"
#include "core/engine_tags.h"

using native_test::check;

int main() {
  crayon::EngineTags tags;
  int clears = 0;
  auto clear = [&] { ++clears; };
  // Which owner holds each tag since the last clear: a tag must never name two owners.
  std::map<uint16_t, uint64_t> holder;
  auto ask = [&](uint64_t owner) {
    const uint16_t t = tags.tag_of(owner, [&] {
      clear();
      holder.clear();
    });
    check(t != 0, "tags are never 0");
    const auto [it, fresh] = holder.emplace(t, owner);
    check(fresh || it->second == owner, "a tag names one owner until the clear");
    return t;
  };

  // Owners met again are answered with their tag, the last one without a search and the others
  // from the 64 remembered.
  const uint16_t a = ask(1), b = ask(2);
  check(a != b, "two owners, two tags");
  check(ask(1) == a && ask(1) == a && ask(2) == b, "an owner keeps its tag");
  // 100 other owners: owner 1 is forgotten and gets a new tag, never one handed out before.
  std::set<uint16_t> seen;
  for (uint64_t o = 100; o < 200; ++o) seen.insert(ask(o));
  check(seen.size() == 100, "distinct tags for distinct owners");
  const uint16_t a2 = ask(1);
  check(a2 != a && !seen.count(a2), "a forgotten owner gets a tag nobody held");
  check(clears == 0, "no clear before the tags run out");

  // Run the tags out: the owner after the 65,535th tag starts from a cleared cache, with tag 1.
  uint64_t owner = 1000;
  for (int i = 0; i < 70000 && clears == 0; ++i) ask(owner++);
  check(clears == 1, "one clear at the wrap-around");
  check(ask(owner - 1) == 1, "tags start again from 1 after the clear");
  check(ask(7) == 2 && ask(1) == 3, "owners met before the clear get new tags");

  // The test hook: the next new owner gets the last tag, the one after it wraps around.
  crayon::EngineTags hooked;
  int hooked_clears = 0;
  check(hooked.tag_of(1, [&] { ++hooked_clears; }) == 1, "first tag");
  hooked.skip_to_last_tag();
  check(hooked.tag_of(2, [&] { ++hooked_clears; }) == 0xFFFF, "skip_to_last_tag hands out the last tag");
  check(hooked.tag_of(3, [&] { ++hooked_clears; }) == 1 && hooked_clears == 1, "then the wrap-around");
  check(hooked.tag_of(1, [&] { ++hooked_clears; }) == 2, "an owner from before the clear gets a new tag");

  std::printf("%s\n", native_test::failures == 0 ? "ALL OK" : "FAILURES");
  return native_test::exit_code();
}
