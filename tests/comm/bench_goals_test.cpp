// The goal evaluation of `cpsim bench comm` on fixed numbers (no timing: the bench itself is never a test).
#include <doctest/doctest.h>

#include "sim/cli/bench_comm_goals.hpp"

using namespace cpsim::cli;

namespace {

constexpr std::size_t K = 1024, M = 1024 * 1024;

SideRow row(CommOp op, std::size_t chunk, std::optional<double> threads, std::optional<double> processes,
            std::optional<double> mpi) {
  SideRow r;
  r.op = op;
  r.size = op == CommOp::sendrecv ? chunk : 4 * chunk;
  r.chunk = chunk;
  r.threads = threads;
  r.processes = processes;
  r.mpi = mpi;
  return r;
}

}  // namespace

TEST_CASE("bench comm goals: each ratio's lowest row over sendrecv, all_gather and all_to_all with 64K..16M chunks") {
  const std::vector<SideRow> rows = {
      row(CommOp::sendrecv, 16 * K, 1.0, 0.1, 10.0),       // a 16 KiB chunk: below every goal's rows
      row(CommOp::sendrecv, 64 * K, 6.0, 3.0, 2.0),        // processes/mpi 1.5, processes/threads 0.5, threads/mpi 3
      row(CommOp::all_gather, M, 8.0, 7.0, 5.0),           // 1.4, 0.875, 1.6
      row(CommOp::all_to_all, M, 9.0, 8.0, 4.0),           // 2.0, 0.889, 2.25: the 1M all_to_all row
      row(CommOp::reduce_scatter, M, 1.0, 1.0, 100.0),     // not an operation of the goals
      row(CommOp::all_to_all, 16 * M, 6.0, 5.5, 5.0),      // 1.1, 0.917, 1.2
      row(CommOp::all_gather, 64 * M, 1.0, 0.1, 50.0),     // a 64 MiB chunk: above every goal's rows
  };
  const std::vector<RatioGoal> g = evaluate_ratio_goals(rows);
  REQUIRE(g.size() == 4);
  CHECK(g[0].what == "processes >= 1.2 x mpi");
  REQUIRE(g[0].lowest);
  CHECK(*g[0].lowest == doctest::Approx(1.1));
  CHECK(g[0].at == "all_to_all, 16M chunks");
  CHECK(g[0].rows == 4);
  CHECK_FALSE(g[0].met());
  CHECK(g[1].what == "processes >= 0.8 x threads");
  CHECK(*g[1].lowest == doctest::Approx(0.5));
  CHECK(g[1].at == "sendrecv, 64K chunks");
  CHECK_FALSE(g[1].met());
  CHECK(*g[2].lowest == doctest::Approx(1.2));
  CHECK_FALSE(g[2].met());
  CHECK(g[3].rows == 1);
  CHECK(*g[3].lowest == doctest::Approx(2.25));
  CHECK(g[3].met());
}

TEST_CASE("bench comm goals: met at the ratio exactly; a goal whose backends were not both measured has no rows") {
  const std::vector<RatioGoal> g = evaluate_ratio_goals({row(CommOp::all_gather, 256 * K, 2.5, 2.0, std::nullopt)});
  CHECK(g[0].rows == 0);
  CHECK_FALSE(g[0].lowest);
  CHECK_FALSE(g[0].met());
  CHECK(g[1].rows == 1);
  CHECK(*g[1].lowest == doctest::Approx(0.8));
  CHECK(g[1].met());
  CHECK(g[2].rows == 0);
  CHECK(g[3].rows == 0);
}

TEST_CASE("bench comm goals: a goal is out of reach at a row where the copy bound over its denominator is below it") {
  std::vector<SideRow> rows = {row(CommOp::sendrecv, 64 * K, 6.0, 5.0, 2.0),  // bound / mpi 5, / threads 1.67
                               row(CommOp::all_to_all, M, 4.5, 4.4, 4.0),     // bound / mpi 1.25, / threads 1.11
                               row(CommOp::all_gather, 4 * M, 5.0, 4.0, 3.0)};  // no bound measured
  rows[0].bound = 10.0;
  rows[1].bound = 5.0;
  const std::vector<RatioGoal> g = evaluate_ratio_goals(rows);
  CHECK(g[0].over == "mpi");
  REQUIRE(g[0].ceiling);
  CHECK(*g[0].ceiling == doctest::Approx(1.25));
  CHECK(g[0].ceiling_at == "all_to_all, 1M chunks");
  CHECK(g[0].out_of_reach.empty());  // 1.2 x mpi: within reach at both rows with a bound
  CHECK(g[1].over == "threads");
  CHECK(*g[1].ceiling == doctest::Approx(5.0 / 4.5));
  CHECK(g[1].out_of_reach.empty());
  CHECK(*g[2].ceiling == doctest::Approx(1.25));
  CHECK(g[2].out_of_reach == std::vector<std::string>{"all_to_all, 1M chunks"});  // 1.5 x mpi: beyond the bound
  CHECK(g[2].rows == 3);
  CHECK(g[3].out_of_reach.size() == 1);  // 2 x mpi at all_to_all 1M: its one row
  CHECK(g[3].rows == 1);
}

TEST_CASE("bench comm goals: without a measured bound a goal has no ceiling and nothing out of reach") {
  const std::vector<RatioGoal> g = evaluate_ratio_goals({row(CommOp::all_to_all, M, 9.0, 8.0, 4.0)});
  for (const RatioGoal& x : g) {
    CHECK_FALSE(x.ceiling);
    CHECK(x.out_of_reach.empty());
  }
}

TEST_CASE("bench comm goals: the 1 KiB sendrecv latency, at most 5 us on threads and 10 us on processes") {
  CHECK(latency_goal(true, 5.0).met());
  CHECK_FALSE(latency_goal(true, 5.01).met());
  CHECK(latency_goal(false, 9.9).met());
  CHECK(latency_goal(false, 10.0).goal_us == 10.0);
  CHECK_FALSE(latency_goal(false, std::nullopt).met());
}

TEST_CASE("bench comm goals: with rounds, a row's ratio is the median of the ratios within each round") {
  // busbw: threads fast (20) in rounds 3-5, processes (16) in rounds 3 and 5 only. Their medians, 20 and 9, give
  // 0.45; round by round the ratios are 0.9, 0.9, 0.8, 0.45, 0.8: median 0.8, the goal met.
  SideRow r = row(CommOp::all_gather, M, 20.0, 9.0, 5.0);
  r.threads_rounds = {10, 10, 20, 20, 20};
  r.processes_rounds = {9, 9, 16, 9, 16};
  CHECK(row_ratio(9.0, 20.0, r.processes_rounds, r.threads_rounds) == doctest::Approx(0.8));
  const std::vector<RatioGoal> g = evaluate_ratio_goals({r});
  CHECK(*g[1].lowest == doctest::Approx(0.8));  // processes >= 0.8 x threads: round by round
  CHECK(g[1].met());
  CHECK(*g[0].lowest == doctest::Approx(9.0 / 5.0));  // mpi's rounds unknown: the figures' ratio
  // Of an even number of rounds, the lower of the middle two: ratios 0.5, 0.9, 1.0, 2.0 give 0.9.
  CHECK(row_ratio(1, 1, {1, 9, 10, 4}, {2, 10, 10, 2}) == doctest::Approx(0.9));
  // Rounds that do not pair up (a backend measured fewer times) fall back to the figures.
  CHECK(row_ratio(3, 4, {1, 2}, {1}) == doctest::Approx(0.75));
}

TEST_CASE("bench comm prints sizes as its tables do") {
  CHECK(human_bytes(1536) == "1536");
  CHECK(human_bytes(64 * K) == "64K");
  CHECK(human_bytes(16 * M) == "16M");
}

TEST_CASE("bench comm prints a figure beside its goal with the decimals that keep it on its own side of the goal") {
  CHECK(goal_figure(0.91234, 0.8) == "0.91");
  CHECK(goal_figure(0.8, 0.8) == "0.80");        // met at the ratio exactly
  CHECK(goal_figure(0.7996, 0.8) == "0.7996");   // not met: never "0.80"
  CHECK(goal_figure(0.80004, 0.8) == "0.80004");  // met: never "0.80" read as the goal exactly
  CHECK(goal_figure(5.004, 5.0) == "5.004");     // a latency just over its goal
  CHECK(goal_figure(2.0 / 3.0, 0.8) == "0.67");
}
