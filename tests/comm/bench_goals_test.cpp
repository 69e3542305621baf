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
