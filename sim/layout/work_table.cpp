#include "sim/layout/work_table.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "sim/core/error.hpp"

namespace cpsim {

std::vector<double> chunk_blocks(const SeqLayout& L) {
  const int C = L.ranks();
  require(L.seq() % (2 * C) == 0,
          "the chunk table cuts the sequence into 2C chunks, so S must be divisible by 2C (S=" +
              std::to_string(L.seq()) + ", 2C=" + std::to_string(2 * C) + ")",
          "use a multiple of " + std::to_string(2 * C));
  std::vector<double> out;
  for (int r = 0; r < C; ++r) {
    double blocks = 0;
    for (int c : L.chunks(r)) blocks += c + 0.5;  // c full blocks left of the diagonal + half the diagonal block
    out.push_back(blocks);
  }
  return out;
}

std::vector<std::int64_t> visible_pairs_per_rank(const SeqLayout& L) {
  const Positions all = iota_positions(0, L.seq());
  std::vector<std::int64_t> out;
  for (int r = 0; r < L.ranks(); ++r) out.push_back(visible_pairs(L.positions(r), all, true));
  return out;
}

std::vector<std::vector<std::int64_t>> ring_step_pairs(const SeqLayout& L) {
  const int C = L.ranks();
  std::vector<std::vector<std::int64_t>> out(C);
  for (int r = 0; r < C; ++r) {
    const Positions q = L.positions(r);
    for (int i = 0; i < C; ++i) {
      const int owner = ((r - i) % C + C) % C;  // the K/V a rank holds at step i came from r - i
      out[r].push_back(visible_pairs(q, L.positions(owner), true));
    }
  }
  return out;
}

std::vector<int> ring_blocks(const SeqLayout& L) {
  std::vector<int> out;
  for (const auto& steps : ring_step_pairs(L))
    out.push_back(static_cast<int>(std::count_if(steps.begin(), steps.end(), [](std::int64_t p) { return p > 0; })));
  return out;
}

double imbalance(const std::vector<double>& per_rank) {
  if (per_rank.empty()) return 1.0;
  const double mean = std::accumulate(per_rank.begin(), per_rank.end(), 0.0) / static_cast<double>(per_rank.size());
  const double mx = *std::max_element(per_rank.begin(), per_rank.end());
  return mean > 0 ? mx / mean : 1.0;
}

}  // namespace cpsim
