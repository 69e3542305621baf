#include "sim/layout/work_table.hpp"

#include <cstdio>

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

std::vector<std::int64_t> visible_pairs_per_rank(const SeqLayout& L, const Mask& mask) {
  const Positions all = iota_positions(0, L.seq());
  std::vector<std::int64_t> out;
  for (int r = 0; r < L.ranks(); ++r) out.push_back(visible_pairs(L.positions(r), all, mask));
  return out;
}

std::vector<std::vector<std::int64_t>> ring_step_pairs(const SeqLayout& L, const Mask& mask) {
  const int C = L.ranks();
  std::vector<Positions> pos;
  for (int r = 0; r < C; ++r) pos.push_back(L.positions(r));
  std::vector<std::vector<std::int64_t>> out(C);
  for (int r = 0; r < C; ++r)
    for (int i = 0; i < C; ++i) {
      const int owner = ((r - i) % C + C) % C;  // the K/V a rank holds at step i came from r - i
      out[r].push_back(visible_pairs(pos[r], pos[owner], mask));
    }
  return out;
}

std::vector<int> ring_blocks(const SeqLayout& L, const Mask& mask) {
  std::vector<int> out;
  for (const auto& steps : ring_step_pairs(L, mask))
    out.push_back(static_cast<int>(std::count_if(steps.begin(), steps.end(), [](std::int64_t p) { return p > 0; })));
  return out;
}

double imbalance(const std::vector<double>& per_rank) {
  if (per_rank.empty()) return 1.0;
  const double mean = std::accumulate(per_rank.begin(), per_rank.end(), 0.0) / static_cast<double>(per_rank.size());
  const double mx = *std::max_element(per_rank.begin(), per_rank.end());
  return mean > 0 ? mx / mean : 1.0;
}

double imbalance(const std::vector<std::int64_t>& per_rank) {
  return imbalance(std::vector<double>(per_rank.begin(), per_rank.end()));
}

double ring_imbalance(const std::vector<std::vector<std::int64_t>>& steps) {
  if (steps.empty()) return 1.0;
  const std::size_t C = steps.size(), n = steps.front().size();
  double slowest = 0, total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t most = 0;
    for (std::size_t r = 0; r < C; ++r) {
      most = std::max(most, steps[r][i]);
      total += static_cast<double>(steps[r][i]);
    }
    slowest += static_cast<double>(most);
  }
  return total > 0 ? slowest * static_cast<double>(C) / total : 1.0;
}

std::vector<double> step_imbalances(const std::vector<std::vector<std::int64_t>>& steps) {
  std::vector<double> out;
  if (steps.empty()) return out;
  for (std::size_t i = 0; i < steps.front().size(); ++i) {
    std::vector<double> col;
    bool any = false;
    for (const auto& rank : steps) {
      col.push_back(static_cast<double>(rank[i]));
      any = any || rank[i] > 0;
    }
    out.push_back(any ? imbalance(col) : 0.0);
  }
  return out;
}

std::string step_imbalance_text(double x) {
  if (x == 0) return "skip";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::vector<ShardingWork> compare_shardings(int ranks, std::int64_t seq, const LayoutOptions& opt) {
  std::vector<Sharding> list{Sharding::contiguous, Sharding::global_zigzag};
  if (opt.docs.count() > 1) {
    list.push_back(Sharding::zigzag);
    list.push_back(Sharding::doc_contiguous);  // ring-flash-attention's varlen layout
  }
  list.push_back(Sharding::striped);
  list.push_back(Sharding::balanced);
  std::vector<ShardingWork> out;
  for (Sharding sh : list) {
    ShardingWork w;
    w.sharding = sh;
    w.name = std::string(sharding_name(sh));
    try {
      const SeqLayout L(ranks, seq, sh, opt);
      w.name = sh == Sharding::global_zigzag && opt.docs.count() <= 1 ? "zigzag" : L.describe();
      w.per_rank = visible_pairs_per_rank(L, opt.mask);
      w.steps = ring_step_pairs(L, opt.mask);
      w.imbalance = imbalance(w.per_rank);
      w.ring_imbalance = ring_imbalance(w.steps);
    } catch (const UsageError& e) {
      w.why_not = e.what();
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace cpsim
