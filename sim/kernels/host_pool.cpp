#include "sim/kernels/host_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "sim/core/host_arena.hpp"

namespace cpsim::host_pool {
namespace {

std::size_t padded(std::size_t bytes) {
  return (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
}

struct Pool {
  std::mutex m;
  std::unordered_map<std::size_t, std::vector<void*>> free_blocks;  // padded size -> blocks
  std::size_t cached = 0;

  Pool() {
    // Hold the lock across fork so the child's copy is consistent, then release it on both sides.
    pthread_atfork([] { instance().m.lock(); }, [] { instance().m.unlock(); }, [] { instance().m.unlock(); });
  }
  static Pool& instance() {
    static Pool* pool = new Pool;  // never destroyed: blocks may be given back during static destruction
    return *pool;
  }
};

}  // namespace

void* take(std::size_t bytes, Where where) {
  const std::size_t n = padded(bytes);
  if (where == Where::shared_heap)
    if (HostArena* arena = host_arena())  // a rank of the processes backend: its message buffers live there
      if (void* p = arena->allocate(n)) return p;
  Pool& pool = Pool::instance();
  {
    std::lock_guard lk(pool.m);
    auto it = pool.free_blocks.find(n);
    if (it != pool.free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      pool.cached -= n;
      return p;
    }
  }
  return std::aligned_alloc(kAlign, n);
}

void give(void* p, std::size_t bytes) {
  if (p == nullptr) return;
  if (HostArena* arena = host_arena(); arena && arena->release(p)) return;
  const std::size_t n = padded(bytes);
  Pool& pool = Pool::instance();
  {
    std::lock_guard lk(pool.m);
    if (pool.cached + n <= kMaxCachedBytes) {
      pool.free_blocks[n].push_back(p);
      pool.cached += n;
      return;
    }
  }
  std::free(p);
}

void release() {
  Pool& pool = Pool::instance();
  std::lock_guard lk(pool.m);
  for (auto& [n, blocks] : pool.free_blocks)
    for (void* p : blocks) std::free(p);
  pool.free_blocks.clear();
  pool.cached = 0;
}

std::size_t cached_bytes() {
  Pool& pool = Pool::instance();
  std::lock_guard lk(pool.m);
  return pool.cached;
}

}  // namespace cpsim::host_pool
