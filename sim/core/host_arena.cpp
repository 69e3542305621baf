#include "sim/core/host_arena.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace cpsim {
namespace {

std::atomic<HostArena*> g_arena{nullptr};
constexpr std::size_t kAlign = 64;

}  // namespace

HostArena* host_arena() {
  return g_arena.load(std::memory_order_acquire);
}

void install_host_arena(HostArena* arena) {
  g_arena.store(arena, std::memory_order_release);
}

void* host_allocate(std::size_t bytes) {
  if (HostArena* a = host_arena())
    if (void* p = a->allocate(bytes)) return p;
  return std::aligned_alloc(kAlign, (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign);
}

void host_release(void* p) {
  if (p == nullptr) return;
  if (HostArena* a = host_arena(); a && a->release(p)) return;
  std::free(p);
}

}  // namespace cpsim
