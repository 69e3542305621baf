// The mailboxes' lock (sim/comm/adaptive_mutex.hpp): it excludes, and a waiter gets it once it is released.
#include "sim/comm/adaptive_mutex.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

using namespace cpsim;

TEST_CASE("an adaptive mutex held by one thread is not taken by another until it is released") {
  AdaptiveMutex m;
  m.lock();
  bool taken_while_held = true;
  std::thread other([&] { taken_while_held = m.try_lock(); });
  other.join();
  CHECK_FALSE(taken_while_held);
  m.unlock();
  bool taken_after = false;
  std::thread again([&] {
    taken_after = m.try_lock();
    if (taken_after) m.unlock();
  });
  again.join();
  CHECK(taken_after);
}

TEST_CASE("an adaptive mutex keeps a shared count exact while more threads than cores add to it") {
  // Each thread reads the count, yields (so a missing exclusion would let another thread in between), and writes
  // it back plus one: without the lock, updates are lost.
  constexpr int kThreads = 4, kAdds = 2000;
  AdaptiveMutex m;
  long count = 0;
  std::atomic<int> inside{0}, most_inside{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kAdds; ++i) {
        std::lock_guard lk(m);
        const int now = inside.fetch_add(1) + 1;
        if (now > most_inside.load()) most_inside.store(now);
        const long seen = count;
        std::this_thread::yield();
        count = seen + 1;
        inside.fetch_sub(1);
      }
    });
  for (auto& t : threads) t.join();
  CHECK(count == long{kThreads} * kAdds);
  CHECK(most_inside.load() == 1);
}
