#include "sim/layout/balance.hpp"

#include <algorithm>
#include <numeric>
#include <queue>

namespace cpsim {

std::int64_t default_balance_chunk(int ranks, std::int64_t seq) {
  for (std::int64_t per_rank : {4, 2})
    if (seq % (per_rank * ranks) == 0) return seq / (per_rank * ranks);
  return seq / ranks;
}

std::vector<std::vector<std::int64_t>> balance_chunks(int ranks, std::int64_t seq, std::int64_t chunk,
                                                      const Mask& mask) {
  const std::int64_t n = seq / chunk, room = n / ranks;
  const Positions keys = Positions::range(0, seq);
  // 1. The cost of every chunk: its queries' visible pairs over the whole sequence.
  std::vector<std::int64_t> cost(static_cast<std::size_t>(n));
  for (std::int64_t c = 0; c < n; ++c)
    cost[static_cast<std::size_t>(c)] = visible_pairs(Positions::range(c * chunk, chunk), keys, mask);
  // 2. The most costly first (ties: the earlier chunk).
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return cost[static_cast<std::size_t>(a)] > cost[static_cast<std::size_t>(b)];
  });
  // 3. Each to the least loaded rank with room (ties: the lower rank); a full rank leaves the heap.
  using Load = std::pair<std::int64_t, int>;  // (pairs so far, rank)
  std::priority_queue<Load, std::vector<Load>, std::greater<>> open;
  for (int r = 0; r < ranks; ++r) open.push({0, r});
  std::vector<std::vector<std::int64_t>> owned(static_cast<std::size_t>(ranks));
  for (std::int64_t c : order) {
    const auto [load, r] = open.top();
    open.pop();
    auto& mine = owned[static_cast<std::size_t>(r)];
    mine.push_back(c);
    if (static_cast<std::int64_t>(mine.size()) < room) open.push({load + cost[static_cast<std::size_t>(c)], r});
  }
  for (auto& mine : owned) std::sort(mine.begin(), mine.end());
  return owned;
}

}  // namespace cpsim
