// The host pool: blocks given back are handed out again for the same size, aligned, and the cache is bounded.
#include "sim/kernels/host_pool.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

#include "device_util.hpp"

using namespace cpsim;

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
