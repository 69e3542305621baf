// The processes backend's engine, two endpoints in one process taking turns (no fork, no timing): a send from a
// buffer in the shared heap goes by reference, its receiver copies it once straight out of the sender's buffer, and
// the send completes only when that copy is done; every other send streams through the slots.
#include "sim/comm/shm_engine.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "comm_test_support.hpp"
#include "sim/comm/shm_heap.hpp"

using namespace cpsim;
using namespace cpsim::test;

namespace {

constexpr std::size_t kArena = std::size_t{4} << 20;
const Envelope kEnv{kWorldContext, Channel::p2p, CollectiveKind::none, 7, 0};

// A world of 2 ranks over ordinary memory, an engine per rank, and rank 0's arena.
struct Pair {
  std::vector<std::byte> memory;
  std::unique_ptr<ShmWorld> world;
  std::unique_ptr<ShmEngine> e0, e1;
  std::unique_ptr<RankArena> arena0;
  Pair() : memory(ShmWorld::bytes_needed(2, kArena) + 4096) {
    auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(memory.data()) + 4095) / 4096 * 4096);
    world = std::make_unique<ShmWorld>(base, 2, kArena, true);
    e0 = std::make_unique<ShmEngine>(*world, 0, std::chrono::seconds(5));
    e1 = std::make_unique<ShmEngine>(*world, 1, std::chrono::seconds(5));
    arena0 = std::make_unique<RankArena>(world->arena(0), kArena);
  }
  std::byte* heap_copy(const Bytes& b) {
    auto* p = static_cast<std::byte*>(arena0->allocate(b.size()));
    std::memcpy(p, b.data(), b.size());
    return p;
  }
};

}  // namespace

TEST_CASE("a heap buffer's send goes by reference: the receive copies it once, then the send completes") {
  const std::size_t n = 3 * kSlotBytes + 5;  // more than a slot: by the slots it would take four
  for (const bool receive_first : {true, false}) {
    CAPTURE(receive_first);
    Pair w;
    const Bytes msg = payload(0, n, 1);
    std::byte* src = w.heap_copy(msg);
    Bytes got(n);
    Pending r, s;
    if (receive_first) r = w.e1->recv(kEnv, got.data(), n, 0);
    s = w.e0->send(kEnv, src, n, 1);
    CHECK(w.e0->sent_by_reference() == 1);
    CHECK(w.e0->sent_through_slots() == 0);
    CHECK_FALSE(s->test());  // nobody has copied yet: the buffer is still the receiver's to read
    if (!receive_first) {
      w.e1->progress();  // the message arrives before its receive: nothing is copied, it stays where it lies
      CHECK_FALSE(s->test());
      r = w.e1->recv(kEnv, got.data(), n, 0);  // the receive arrives second: it copies now
    }
    CHECK(r->test());
    CHECK(expect_payload(got.data(), 0, n, 1, "received").empty());
    CHECK(s->test());
    w.arena0->release(src);
  }
}

TEST_CASE("sends from outside the heap, or smaller than kByReferenceFrom, stream through the slots as before") {
  Pair w;
  const Bytes big = payload(0, 2 * kSlotBytes, 2), small = payload(0, kByReferenceFrom - 1, 3);
  std::byte* small_in_heap = w.heap_copy(small);
  Bytes got_big(big.size()), got_small(small.size());
  Pending s1 = w.e0->send(kEnv, big.data(), big.size(), 1);  // private memory: no reference possible
  Pending s2 = w.e0->send(kEnv, small_in_heap, small.size(), 1);
  CHECK(w.e0->sent_by_reference() == 0);
  CHECK(w.e0->sent_through_slots() == 2);
  CHECK(s1->test());  // streamed into the ring at once: complete without the receiver
  CHECK(s2->test());
  Pending r1 = w.e1->recv(kEnv, got_big.data(), got_big.size(), 0);
  Pending r2 = w.e1->recv(kEnv, got_small.data(), got_small.size(), 0);
  CHECK(r1->test());
  CHECK(r2->test());
  CHECK(got_big == big);
  CHECK(got_small == small);
}

TEST_CASE("a receive with a fold folds a message sent by reference straight out of the sender's buffer") {
  Pair w;
  const std::size_t count = 10000;
  std::vector<float> message(count), own(count), got(count);
  for (std::size_t i = 0; i < count; ++i) {
    message[i] = static_cast<float>(i % 97);
    own[i] = static_cast<float>(i % 13);
  }
  auto* src = static_cast<float*>(w.arena0->allocate(count * sizeof(float)));
  std::memcpy(src, message.data(), count * sizeof(float));
  Pending s = w.e0->send(kEnv, src, count * sizeof(float), 1);
  REQUIRE(w.e0->sent_by_reference() == 1);
  Pending r =
      w.e1->recv(kEnv, got.data(), count * sizeof(float), 0, Landing{Fold{own.data(), DType::f32, ReduceOp::sum}});
  CHECK(r->test());
  CHECK(s->test());
  int wrong = 0;
  for (std::size_t i = 0; i < count; ++i) wrong += got[i] != message[i] + own[i];
  CHECK(wrong == 0);
}

TEST_CASE("a mismatched receive of a message sent by reference fails, naming both sizes, and frees its sender") {
  Pair w;
  const std::size_t n = 64 * 1024;
  std::byte* src = w.heap_copy(payload(0, n, 4));
  Bytes got(n + 8);
  Pending s = w.e0->send(kEnv, src, n, 1);
  Pending r = w.e1->recv(kEnv, got.data(), n + 8, 0);
  CHECK_THROWS_WITH_AS(r->test(), doctest::Contains("sizes must match"), Error);
  CHECK(s->test());  // the sender goes on; its rank learns of the failure from the run
}

TEST_CASE("a send by reference given up by its rank lands zeros, and its stream stays usable") {
  Pair w;
  const std::size_t n = 64 * 1024;
  std::byte* src = w.heap_copy(payload(0, n, 5));
  {
    Pending s = w.e0->send(kEnv, src, n, 1);
    REQUIRE(w.e0->sent_by_reference() == 1);
  }  // destroyed unwaited: revoked (its rank is failing and its buffer may go)
  Bytes got(n, std::byte{1});
  Pending r = w.e1->recv(kEnv, got.data(), n, 0);
  CHECK(r->test());
  CHECK(got == Bytes(n));
  // The next message of the stream arrives intact.
  std::byte* next = w.heap_copy(payload(0, n, 6));
  Pending s2 = w.e0->send(kEnv, next, n, 1);
  Pending r2 = w.e1->recv(kEnv, got.data(), n, 0);
  CHECK(r2->test());
  CHECK(expect_payload(got.data(), 0, n, 6, "second").empty());
  CHECK(s2->test());
}

TEST_CASE("messages sent by reference and through the slots keep their order within a stream") {
  Pair w;
  const std::size_t sizes[] = {kByReferenceFrom, 100, 5 * kSlotBytes, kByReferenceFrom - 1, 3 * kByReferenceFrom};
  std::vector<Pending> sends, recvs;
  std::vector<Bytes> got;
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    std::byte* src = w.heap_copy(payload(0, sizes[i], 10 + i));
    sends.push_back(w.e0->send(kEnv, src, sizes[i], 1));
  }
  for (std::size_t i = 0; i < std::size(sizes); ++i) got.emplace_back(sizes[i]);
  for (std::size_t i = 0; i < std::size(sizes); ++i) recvs.push_back(w.e1->recv(kEnv, got[i].data(), sizes[i], 0));
  for (int turn = 0; turn < 100; ++turn) {  // the two endpoints take turns until everything has moved
    w.e0->progress();
    w.e1->progress();
  }
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    CAPTURE(i);
    CHECK(recvs[i]->test());
    CHECK(sends[i]->test());
    CHECK(expect_payload(got[i].data(), 0, sizes[i], 10 + i, "message").empty());
  }
  CHECK(w.e0->sent_by_reference() == 3);
  CHECK(w.e0->sent_through_slots() == 2);
}

TEST_CASE("a receiver rings its sender's doorbell only when the sender found the ring full and asked for room") {
  Pair w;
  const std::size_t slots = ShmWorld::slots_per_ring(2, kArena);  // a launch with a heap: kMinSlotsPerRing
  REQUIRE(slots == kMinSlotsPerRing);
  const std::size_t n = 1024;  // one slot each, sent at once (outside the heap, and small)
  const std::atomic<std::uint32_t>& sender_bell = w.world->bell(0).seq;

  // 1. A message the ring has room for: draining it does not wake the sender (it may sleep on its own receives).
  const Bytes first = payload(0, n, 20);
  Bytes got(n);
  Pending s = w.e0->send(kEnv, first.data(), n, 1);
  CHECK(s->test());
  std::uint32_t before = sender_bell.load();
  Pending r = w.e1->recv(kEnv, got.data(), n, 0);
  CHECK(r->test());
  CHECK(got == first);
  CHECK(sender_bell.load() == before);

  // 2. One message more than the ring holds: the last waits for room, and the drain that frees a slot rings.
  std::vector<Bytes> msgs, into(slots + 1, Bytes(n));
  std::vector<Pending> sends, recvs;
  for (std::size_t i = 0; i <= slots; ++i) msgs.push_back(payload(0, n, 21 + i));
  for (std::size_t i = 0; i <= slots; ++i) sends.push_back(w.e0->send(kEnv, msgs[i].data(), n, 1));
  for (std::size_t i = 0; i < slots; ++i) CHECK(sends[i]->test());
  CHECK_FALSE(sends[slots]->test());  // the ring is full
  before = sender_bell.load();
  for (std::size_t i = 0; i <= slots; ++i) recvs.push_back(w.e1->recv(kEnv, into[i].data(), n, 0));
  CHECK(sender_bell.load() != before);  // rung: the sender may have been asleep, waiting for room
  CHECK(sends[slots]->test());          // its last message goes now
  for (std::size_t i = 0; i <= slots; ++i) {
    CHECK(recvs[i]->test());
    CHECK(into[i] == msgs[i]);
  }
}
