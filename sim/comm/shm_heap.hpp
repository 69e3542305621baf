// The processes backend's shared heap: the part of the run's segment (shm_world.hpp) that holds the ranks' buffers,
// one arena per rank. Every rank process maps the whole heap (the segment is mapped before fork), so a receiver
// copies a message straight out of its sender's buffer (shm_engine.hpp: sends by reference).
//
// A rank allocates only from its own arena: Boost.Interprocess's best-fit allocator (rbtree_best_fit) over that
// memory, installed as the process's host arena (sim/core/host_arena.hpp), so the CPU device's message buffers
// (BufferUse::message: the ones sent from and received into) live there; its other buffers are the process's own.
// No lock is shared between processes: a killed rank can leave nothing locked that another needs.
//
// Sizing (arena_bytes): the caller names each rank's need (LaunchOptions::heap_bytes: a run's exact per-rank peak
// of live message buffers, from the counting device; the bench's buffers), and each arena holds that plus the
// allocator's own room: its header, a block header and alignment per block, and an eighth for fragmentation. A
// block that still does not fit comes from the C library, and messages sent from it go through the slot rings (two
// copies).
#pragma once
#include <boost/interprocess/indexes/iset_index.hpp>
#include <boost/interprocess/managed_external_buffer.hpp>
#include <boost/interprocess/mem_algo/rbtree_best_fit.hpp>
#include <boost/interprocess/sync/mutex_family.hpp>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "sim/core/host_arena.hpp"

namespace cpsim {

// An arena's size for a need of `need` bytes of live buffers (0: no heap).
std::size_t arena_bytes(std::size_t need);

class RankArena final : public HostArena {
 public:
  // Lays out a fresh arena over [base, base + bytes) (its owner's memory in the heap).
  RankArena(std::byte* base, std::size_t bytes);
  void* allocate(std::size_t bytes) override;
  bool release(void* p) override;
  std::size_t free_bytes();
  std::uint64_t hits() const { return hits_; }      // allocations it served
  std::uint64_t misses() const { return misses_; }  // allocations that did not fit

 private:
  using Memory = boost::interprocess::basic_managed_external_buffer<
      char, boost::interprocess::rbtree_best_fit<boost::interprocess::null_mutex_family>,
      boost::interprocess::iset_index>;
  std::mutex m_;  // the rank process's own threads (the arena's allocator takes no lock)
  std::byte* lo_;
  std::byte* hi_;
  Memory memory_;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

}  // namespace cpsim
