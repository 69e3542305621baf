// `cpsim bench comm` end to end, at sizes small enough for a test: what it prints, never how fast it is.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "run_cli.hpp"
#include "sim/cli/bench_comm_goals.hpp"
#include "sim/comm/copy.hpp"
#include "sim/comm/rank_binding.hpp"

using cpsim::test::count;
using cpsim::test::run_cli;
using cpsim::test::values_after;

namespace {

// Data rows (lines not starting with '#'), each checked to report #wrong 0 in column `wrong_col` (1-based).
int rows_with_none_wrong(const std::string& out, int wrong_col) {
  std::istringstream lines(out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string field;
    for (int i = 0; i < wrong_col; ++i) f >> field;
    CHECK_MESSAGE(field == "0", line);
    ++rows;
  }
  return rows;
}

// Each row's timed runs made from 3 to 1000 calls (bench_comm.cpp: iterations, kRunUs).
void check_calls_per_run(const std::string& json, std::size_t rows) {
  const auto calls = values_after(json, "calls_per_run");
  CHECK(calls.size() == rows);
  for (double n : calls) CHECK((n >= 3 && n <= 1000));
}

// Each cell's time in --json is the median of its rounds' (round_time_us, `rounds` of them; of an even number the
// slower of the middle two), never the best round: checked in every one of `cells` cells.
void check_median_of_rounds(const std::string& json, std::size_t cells, std::size_t rounds) {
  std::size_t seen = 0;
  const auto walk = [&](const auto& self, const cpsim::Json& j) -> void {
    if (j.is_object() && j.contains("round_time_us")) {  // a cell: its time and its rounds'
      std::vector<double> times = j["round_time_us"].get<std::vector<double>>();
      REQUIRE(times.size() == rounds);
      std::sort(times.begin(), times.end());
      CHECK(j["time_us"].get<double>() == times[rounds / 2]);
      ++seen;
    }
    if (j.is_structured())
      for (const cpsim::Json& x : j) self(self, x);
  };
  walk(walk, cpsim::parse_json(json, "the output", "cpsim wrote it"));
  CHECK(seen == cells);
}

}  // namespace

TEST_CASE("bench comm on one backend prints its tables, how its copies were measured, and the latency goal") {
  // 2 ranks, sizes 1K and 32K: the latency row is in the sweep.
  const auto r =
      run_cli("bench comm --backend threads --ranks 2 --minbytes 1K --maxbytes 32K --stepfactor 32", "bench_comm_text");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(count(r.out,
              "# memcpy: one thread, one chunk between two warm, 64-byte aligned buffers of its size, best of 7 "
              "runs") == 1);
  // The threshold of a run of the bench's 2 ranks (sim/comm/copy.hpp).
  CHECK(count(r.out, "# stream: the same copy with the transports' streaming stores, which they use from " +
                         cpsim::cli::human_bytes(cpsim::stream_threshold(2)) +
                         " on (landed in a rank by one call, 2 ranks)") == 1);
  CHECK(count(r.out, "# time: the slowest rank's mean per call, best of 3 runs\n") == 1);  // one round
  CHECK(count(r.out, "# goal: ring sendrecv at 1K <= 5 us: ") == 1);
  CHECK(count(r.out, "mpirun -np 2 cpsim bench comm --backend threads,processes,mpi --ranks 2") == 1);
  CHECK(count(r.out, "ceiling") == 0);  // the retired goal's figures are gone
  // Bound by default: each rank's CPU named (sim/comm/rank_binding.hpp).
  const std::vector<int> cpus = cpsim::usable_cpus();
  REQUIRE_FALSE(cpus.empty());
  CHECK(count(r.out, "# ranks: bound to CPUs (--bind cores), rank:cpu 0:" + std::to_string(cpus[0]) + ", 1:" +
                         std::to_string(cpus[1 % cpus.size()]) + "\n") == 1);
  // Every data row: size count type time algbw busbw #wrong memcpy stream bus/mem, with #wrong 0.
  CHECK(rows_with_none_wrong(r.out, 7) == 8);
}

TEST_CASE("bench comm without the 1 KiB row says the latency goal is not in the sweep") {
  const auto r = run_cli("bench comm --backend processes --ranks 2 --minbytes 64K --maxbytes 64K", "bench_comm_no1k");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "# goal: ring sendrecv at 1K <= 10 us: 1K is not in this sweep") == 1);
}

TEST_CASE("bench comm --bind none leaves the ranks to the scheduler and says so") {
  const auto r = run_cli("bench comm --backend threads --ranks 2 --minbytes 64K --maxbytes 64K --bind none",
                         "bench_comm_unbound");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "# ranks: not bound (--bind none): the scheduler placed and moved them\n") == 1);
  CHECK(count(r.out, "# ranks: bound") == 0);
  const auto j = run_cli("bench comm --backend threads --ranks 2 --minbytes 64K --maxbytes 64K --bind none --json",
                         "bench_comm_unbound_json");
  REQUIRE(j.rc == 0);
  CHECK(count(j.out, "\"bind\":\"none\"") == 1);
}

TEST_CASE("bench comm refuses a --bind that is not a placement in one line, before it measures anything") {
  const auto r = run_cli("bench comm --backend threads,processes --ranks 2 --bind sockets", "bench_comm_bind");
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err ==
        "cpsim: error: --bind sockets is not a placement of the ranks; use --bind cores (rank r on the (r mod n)-th "
        "usable CPU) or --bind none\n");
}

TEST_CASE("bench comm --json carries each row, the calls each of its runs made, and the latency goal") {
  const auto r = run_cli("bench comm --backend threads --ranks 2 --minbytes 1K --maxbytes 32K --stepfactor 32 --json",
                         "bench_comm_json");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "\"memcpy_gbps\":") == 8);
  CHECK(count(r.out, "\"stream_gbps\":") == 8);
  for (double gbps : values_after(r.out, "stream_gbps")) CHECK(gbps > 0);
  CHECK(count(r.out, "\"wrong\":0") == 8);
  CHECK(count(r.out, "\"sendrecv_1KiB_us\":") == 1);
  CHECK(count(r.out, "\"sendrecv_1KiB_goal_us\":5") == 1);
  CHECK(count(r.out, "\"rounds\":1,") == 1);  // one backend alone: one sweep by default
  CHECK(count(r.out, "ceiling") == 0);
  check_calls_per_run(r.out, 8);
  check_median_of_rounds(r.out, 8, 1);
}

TEST_CASE("bench comm with --rounds reports each row's median round and every round's time") {
  const auto r = run_cli(
      "bench comm --backend threads --ranks 2 --minbytes 1K --maxbytes 32K --stepfactor 32 --rounds 3 --json",
      "bench_comm_rounds_json");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "\"rounds\":3,") == 1);
  check_median_of_rounds(r.out, 8, 3);
}

TEST_CASE("bench comm side by side evaluates the goals its backends allow, and says which it cannot") {
  // threads and processes without mpi: processes against threads is evaluated over the 64K chunks, the ratios to
  // Open MPI are not.
  const auto r = run_cli("bench comm --backend threads,processes --ranks 2 --minbytes 1K --maxbytes 128K --stepfactor 128",
                         "bench_comm_side");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  // Side by side, 15 rounds by default: every backend swept 15 times, in turn, each row its median round.
  CHECK(count(r.out, "best of 3 runs in a round, the median of 15 rounds (each operation swept by every backend in "
                     "turn, once a round)") == 1);
  CHECK(count(r.out, "# goals: busbw ratios over sendrecv, all_gather and all_to_all at per-peer chunks 64K..16M") ==
        1);
  // 128K: sendrecv's chunk is 128K, all_gather's and all_to_all's 64K; reduce_scatter is not a goal's operation.
  CHECK(count(r.out, "#   processes >= 0.8 x threads") == 1);
  CHECK(count(r.out, " chunks; 3 rows): ") == 1);
  // Under it, the most the copy bound leaves over threads at those rows, and whether 0.8 x is within reach; the goals
  // not evaluated have no such line.
  CHECK(count(r.out, "\n#     the copy bound over threads: lowest ") == 1);
  CHECK(count(r.out, "\n#     the copy bound over") == 1);
  CHECK(count(r.out, "not evaluated (needs both backends and such chunks in the sweep)") == 3);
  CHECK(count(r.out, "#   threads sendrecv at 1K <= 5 us: ") == 1);
  CHECK(count(r.out, "#   processes sendrecv at 1K <= 10 us: ") == 1);
  CHECK(count(r.out, "# ranks: bound to CPUs (--bind cores), rank:cpu 0:") == 1);
  // Each table row: size, then two busy columns and two busbw columns, then #wrong.
  CHECK(rows_with_none_wrong(r.out, 6) == 8);
  // The copy bound of the rows the goals cover, each backend's busbw as a fraction of it.
  CHECK(count(r.out, "\n# copy bound: the copies the call must make") == 1);
  CHECK(count(r.out, "\n#   sendrecv        128K ") == 1);
  CHECK(count(r.out, "\n#   all_gather       64K ") == 1);
  CHECK(count(r.out, "\n#   all_to_all       64K ") == 1);
}

TEST_CASE("bench comm side by side --json lists each evaluated goal with its lowest ratio and where") {
  const auto r = run_cli(
      "bench comm --backend threads,processes --ranks 2 --minbytes 1K --maxbytes 128K --stepfactor 128 --rounds 2 "
      "--json",
      "bench_comm_side_json");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "\"rounds\":2,") == 1);
  CHECK(count(r.out, "\"bind\":\"cores\"") == 1);
  CHECK(count(r.out, "\"goal\":\"processes >= 0.8 x threads\",\"ratio\":0.8") == 1);
  CHECK(count(r.out, "\"rows\":3") == 1);
  CHECK(count(r.out, "\"ceiling\":") == 1);  // the copy bound over threads
  CHECK(count(r.out, "\"out_of_reach\":[") == 1);
  CHECK(count(r.out, "\"goal\":\"threads sendrecv 1K <= 5 us\",\"us\":") == 1);
  CHECK(count(r.out, "\"goal\":\"processes sendrecv 1K <= 10 us\",\"us\":") == 1);
  CHECK(count(r.out, "x mpi") == 0);  // not measured: not listed
  CHECK(count(r.out, "\"copy_bound\":[{") == 1);
  CHECK(count(r.out, "\"busbw_gbps\":") == 2 * 8 + 3);  // two backends' 8 rows, and the 3 bounds
  check_calls_per_run(r.out, 2 * 8);
  check_median_of_rounds(r.out, 2 * 8, 2);
}

TEST_CASE("bench comm refuses a sweep its --memory-limit cannot hold before allocating, with a --maxbytes that fits") {
  // 2 ranks up to 64 MiB: each holds a send and a receive buffer of 64 MiB and two partial sums of 32 MiB, and the
  // memcpy reference two buffers of 64 MiB: 512 MiB, more than 100 MiB.
  const auto r = run_cli("bench comm --ranks 2 --minbytes 1M --maxbytes 64M --memory-limit 100M", "bench_comm_memory");
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("bench comm needs 512.1 MiB of memory") != std::string::npos);
  CHECK(r.err.find("more than the 100.0 MiB that --memory-limit allows") != std::string::npos);
  const auto at = r.err.find("use --maxbytes ");
  REQUIRE(at != std::string::npos);
  const std::string fits = r.err.substr(at + 15, r.err.find(',', at) - at - 15);
  const auto ok = run_cli("bench comm --ranks 2 --minbytes 1M --maxbytes " + fits + " --memory-limit 100M",
                          "bench_comm_memory_fits");
  CHECK(ok.rc == 0);
  CHECK(ok.err.empty());
}

TEST_CASE("bench comm refuses fewer than one round in one line, before it measures anything") {
  const auto r = run_cli("bench comm --backend threads,processes --ranks 2 --rounds 0", "bench_comm_rounds");
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "cpsim: error: --rounds must be at least 1 (got 0); use --rounds 1 or more\n");
}
