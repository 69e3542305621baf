// The host pool: blocks given back are handed out again for the same size, aligned, and the cache is bounded; in a
// process with a host arena only the blocks asked for in the shared heap (the CPU device's message buffers) come
// from it.
#include "sim/kernels/host_pool.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "device_util.hpp"
#include "sim/core/host_arena.hpp"

using namespace cpsim;

namespace {

// An arena over a vector: blocks handed out one after another, never reused; it counts what it holds.
class BumpArena final : public HostArena {
 public:
  void* allocate(std::size_t bytes) override {
    void* p = memory_.data() + used_;
    std::size_t room = memory_.size() - used_;
    if (std::align(64, bytes, p, room) == nullptr) return nullptr;
    used_ = static_cast<std::size_t>(static_cast<std::byte*>(p) - memory_.data()) + bytes;
    ++held_;
    return p;
  }
  bool release(void* p) override {
    if (!holds(p)) return false;
    --held_;
    return true;
  }
  bool holds(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    return b >= memory_.data() && b < memory_.data() + memory_.size();
  }
  int held() const { return held_; }

 private:
  std::vector<std::byte> memory_ = std::vector<std::byte>(1 << 16);
  std::size_t used_ = 0;
  int held_ = 0;
};

// Installs an arena for one scope, as a processes-backend rank does for its life.
struct Installed {
  explicit Installed(HostArena* a) { install_host_arena(a); }
  ~Installed() { install_host_arena(nullptr); }
};

}  // namespace

TEST_CASE("a block given back is handed out again for the same size and is aligned to a cache line") {
  host_pool::release();
  void* a = host_pool::take(1000);
  REQUIRE(a != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(a) % host_pool::kAlign == 0);
  std::memset(a, 7, 1000);  // the whole block is writable
  host_pool::give(a, 1000);
  CHECK(host_pool::cached_bytes() == 1024);  // rounded up to the alignment
  void* b = host_pool::take(1000);
  CHECK(b == a);
  CHECK(host_pool::cached_bytes() == 0);
  void* c = host_pool::take(5000);  // another size gets another block
  CHECK(c != a);
  host_pool::give(b, 1000);
  host_pool::give(c, 5000);
  host_pool::release();
  CHECK(host_pool::cached_bytes() == 0);
}

TEST_CASE("a block that would push the cache past its bound is freed instead of kept") {
  host_pool::release();
  const std::size_t big = host_pool::kMaxCachedBytes / 2 + host_pool::kAlign;
  void* a = host_pool::take(big);
  void* b = host_pool::take(big);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  host_pool::give(a, big);
  host_pool::give(b, big);  // two would exceed the bound: only the first is cached
  CHECK(host_pool::cached_bytes() == big);
  host_pool::release();
}

TEST_CASE("the CPU device zero-fills a reused block") {
  Recorder rec;
  CpuDevice dev(rec);
  {
    const Buffer a = dev.alloc({1, 8, 2, 4}, DType::f32, Layout::bsnd, "a");
    dev.fill(View(a), 3.0);
  }
  const Buffer b = dev.alloc({1, 8, 2, 4}, DType::f32, Layout::bsnd, "b");
  for (double x : download_values(dev, b)) REQUIRE(x == 0);
}

TEST_CASE("with a host arena, only blocks asked for in the shared heap come from it") {
  BumpArena arena;
  Installed installed(&arena);
  void* shared = host_pool::take(1000, host_pool::Where::shared_heap);
  void* own = host_pool::take(1000);
  CHECK(arena.holds(shared));
  CHECK_FALSE(arena.holds(own));
  CHECK(arena.held() == 1);
  host_pool::give(shared, 1000);  // back to the arena, not into the cache
  host_pool::give(own, 1000);
  CHECK(arena.held() == 0);
  host_pool::release();
}

TEST_CASE("the CPU device places message buffers in the host arena and counts their bytes apart") {
  BumpArena arena;
  Installed installed(&arena);
  Recorder rec;
  CpuDevice dev(rec);
  {
    const Buffer kv = dev.alloc({2, 8, 2, 4}, DType::f32, Layout::bsnd, "kv", BufferUse::message);  // 512 bytes
    const Buffer out = dev.alloc({1, 8, 4, 4}, DType::f64, Layout::bsnd, "out");                    // 1 KiB
    CHECK(arena.holds(kv.data()));
    CHECK_FALSE(arena.holds(out.data()));
    CHECK(rec.memory()->message_current.load() == 512);
    CHECK(rec.memory()->current.load() == 512 + 1024);
  }
  CHECK(arena.held() == 0);
  CHECK(rec.memory()->message_current.load() == 0);
  CHECK(rec.message_peak_bytes() == 512);
  CHECK(rec.peak_bytes() == 512 + 1024);
  host_pool::release();
}
