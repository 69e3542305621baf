#include "sim/cli/bench_comm_ceiling.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace cpsim::cli {

namespace {
using Clock = std::chrono::steady_clock;
constexpr int kRuns = 3;
}  // namespace

double parallel_memcpy_gbps(std::size_t bytes, std::size_t working_set, int threads) {
  bytes = std::max<std::size_t>(bytes, 1);
  const std::size_t share = working_set / static_cast<std::size_t>(threads);
  const std::size_t pieces = std::clamp<std::size_t>(share / (2 * bytes), 1, (std::size_t{256} << 20) / bytes + 1);
  const int iters = static_cast<int>(std::clamp<std::size_t>((std::size_t{100} << 20) / bytes, 3, 1000));
  std::vector<std::vector<char>> src, dst;
  for (int t = 0; t < threads; ++t) {
    src.emplace_back(pieces * bytes, 1);
    dst.emplace_back(pieces * bytes, 0);  // touched here: first-touch page faults stay out of the timing
  }
  double best = 1e300;
  for (int run = 0; run < kRuns; ++run) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        for (int i = 0; i < iters; ++i) {
          const std::size_t at = (i % pieces) * bytes;
          src[t][at] = static_cast<char>(i);  // the copies cannot be merged away
          std::memcpy(dst[t].data() + at, src[t].data() + at, bytes);
        }
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const auto t0 = Clock::now();
    go.store(true);
    for (auto& th : pool) th.join();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return static_cast<double>(bytes) * iters / best / 1e9;
}

}  // namespace cpsim::cli
