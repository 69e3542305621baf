#include "sim/comm/shm_heap.hpp"

#include <new>

namespace cpsim {

namespace bip = boost::interprocess;

namespace {
constexpr std::size_t kBlockAlign = 64;
constexpr std::size_t kPage = 4096;
}  // namespace

std::size_t arena_bytes(std::size_t need) {
  if (need == 0) return 0;
  // The allocator's header and per-block room (a header and up to an alignment per block, for up to 4096 blocks
  // at once), and an eighth for the gaps that blocks of many sizes leave.
  const std::size_t room = 64 * 1024 + 4096 * 2 * kBlockAlign + need / 8;
  return (need + room + kPage - 1) / kPage * kPage;
}

RankArena::RankArena(std::byte* base, std::size_t bytes)
    : lo_(base), hi_(base + bytes), memory_(bip::create_only, base, bytes) {}

void* RankArena::allocate(std::size_t bytes) {
  std::lock_guard lk(m_);
  void* p = memory_.allocate_aligned(bytes, kBlockAlign, std::nothrow);
  ++(p == nullptr ? misses_ : hits_);
  return p;
}

bool RankArena::release(void* p) {
  auto* b = static_cast<std::byte*>(p);
  if (b < lo_ || b >= hi_) return false;
  std::lock_guard lk(m_);
  memory_.deallocate(p);
  return true;
}

std::size_t RankArena::free_bytes() {
  std::lock_guard lk(m_);
  return memory_.get_free_memory();
}

}  // namespace cpsim
