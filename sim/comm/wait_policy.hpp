// How a waiting rank waits, on both CPU backends: it polls a little, then sleeps on its doorbell.
//
// WaitPolicy: with more ranks than cores (4 ranks on 2 cores) a spinning rank takes the core its peer needs,
// so the spin is short and yields the core on every turn; after it the rank sleeps.
// Doorbell: a 32-bit counter per rank. Whoever completes something a rank may wait for bumps it; a waiting
// rank sleeps on it with futex(FUTEX_WAIT) and a timeout. The ringer makes the wake-up syscall only when a
// sleeper has announced itself, so the common case (the peer is running or polling) costs one atomic add.
// A futex on a word of a MAP_SHARED mapping works across processes, so the same doorbell serves the threads
// backend (process memory) and the processes backend (the shared segment).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

namespace cpsim {

class WaitPolicy {
 public:
  // True while the rank should poll once more (after yielding the core); false when it should sleep.
  bool spin() {
    const auto now = std::chrono::steady_clock::now();
    if (spins_++ == 0) start_ = now;
    if (now - start_ > kSpinFor) return false;
    std::this_thread::yield();
    return true;
  }
  void reset() { spins_ = 0; }

 private:
  static constexpr std::chrono::microseconds kSpinFor{10};
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
