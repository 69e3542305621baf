// The goals `cpsim bench comm` evaluates (issue 3, docs/performance/comm.md), as a function of the measured
// rows, so that a test can check the evaluation on fixed numbers (never a timed test):
//   bandwidth: busbw >= 0.50 x same-run memcpy at every row whose per-rank chunk (one message) is >= 1 MiB;
//   latency:   ring sendrecv of 1 KiB under 10 us (threads) or 20 us (processes).
// Beside the bandwidth goal it reports the ceiling at the same rows (bench_comm_ceiling.hpp: the same copies,
// no messages): its range, how many rows the ceiling itself meets the goal in, and the lowest busbw / ceiling.
#pragma once
#include <algorithm>
#include <cstddef>
#include <optional>
#include <vector>

namespace cpsim::cli {

struct GoalRow {
  bool sendrecv = false;
  std::size_t size = 0, chunk_bytes = 0;
  double us = 0, busbw = 0, memcpy = 0;
  double ceiling = 0;  // bus/mem of the bare copies (bench_comm_ceiling.hpp); 0: not measured
};

struct CommGoals {
  static constexpr double kRatioGoal = 0.5;
  static constexpr std::size_t kRatioFromChunk = std::size_t{1} << 20;
  double latency_goal_us = 10;
  std::optional<double> worst_ratio;  // lowest busbw / memcpy over the rows the goal covers (none: no such row)
  std::optional<double> latency_1k;   // sendrecv time at 1 KiB (none: not in the sweep)
  // The ceiling over the rows the goal covers that have one.
  std::optional<double> ceiling_low, ceiling_high;    // lowest and highest bus/mem of the bare copies
  int rows_with_ceiling = 0, ceiling_meets_goal = 0;  // rows with a ceiling; of those, where it is >= kRatioGoal
  std::optional<double> worst_of_ceiling;             // lowest (busbw / memcpy) / ceiling
  bool ratio_met() const { return worst_ratio && *worst_ratio >= kRatioGoal; }
  bool latency_met() const { return latency_1k && *latency_1k < latency_goal_us; }
};

inline CommGoals evaluate_comm_goals(const std::vector<GoalRow>& rows, bool threads) {
  CommGoals g;
  g.latency_goal_us = threads ? 10 : 20;
  for (const GoalRow& row : rows) {
    if (row.chunk_bytes >= CommGoals::kRatioFromChunk) {
      const double ratio = row.busbw / row.memcpy;
      g.worst_ratio = g.worst_ratio ? std::min(*g.worst_ratio, ratio) : ratio;
      if (row.ceiling > 0) {
        ++g.rows_with_ceiling;
        g.ceiling_meets_goal += row.ceiling >= CommGoals::kRatioGoal;
        g.ceiling_low = g.ceiling_low ? std::min(*g.ceiling_low, row.ceiling) : row.ceiling;
        g.ceiling_high = g.ceiling_high ? std::max(*g.ceiling_high, row.ceiling) : row.ceiling;
        const double of = ratio / row.ceiling;
        g.worst_of_ceiling = g.worst_of_ceiling ? std::min(*g.worst_of_ceiling, of) : of;
      }
    }
    if (row.sendrecv && row.size == 1024) g.latency_1k = row.us;
  }
  return g;
}

}  // namespace cpsim::cli
