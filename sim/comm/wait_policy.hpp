// How a waiting rank spends the moments before it sleeps. With more ranks than cores (4 ranks on 2 cores) a
// spinning rank takes the core its peer needs, so the spin is short and yields the core on every turn; after
// it the rank sleeps until its mailbox changes (condition variable, or futex on shared memory).
#pragma once
#include <chrono>
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

}  // namespace cpsim
