// The goal evaluation of `cpsim bench comm` on fixed numbers (no timing: the bench itself is never a test).
#include <doctest/doctest.h>

#include "sim/cli/bench_comm_goals.hpp"

using namespace cpsim::cli;

TEST_CASE("bench comm goals: the lowest busbw/memcpy over rows with chunks >= 1 MiB, and the 1 KiB latency") {
  const std::vector<GoalRow> rows = {
      {true, 1024, 1024, 8.5, 0.1, 40},         // sendrecv 1 KiB: the latency row, too small for the ratio
      {true, 1 << 20, 1 << 20, 100, 20, 40},    // 0.50
      {false, 4 << 20, 1 << 20, 200, 12, 30},   // 0.40: the lowest covered
      {false, 1 << 20, 256 << 10, 90, 1, 40},   // 0.025, but a 256 KiB chunk: not covered
      {false, 16 << 20, 4 << 20, 800, 20, 25},  // 0.80
  };
  const CommGoals threads = evaluate_comm_goals(rows, true);
  REQUIRE(threads.worst_ratio);
  CHECK(*threads.worst_ratio == doctest::Approx(0.4));
  CHECK_FALSE(threads.ratio_met());
  REQUIRE(threads.latency_1k);
  CHECK(*threads.latency_1k == doctest::Approx(8.5));
  CHECK(threads.latency_goal_us == 10);
  CHECK(threads.latency_met());

  const CommGoals processes = evaluate_comm_goals(rows, false);
  CHECK(processes.latency_goal_us == 20);
  CHECK(processes.latency_met());
}

TEST_CASE("bench comm goals: met exactly at 0.50; the latency goal is strict; absent rows are reported absent") {
  CHECK(evaluate_comm_goals({{false, 4 << 20, 1 << 20, 100, 20, 40}}, true).ratio_met());  // 0.50
  CHECK_FALSE(evaluate_comm_goals({{true, 1024, 1024, 10.0, 1, 40}}, true).latency_met());
  CHECK(evaluate_comm_goals({{true, 1024, 1024, 10.0, 1, 40}}, false).latency_met());
  const CommGoals none = evaluate_comm_goals({{false, 64 << 10, 16 << 10, 50, 1, 40}}, true);
  CHECK_FALSE(none.worst_ratio);
  CHECK_FALSE(none.latency_1k);
  CHECK_FALSE(none.ratio_met());
  CHECK_FALSE(none.latency_met());
}

TEST_CASE("bench comm goals: the ceiling's range, the rows it meets the goal in, and busbw against it") {
  const std::vector<GoalRow> rows = {
      {true, 1 << 20, 1 << 20, 100, 10, 40, 0.5},   // 0.25 of memcpy, half the ceiling; the ceiling meets 0.5
      {false, 4 << 20, 1 << 20, 200, 12, 40, 0.4},  // 0.30 of memcpy, 0.75 of the ceiling
      {false, 16 << 20, 4 << 20, 800, 8, 40, 0},    // no ceiling measured: in the goal, not in the ceiling
      {false, 1 << 20, 256 << 10, 90, 1, 40, 0.3},  // a 256 KiB chunk: in neither
  };
  const CommGoals g = evaluate_comm_goals(rows, true);
  REQUIRE(g.worst_ratio);
  CHECK(*g.worst_ratio == doctest::Approx(0.2));
  CHECK(g.rows_with_ceiling == 2);
  CHECK(g.ceiling_meets_goal == 1);
  REQUIRE(g.ceiling_low);
  CHECK(*g.ceiling_low == doctest::Approx(0.4));
  CHECK(*g.ceiling_high == doctest::Approx(0.5));
  REQUIRE(g.worst_of_ceiling);
  CHECK(*g.worst_of_ceiling == doctest::Approx(0.5));

  const CommGoals none = evaluate_comm_goals({{false, 4 << 20, 1 << 20, 100, 20, 40}}, true);
  CHECK(none.rows_with_ceiling == 0);
  CHECK_FALSE(none.ceiling_low);
  CHECK_FALSE(none.worst_of_ceiling);
}
