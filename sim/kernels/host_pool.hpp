// A cache of host memory blocks for the CPU device.
//
// Why: the strategies allocate the same buffer sizes on every call (K/V receive buffers, partial outputs, the
// all-gathered K/V), and memory the process has never touched is slow to use the first time: the kernel zero-fills
// a page on its first write, which costs far more than writing a page already mapped (on small virtual machines
// tens of times more; `cpsim bench strategies` shows it as strategies slower than one process). Blocks given back
// are kept, per exact size, and handed out again; the allocator of the C library returns large blocks to the
// system on free, so without the cache every call would fault its pages in afresh.
//
// In a process with a host arena (a rank of the processes backend: sim/core/host_arena.hpp, the run's shared heap)
// the blocks asked for there (Where::shared_heap: the buffers messages are sent from and received into) come from
// the arena first (its memory stays mapped when given back, so it needs no cache), from the cache when the arena is
// full. Every other block is the process's own: shared memory's pages cost more to back and to give back than
// private ones (docs/backends-threads-processes.md), so only what a peer must read or write lies there.
//
// Bounds: at most kMaxCachedBytes stay cached (a block that would exceed it is freed); blocks are 64-byte aligned.
// Thread safe (threads-backend ranks share one pool) and fork safe (the processes backend forks ranks: the pool's
// lock is held across fork, so a child never inherits it locked).
#pragma once
#include <cstddef>

namespace cpsim::host_pool {

inline constexpr std::size_t kAlign = 64;                             // one cache line, and Eigen's widest packet
inline constexpr std::size_t kMaxCachedBytes = std::size_t{2} << 30;  // 2 GiB

enum class Where { own, shared_heap };

// A block of at least `bytes` bytes (rounded up to kAlign), contents unspecified; nullptr when out of memory.
void* take(std::size_t bytes, Where where = Where::own);
// Gives back a block take(bytes) returned, with the same `bytes`.
void give(void* p, std::size_t bytes);
// Frees every cached block (tests; a long-lived process that wants its memory back).
void release();
// Bytes cached now (tests).
std::size_t cached_bytes();

}  // namespace cpsim::host_pool
