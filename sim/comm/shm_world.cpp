#include "sim/comm/shm_world.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

namespace cpsim {

static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to work across processes");
static_assert(sizeof(SlotHeader) <= Ring::kHeaderStride);

namespace {

constexpr std::uint64_t kMagic = 0x63707369'6d73686dULL;  // "cpsimshm"

constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t n) {
  return (n + 63) / 64 * 64;
}

}  // namespace

SlotHeader* Ring::free_slot() const {
  const std::uint64_t head = c_->head.load(std::memory_order_relaxed);
  if (head - c_->tail.load(std::memory_order_acquire) >= n_) return nullptr;
  return slot(head);
}

// Dekker-style with release(): the producer announces itself, then looks at tail again; the consumer moves tail, then
// looks for the announcement (both sequentially consistent), so one of them sees the other.
bool Ring::want_room() const {
  c_->room_wanted.store(1, std::memory_order_seq_cst);
  return c_->head.load(std::memory_order_relaxed) - c_->tail.load(std::memory_order_seq_cst) < n_;
}

SlotHeader* Ring::filled_slot() const {
  const std::uint64_t tail = c_->tail.load(std::memory_order_relaxed);
  if (tail == c_->head.load(std::memory_order_acquire)) return nullptr;
  return slot(tail);
}

std::size_t ShmWorld::slots_per_ring(int ranks, std::size_t arena) {
  if (arena > 0) return kMinSlotsPerRing;
  const std::size_t rings = static_cast<std::size_t>(ranks) * (static_cast<std::size_t>(ranks) + 1);
  return std::clamp(kRingBudget / (rings * Ring::kStride), kMinSlotsPerRing, kMaxSlotsPerRing);
}

namespace {

// Bytes before the rings, before the token table, and before the heap (page-aligned, so that each arena starts on
// a page).
std::size_t rings_at(int ranks) {
  return round_up(sizeof(ShmControl)) + round_up(sizeof(std::atomic<std::int32_t>) * ranks) +
         sizeof(Doorbell) * (static_cast<std::size_t>(ranks) + 1);
}
std::size_t tokens_at(int ranks, std::size_t arena) {
  const std::size_t endpoints = static_cast<std::size_t>(ranks) + 1;
  return rings_at(ranks) +
         Ring::bytes(ShmWorld::slots_per_ring(ranks, arena)) * static_cast<std::size_t>(ranks) * endpoints;
}
std::size_t heap_start(int ranks, std::size_t arena) {
  const std::size_t end = tokens_at(ranks, arena) + sizeof(std::atomic<std::uint32_t>) * kRefTokens * ranks;
  return (end + kPage - 1) / kPage * kPage;
}
// The whole pages that hold [from, to).
ShmWorld::Pages pages(std::size_t from, std::size_t to) {
  const std::size_t first = from / kPage * kPage;
  return {first, (to + kPage - 1) / kPage * kPage - first};
}

}  // namespace

std::size_t ShmWorld::heap_offset(int ranks, std::size_t arena) {
  return heap_start(ranks, arena);
}

std::vector<ShmWorld::Pages> ShmWorld::launcher_pages(int ranks, std::size_t arena) {
  const std::size_t ring = Ring::bytes(slots_per_ring(ranks, arena)), rings = rings_at(ranks);
  std::vector<Pages> out{pages(0, rings)};
  for (std::size_t i = 0; i < static_cast<std::size_t>(ranks) * (static_cast<std::size_t>(ranks) + 1); ++i)
    out.push_back(pages(rings + i * ring, rings + i * ring + sizeof(RingCounters)));
  out.push_back(pages(tokens_at(ranks, arena), heap_start(ranks, arena)));
  return out;
}

ShmWorld::Pages ShmWorld::rings_of(int src, int ranks, std::size_t arena) {
  const std::size_t ring = Ring::bytes(slots_per_ring(ranks, arena)), per_rank = ring * (ranks + 1);
  const std::size_t first = rings_at(ranks) + static_cast<std::size_t>(src) * per_rank;
  return pages(first + sizeof(RingCounters), first + per_rank);
}

std::size_t ShmWorld::bytes_needed(int ranks, std::size_t arena) {
  return heap_start(ranks, arena) + arena * static_cast<std::size_t>(ranks);
}

ShmWorld::ShmWorld(void* base, int ranks, std::size_t arena, bool init)
    : ranks_(ranks), slots_(slots_per_ring(ranks, arena)), arena_(arena) {
  auto* p = static_cast<std::byte*>(base);
  control_ = reinterpret_cast<ShmControl*>(p);
  p += round_up(sizeof(ShmControl));
  status_ = reinterpret_cast<std::atomic<std::int32_t>*>(p);
  p += round_up(sizeof(std::atomic<std::int32_t>) * ranks);
  bells_ = reinterpret_cast<Doorbell*>(p);
  rings_ = static_cast<std::byte*>(base) + rings_at(ranks);  // after the doorbells
  tokens_ = reinterpret_cast<std::atomic<std::uint32_t>*>(static_cast<std::byte*>(base) + tokens_at(ranks, arena));
  heap_ = static_cast<std::byte*>(base) + heap_start(ranks, arena);
  if (!init) return;
  for (std::size_t i = 0; i < static_cast<std::size_t>(ranks) * kRefTokens; ++i)
    new (&tokens_[i]) std::atomic<std::uint32_t>(static_cast<std::uint32_t>(RefToken::free));
  new (control_) ShmControl();
  control_->magic = kMagic;
  control_->ranks = ranks;
  for (int r = 0; r < ranks; ++r) new (&status_[r]) std::atomic<std::int32_t>(static_cast<int>(ShmStatus::running));
  for (int e = 0; e <= ranks; ++e) new (&bells_[e]) Doorbell();
  for (int s = 0; s < ranks; ++s)
    for (int d = 0; d <= ranks; ++d)
      new (rings_ + (static_cast<std::size_t>(s) * (ranks + 1) + d) * Ring::bytes(slots_)) RingCounters();
}

bool ShmWorld::in_heap(const void* p, std::size_t bytes, std::uint64_t* offset) const {
  const auto* b = static_cast<const std::byte*>(p);
  const std::byte* end = heap_ + arena_ * static_cast<std::size_t>(ranks_);
  if (arena_ == 0 || b < heap_ || b >= end || bytes > static_cast<std::size_t>(end - b)) return false;
  *offset = static_cast<std::uint64_t>(b - heap_);
  return true;
}

Ring ShmWorld::ring(int src, int dst) const {
  std::byte* at = rings_ + (static_cast<std::size_t>(src) * (ranks_ + 1) + dst) * Ring::bytes(slots_);
  return Ring(reinterpret_cast<RingCounters*>(at), at + sizeof(RingCounters), slots_);
}

void ShmWorld::fail(int rank, std::string_view what, ShmStatus status) const {
  std::int32_t none = -1;
  if (control_->failed_rank.compare_exchange_strong(none, rank)) {
    const std::size_t n = std::min(what.size(), sizeof(control_->failure) - 1);
    std::memcpy(control_->failure, what.data(), n);
    control_->failure[n] = '\0';
    control_->failure_ready.store(1);
  }
  set_status(rank, status);
  control_->aborted.store(1);
  ring_all();
}

void ShmWorld::ring_all() const {
  for (int e = 0; e <= ranks_; ++e) bells_[e].ring();
}

std::string ShmWorld::failure() const {
  if (control_->failure_ready.load() == 0) return "failed";
  return std::string(control_->failure);
}

}  // namespace cpsim
