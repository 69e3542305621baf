// The processes backend's segment layout: who backs which pages. The launcher's pages and every rank's ring pages
// together cover all before the heap; a rank's pages hold its own rings' slots and no other ring's.
#include "sim/comm/shm_world.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "sim/comm/shm_heap.hpp"

using namespace cpsim;

namespace {

constexpr std::size_t kPage = 4096;

// Marks the pages a range holds in a per-page map of the segment.
void mark(std::vector<int>& pages, const ShmWorld::Pages& p, int who) {
  REQUIRE(p.offset % kPage == 0);
  REQUIRE(p.bytes % kPage == 0);
  for (std::size_t at = p.offset; at < p.offset + p.bytes; at += kPage) pages.at(at / kPage) |= who;
}

}  // namespace

TEST_CASE("the launcher's pages and the ranks' ring pages cover everything before the heap") {
  for (int ranks : {1, 2, 4, 7})
    for (std::size_t arena : {std::size_t{0}, arena_bytes(std::size_t{8} << 20)}) {
      CAPTURE(ranks);
      CAPTURE(arena);
      const std::size_t heap = ShmWorld::heap_offset(ranks, arena);
      REQUIRE(heap % kPage == 0);
      std::vector<int> pages(heap / kPage, 0);
      for (const ShmWorld::Pages& p : ShmWorld::launcher_pages(ranks, arena)) mark(pages, p, 1);
      for (int r = 0; r < ranks; ++r) mark(pages, ShmWorld::rings_of(r, ranks, arena), 2);
      for (std::size_t i = 0; i < pages.size(); ++i) {
        CAPTURE(i);
        CHECK(pages[i] != 0);
      }
      // The ranks back the slots, the bulk of the rings: the launcher far less than all.
      std::size_t launcher = 0;
      for (int p : pages) launcher += (p & 1) != 0;
      CHECK(launcher * 4 < pages.size());
    }
}

TEST_CASE("a rank's ring pages hold every slot of its own rings, and little more") {
  const int ranks = 4;
  const std::size_t arena = arena_bytes(std::size_t{8} << 20);
  std::vector<std::byte> memory(ShmWorld::bytes_needed(ranks, arena) + kPage);
  auto* base =
      reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(memory.data()) + kPage - 1) / kPage * kPage);
  const ShmWorld world(base, ranks, arena, true);
  for (int src = 0; src < ranks; ++src) {
    const ShmWorld::Pages mine = ShmWorld::rings_of(src, ranks, arena);
    const auto inside = [&](const std::byte* p) {
      const auto at = static_cast<std::size_t>(p - base);
      return at >= mine.offset && at < mine.offset + mine.bytes;
    };
    std::size_t slots = 0;
    for (int dst = 0; dst <= ranks; ++dst) {
      const Ring ring = world.ring(src, dst);
      while (SlotHeader* slot = ring.free_slot()) {  // every slot once: the ring fills as they are published
        CHECK(inside(reinterpret_cast<std::byte*>(slot)));
        CHECK(inside(Ring::payload(slot) + kSlotBytes - 1));
        ring.publish();
        ++slots;
      }
    }
    CHECK(slots == (ranks + 1) * ShmWorld::slots_per_ring(ranks, arena));
    // Its rings, and at most a page of a neighbour's at either end.
    CHECK(mine.bytes <= slots * Ring::kStride + 2 * kPage);
  }
}
