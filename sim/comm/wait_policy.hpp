// How a waiting rank waits, on both CPU backends: it polls a little, then sleeps on its doorbell.
//
// WaitPolicy: with more ranks than cores (4 ranks on 2 cores) a spinning rank takes the core its peer needs,
// so it yields the core on every turn of its poll, and sleeps only after 1 ms of polling. A sleeper costs its waker
// a futex wake-up, and on a virtual machine waking a core that went idle presumably passes through the host too:
// tens of microseconds at times (docs/performance/comm.md, "How a rank waits"). 1 ms covers a message of a few MiB in
// flight; a longer wait (a peer still computing) sleeps. CPSIM_WAIT_SPIN_US sets another length, to compare waits.
// Doorbell: a 32-bit counter per rank. Whoever completes something a rank may wait for bumps it; a waiting
// rank sleeps on it with futex(FUTEX_WAIT) and a timeout. The ringer makes the wake-up syscall only when a
// sleeper has announced itself, so the common case (the peer is running or polling) costs one atomic add.
// A futex on a word of a MAP_SHARED mapping works across processes, so the same doorbell serves the threads
// backend (process memory) and the processes backend (the shared segment).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

namespace cpsim {

// How long a waiting rank polls before it sleeps: CPSIM_WAIT_SPIN_US microseconds where that is set, else 1 ms.
// Read once per process.
std::chrono::microseconds wait_spin();
// CPSIM_WAIT_SPIN_US's text as microseconds; nothing unless it is a whole number from 0 to 1000000.
std::optional<std::chrono::microseconds> parse_wait_spin(const char* text);
// Refuses (UsageError) a CPSIM_WAIT_SPIN_US that is set but not such a number; launch() asks before any rank starts.
void check_wait_spin();

class WaitPolicy {
 public:
  // True while the rank should poll once more (after yielding the core); false when it should sleep.
  bool spin() {
    const auto now = std::chrono::steady_clock::now();
    if (spins_++ == 0) start_ = now;
    if (now - start_ > spin_for_) return false;
    std::this_thread::yield();
    return true;
  }
  void reset() { spins_ = 0; }

 private:
  std::chrono::microseconds spin_for_ = wait_spin();
  int spins_ = 0;
  std::chrono::steady_clock::time_point start_;
};

struct alignas(64) Doorbell {
  std::atomic<std::uint32_t> seq{0};
  std::atomic<std::uint32_t> sleepers{0};
  void ring();
  // Sleeps until seq != seen, a ring, a signal, or `max` has passed.
  void sleep(std::uint32_t seen, std::chrono::microseconds max);
};

}  // namespace cpsim
