// The mailboxes' protocol (sim/comm/mailbox.hpp) on its own, one endpoint's calls at a time: order, sizes, a full
// pool, messages left behind, and a rank that dies holding the lock.
#include "sim/comm/mailbox.hpp"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace cpsim;

namespace {

// A pool of at most `capacity` bytes in flight, counting its blocks; `die_in_allocate`: the process kills itself
// while it allocates (with the lock held).
class TestPool final : public MessagePool {
 public:
  explicit TestPool(std::size_t capacity) : capacity_(capacity) {}
  void* allocate(std::size_t bytes) override {
    if (die_in_allocate) ::raise(SIGKILL);
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    ++blocks;
    sizes_.push_back({std::aligned_alloc(64, bytes), bytes});
    return sizes_.back().first;
  }
  void release(void* p) override {
    for (auto& [q, n] : sizes_)
      if (q == p) {
        used_ -= n;
        q = nullptr;
      }
    std::free(p);
    --blocks;
  }
  std::size_t capacity() const override { return capacity_; }
  int blocks = 0;
  bool die_in_allocate = false;

 private:
  std::size_t capacity_, used_ = 0;
  std::vector<std::pair<void*, std::size_t>> sizes_;
};

// Mailboxes for `endpoints` endpoints in memory shared with forked children.
struct World {
  std::size_t bytes;
  void* memory;
  TestPool pool;
  Mailboxes boxes;
  World(int endpoints, std::size_t capacity)
      : bytes(Mailboxes::bytes_needed(endpoints)),
        memory(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)),
        pool(capacity),
        boxes(memory, endpoints, pool, true) {}
  ~World() {
    boxes.discard_unreceived();
    ::munmap(memory, bytes);
  }
};

const Envelope kEnv{kWorldContext, Channel::p2p, CollectiveKind::none, 3, 0};
constexpr auto kTimeout = std::chrono::milliseconds(200);

}  // namespace

TEST_CASE("receives of one stream take its messages in posting order, whatever order they are waited in") {
  World w(2, 1 << 20);
  Postbox zero(w.boxes, 0, kTimeout), one(w.boxes, 1, kTimeout);
  int a = 0, b = 0;
  Pending first = one.recv(kEnv, &a, sizeof a, 0), second = one.recv(kEnv, &b, sizeof b, 0);
  for (int v : {10, 20}) {
    Pending s = zero.send(kEnv, &v, sizeof v, 1);
    CHECK(s->test());  // complete at once: the message is in the mailbox
  }
  wait(second);
  wait(first);
  CHECK(a == 10);
  CHECK(b == 20);
  CHECK(w.pool.blocks == 0);  // both blocks back in the pool
}

TEST_CASE("a message to a receive posted later waits in the mailbox, and one of another size fails the receive") {
  World w(2, 1 << 20);
  Postbox zero(w.boxes, 0, kTimeout), one(w.boxes, 1, kTimeout);
  const std::vector<char> out(5000, 'x');
  zero.send(kEnv, out.data(), out.size(), 1);
  CHECK(w.pool.blocks == 1);
  std::vector<char> in(4000);
  Pending r = one.recv(kEnv, in.data(), in.size(), 0);
  CHECK_THROWS_WITH_AS(wait(r), doctest::Contains("4000 bytes, but rank 0 sent 5000 bytes"), Error);
  CHECK(w.pool.blocks == 0);
}

TEST_CASE("a message larger than the memory for messages in flight fails its send at once, naming both sizes") {
  World w(2, 4096);
  Postbox zero(w.boxes, 0, kTimeout);
  const std::vector<char> out(8192);
  CHECK_THROWS_WITH_AS(zero.send(kEnv, out.data(), out.size(), 1),
                       doctest::Contains("a message of 8192 bytes in send to rank 1 (tag 3) is larger than the memory "
                                         "for messages in flight (4096 bytes)"),
                       Error);
}

TEST_CASE("a send that finds the memory for messages full waits for room, and reports the timeout if none comes") {
  World w(2, 4096);
  Postbox zero(w.boxes, 0, kTimeout);
  const std::vector<char> out(3000);
  zero.send(kEnv, out.data(), out.size(), 1);  // 3 KiB of 4 taken, never received
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(zero.send(kEnv, out.data(), out.size(), 1),
                       doctest::Contains("waited 0.2 s in send to rank 1 (tag 3): likely deadlock (the memory for "
                                         "messages in flight stayed full)"),
                       Error);
  CHECK(std::chrono::steady_clock::now() - t0 >= kTimeout);
}

TEST_CASE("messages never received go back to the pool when the launch ends") {
  World w(3, 1 << 20);
  Postbox zero(w.boxes, 0, kTimeout);
  const int v = 7;
  for (int dst : {1, 2, 2}) zero.send(kEnv, &v, sizeof v, dst);
  CHECK(w.pool.blocks == 3);
  w.boxes.discard_unreceived();
  CHECK(w.pool.blocks == 0);
}

TEST_CASE("a receive whose peer finished without sending fails at once, naming both ranks") {
  World w(2, 1 << 20);
  Postbox one(w.boxes, 1, std::chrono::seconds(30));
  w.boxes.set_status(0, RankStatus::finished);
  int x = 0;
  Pending r = one.recv(kEnv, &x, sizeof x, 0);
  CHECK_THROWS_WITH_AS(wait(r), doctest::Contains("rank 1 waited in recv from rank 0 (tag 3), but rank 0 had already "
                                                  "finished without sending it"),
                       Error);
  Pending again = one.recv(kEnv, &x, sizeof x, 0);
  CHECK_THROWS_AS(wait(again), Aborted);  // a failed endpoint's later waits fail at once
}

TEST_CASE("a rank that dies holding the lock stops the others' waits at once instead of leaving them locked out") {
  World w(2, 1 << 20);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // rank 0: killed inside the pool's allocate, with the lock held
    w.pool.die_in_allocate = true;
    Postbox zero(w.boxes, 0, kTimeout);
    const int v = 1;
    zero.send(kEnv, &v, sizeof v, 1);
    ::_exit(0);
  }
  int st = 0;
  REQUIRE(::waitpid(child, &st, 0) == child);
  REQUIRE(WIFSIGNALED(st));
  Postbox one(w.boxes, 1, std::chrono::seconds(30));
  int x = 0;
  const auto t0 = std::chrono::steady_clock::now();
  Pending r;
  try {
    r = one.recv(kEnv, &x, sizeof x, 0);
    wait(r);
    FAIL("the receive should have stopped");
  } catch (const Aborted& e) {
    CHECK(std::string(e.what()).find("a rank died while it held the mailboxes' lock") != std::string::npos);
  }
  CHECK(w.boxes.aborted());
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  r.reset();
}
