// Where a rank's host buffers come from when its process has an arena for them: the processes backend gives each
// rank process one in the run's shared heap (sim/comm/shm_heap.hpp), so that a message sent from such a buffer is
// copied once, by its receiver, straight out of it. Without an arena (every other backend, and the processes
// backend's launcher) host memory is the C library's.
//
// The CPU device's message buffers (BufferUse::message, sim/kernels/device.hpp) take their memory here
// (sim/kernels/host_pool.hpp); so can any container (ArenaAllocator), as the communicators' scratch, their tests
// and `cpsim bench comm` do for the buffers they send from and into.
#pragma once
#include <cstddef>
#include <new>

namespace cpsim {

class HostArena {
 public:
  virtual ~HostArena() = default;
  // A block of at least `bytes` bytes aligned to 64, or null when the arena has no room (the caller then uses the
  // C library's memory).
  virtual void* allocate(std::size_t bytes) = 0;
  // Takes p back if it is one of this arena's blocks; false otherwise.
  virtual bool release(void* p) = 0;
};

// This process's arena, or null. Installed once, by the process that owns it, before it allocates from it; blocks
// taken from it must be given back while it is installed.
HostArena* host_arena();
void install_host_arena(HostArena* arena);

// Host memory from the arena when there is one and it has room, else 64-byte-aligned memory of the C library.
void* host_allocate(std::size_t bytes);  // null when out of memory
void host_release(void* p);

// A standard allocator over host_allocate / host_release.
template <class T>
struct ArenaAllocator {
  using value_type = T;
  ArenaAllocator() = default;
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    void* p = host_allocate(n * sizeof(T));
    if (p == nullptr && n > 0) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) noexcept { host_release(p); }
  template <class U>
  bool operator==(const ArenaAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace cpsim
