// The goals `cpsim bench comm` evaluates (issue 3, docs/performance/comm.md), as a function of the measured
// rows, so that a test can check the evaluation on fixed numbers (never a timed test):
//   bandwidth: busbw >= 0.50 x same-run memcpy at every row whose per-rank chunk (one message) is >= 1 MiB;
//   latency:   ring sendrecv of 1 KiB under 10 us (threads) or 20 us (processes).
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
};

struct CommGoals {
  static constexpr double kRatioGoal = 0.5;
  static constexpr std::size_t kRatioFromChunk = std::size_t{1} << 20;
  double latency_goal_us = 10;
  std::optional<double> worst_ratio;  // lowest busbw / memcpy over the rows the goal covers (none: no such row)
  std::optional<double> latency_1k;   // sendrecv time at 1 KiB (none: not in the sweep)
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
    }
    if (row.sendrecv && row.size == 1024) g.latency_1k = row.us;
  }
  return g;
}

}  // namespace cpsim::cli
