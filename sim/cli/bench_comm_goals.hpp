// The goals `cpsim bench comm` evaluates (docs/performance/comm.md), as functions of the measured numbers, so that a
// test can check the evaluation on fixed numbers (never a timed test).
//
// Bandwidth: ratios of busbw measured side by side in one run (`mpirun -np 4 cpsim bench comm --backend
// threads,processes,mpi`), over every row of sendrecv, all_gather and all_to_all whose per-peer chunk (one message)
// is 64 KiB to 16 MiB:
//   processes >= 1.2 x mpi          processes >= 0.8 x threads          threads >= 1.5 x mpi
//   threads >= 2 x mpi for all_to_all with 1 MiB chunks
// Latency: ring sendrecv of 1 KiB, threads <= 5 us, processes <= 10 us.
//
// A row's ratio (row_ratio): with --rounds, every backend is measured once a round, the backends in turn, seconds
// apart; the row's ratio is the median over the rounds of the ratio within each round (of an even number, the lower
// of the middle two). A 2-core virtual machine has periods, lasting several rounds, in which large messages move
// much faster on either backend; a ratio within a round compares the backends in the same period, where a ratio of
// their separate medians may set one backend's fast period against the other's slow one
// (docs/performance/comm.md, "Median of rounds").
//
// Reach: where a row has the machine's copy bound (the busbw of the copies its call must make, by two threads:
// bench_comm.cpp's two_thread_copy_us), no backend can pass it, so bound / the denominator's busbw is the most any
// numerator could reach over that denominator there. A goal whose ratio that ceiling falls short of at some row is
// out of reach in that run, whatever the code: the denominator already moves the bytes near the machine's speed.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace cpsim::cli {

enum class CommOp { sendrecv, all_gather, reduce_scatter, all_to_all };

inline const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::sendrecv:
      return "sendrecv";
    case CommOp::all_gather:
      return "all_gather";
    case CommOp::reduce_scatter:
      return "reduce_scatter";
    case CommOp::all_to_all:
      return "all_to_all";
  }
  return "?";
}

// "64K", "1M", "1536": a byte count as the tables print it.
inline std::string human_bytes(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

// One size of one operation, side by side: each backend's busbw (GB/s) where it was measured.
struct SideRow {
  CommOp op = CommOp::sendrecv;
  std::size_t size = 0, chunk = 0;  // nccl-tests size; per-peer chunk bytes
  std::optional<double> threads, processes, mpi;
  std::optional<double> bound;  // the copy bound's busbw (GB/s) where it was measured
  // Each backend's busbw in every round, in round order (empty: only the figure above is known).
  std::vector<double> threads_rounds, processes_rounds, mpi_rounds;
};

// num / den at one row: the median over the rounds of num's busbw over den's in the same round, of an even number
// the lower of the middle two; num / den where the rounds are not known (either list empty) or do not pair up.
inline double row_ratio(double num, double den, const std::vector<double>& num_rounds,
                        const std::vector<double>& den_rounds) {
  if (num_rounds.empty() || num_rounds.size() != den_rounds.size()) return num / den;
  std::vector<double> ratios;
  for (std::size_t i = 0; i < num_rounds.size(); ++i) ratios.push_back(num_rounds[i] / den_rounds[i]);
  std::sort(ratios.begin(), ratios.end());
  return ratios[(ratios.size() - 1) / 2];
}

struct RatioGoal {
  std::string what;  // "processes >= 1.2 x mpi"
  std::string over;  // its denominator's backend: "mpi"
  double goal = 0;
  std::optional<double> lowest;  // the lowest ratio over the rows it covers that have both backends
  std::string at;                // where: "all_gather, 64K chunks"
  int rows = 0;                  // rows it covers
  std::optional<double> ceiling;  // the lowest bound / denominator over its rows with a bound
  std::string ceiling_at;
  std::vector<std::string> out_of_reach;  // the rows where that ratio is below the goal, in row order
  bool met() const { return lowest && *lowest >= goal; }
};

constexpr std::size_t kGoalChunkLow = std::size_t{64} << 10, kGoalChunkHigh = std::size_t{16} << 20;

// Rows the bandwidth goals cover: sendrecv, all_gather and all_to_all with chunks of 64 KiB to 16 MiB.
inline bool in_goal_rows(const SideRow& row) {
  return row.op != CommOp::reduce_scatter && row.chunk >= kGoalChunkLow && row.chunk <= kGoalChunkHigh;
}

inline std::string row_name(const SideRow& row) {
  return std::string(comm_op_name(row.op)) + ", " + human_bytes(row.chunk) + " chunks";
}

// The four ratio goals above, in that order (a goal whose backends were not both measured has no rows).
inline std::vector<RatioGoal> evaluate_ratio_goals(const std::vector<SideRow>& rows) {
  using Side = std::optional<double> SideRow::*;
  using Rounds = std::vector<double> SideRow::*;
  struct Def {
    std::string what, over;
    double goal;
    Side num, den;
    Rounds num_rounds, den_rounds;
    bool all_to_all_1m_only;
  };
  const Def defs[] = {
      {"processes >= 1.2 x mpi", "mpi", 1.2, &SideRow::processes, &SideRow::mpi, &SideRow::processes_rounds,
       &SideRow::mpi_rounds, false},
      {"processes >= 0.8 x threads", "threads", 0.8, &SideRow::processes, &SideRow::threads,
       &SideRow::processes_rounds, &SideRow::threads_rounds, false},
      {"threads >= 1.5 x mpi", "mpi", 1.5, &SideRow::threads, &SideRow::mpi, &SideRow::threads_rounds,
       &SideRow::mpi_rounds, false},
      {"threads >= 2 x mpi, all_to_all with 1M chunks", "mpi", 2.0, &SideRow::threads, &SideRow::mpi,
       &SideRow::threads_rounds, &SideRow::mpi_rounds, true}};
  std::vector<RatioGoal> out;
  for (const Def& d : defs) {
    RatioGoal g;
    g.what = d.what;
    g.over = d.over;
    g.goal = d.goal;
    for (const SideRow& row : rows) {
      if (!in_goal_rows(row)) continue;
      if (d.all_to_all_1m_only && (row.op != CommOp::all_to_all || row.chunk != (std::size_t{1} << 20))) continue;
      const std::optional<double>&num = row.*d.num, &den = row.*d.den;
      if (!num || !den || *den <= 0) continue;
      ++g.rows;
      const double ratio = row_ratio(*num, *den, row.*d.num_rounds, row.*d.den_rounds);
      if (!g.lowest || ratio < *g.lowest) {
        g.lowest = ratio;
        g.at = row_name(row);
      }
      if (!row.bound) continue;
      const double ceiling = *row.bound / *den;
      if (ceiling < d.goal) g.out_of_reach.push_back(row_name(row));
      if (!g.ceiling || ceiling < *g.ceiling) {
        g.ceiling = ceiling;
        g.ceiling_at = row_name(row);
      }
    }
    out.push_back(g);
  }
  return out;
}

struct LatencyGoal {
  double goal_us = 0;
  std::optional<double> us;  // the 1 KiB ring sendrecv's time (none: not in the sweep)
  bool met() const { return us && *us <= goal_us; }
};
inline LatencyGoal latency_goal(bool threads, std::optional<double> us_1k) {
  return LatencyGoal{threads ? 5.0 : 10.0, us_1k};
}

// A measured figure beside its goal, as the goal lines print it: two decimals, or as many more (up to six) as it takes
// for the printed figure to lie on the same side of the goal as the figure itself, so that a ratio of 0.7996 reads
// 0.7996 beside "not met", never 0.80.
inline std::string goal_figure(double value, double goal) {
  const auto side = [goal](double v) { return (v > goal) - (v < goal); };
  char text[32];
  for (int digits = 2;; ++digits) {
    std::snprintf(text, sizeof text, "%.*f", digits, value);
    if (digits == 6 || side(std::stod(text)) == side(value)) return text;
  }
}

}  // namespace cpsim::cli
