#include "sim/cuda/tile_counts.hpp"

#include <algorithm>

namespace cpsim::cuda {

TileCounts count_tiles(const Positions& q_runs, const Positions& k_runs, bool causal, int q_rows, int k_rows) {
  const std::vector<std::int64_t> q_pos = q_runs.expand(), k_pos = k_runs.expand();  // one per row of the call
  const auto sq = static_cast<std::int64_t>(q_pos.size()), sk = static_cast<std::int64_t>(k_pos.size());
  const std::int64_t key_tiles = (sk + k_rows - 1) / k_rows;
  TileCounts c;
  for (std::int64_t i0 = 0; i0 < sq; i0 += q_rows) {
    const std::int64_t last = std::min(sq, i0 + q_rows) - 1;
    // Keys at or before the tile's last query: a prefix; every key tile that starts inside it is computed.
    const std::int64_t keys =
        causal ? std::upper_bound(k_pos.begin(), k_pos.end(), q_pos[static_cast<std::size_t>(last)]) - k_pos.begin()
               : sk;
    const std::int64_t computed = (keys + k_rows - 1) / k_rows;
    c.computed += computed;
    c.skipped += key_tiles - computed;
  }
  return c;
}

}  // namespace cpsim::cuda
