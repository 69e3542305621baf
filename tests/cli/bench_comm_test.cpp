// `cpsim bench comm` end to end, at sizes small enough for a test: what it prints, never how fast it is.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "run_cli.hpp"

using cpsim::test::count;
using cpsim::test::run_cli;
using cpsim::test::values_after;

namespace {

// The data rows (lines not starting with '#'), split in fields.
std::vector<std::vector<std::string>> rows(const std::string& out) {
  std::vector<std::vector<std::string>> all;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::vector<std::string> fields;
    for (std::string x; f >> x;) fields.push_back(x);
    all.push_back(fields);
  }
  return all;
}

}  // namespace

TEST_CASE("bench comm on one backend prints the nccl-tests table of each operation, every element right") {
  const auto r =
      run_cli("bench comm --backend threads --ranks 2 --minbytes 1K --maxbytes 32K --stepfactor 32", "bench_comm_text");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  for (const char* op : {"sendrecv (busbw factor 1)", "all_gather (busbw factor 0.5)",
                         "reduce_scatter (busbw factor 0.5)", "all_to_all (busbw factor 0.5)"})
    CHECK(count(r.out, std::string("# ") + op + "\n") == 1);
  CHECK(count(r.out, "# ratio") == 0);  // one backend: nothing to compare
  const auto data = rows(r.out);
  REQUIRE(data.size() == 8);  // 4 operations x 2 sizes
  for (const auto& f : data) {
    REQUIRE(f.size() == 7);  // size count type time algbw busbw #wrong
    CHECK(f[2] == "float");
    CHECK(std::stod(f[3]) > 0);
    CHECK(f[6] == "0");
  }
  CHECK(data[0][0] == "1024");
  CHECK(data[1][0] == "32768");
}

TEST_CASE("bench comm side by side prints each backend's figures and processes over threads") {
  const auto r = run_cli("bench comm --backend threads,processes --ranks 2 --minbytes 1K --maxbytes 64K --stepfactor 64",
                         "bench_comm_side");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(count(r.out, "# ratio: one backend's busbw over another's, same row\n") == 1);
  CHECK(count(r.out, " processes/threads ") == 4);
  for (const auto& f : rows(r.out)) {
    REQUIRE(f.size() == 11);  // size count type, 3 per backend, the ratio, #wrong
    CHECK(std::stod(f[9]) > 0);  // its value against the busbw figures: the --json case below
    CHECK(f[10] == "0");
  }
}

TEST_CASE("bench comm --json carries every backend's row and the ratios it printed") {
  const auto r = run_cli(
      "bench comm --backend threads,processes --ranks 2 --minbytes 1K --maxbytes 64K --stepfactor 64 --json",
      "bench_comm_json");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "\"backends\":[\"threads\",\"processes\"]") == 1);
  CHECK(count(r.out, "\"wrong\":0") == 2 * 8);
  const auto calls = values_after(r.out, "calls");
  CHECK(calls.size() == 2 * 8);
  for (double n : calls) CHECK((n >= 3 && n <= 1000));
  const auto busbw = values_after(r.out, "busbw_gbps");
  const auto ratios = values_after(r.out, "processes/threads");
  REQUIRE(busbw.size() == 2 * 8);
  REQUIRE(ratios.size() == 8);
  for (std::size_t i = 0; i < ratios.size(); ++i) CHECK(ratios[i] == doctest::Approx(busbw[2 * i + 1] / busbw[2 * i]));
}

TEST_CASE("bench comm refuses mpi outside mpirun, and a backend it cannot measure, in one line each") {
  const auto mpi = run_cli("bench comm --backend threads,mpi --ranks 2", "bench_comm_mpi");
  if (mpi.err.find("not built in") == std::string::npos) {
    CHECK(mpi.rc == 2);
    CHECK(mpi.out.empty());
    CHECK(count(mpi.err, "but mpirun did not start this one; run `mpirun -np 2 cpsim bench comm --backend threads,mpi "
                         "--ranks 2`\n") == 1);
  }
  const auto twice = run_cli("bench comm --backend threads,threads --ranks 2", "bench_comm_twice");
  CHECK(twice.rc == 2);
  CHECK(twice.err == "cpsim: error: --backend threads,threads names threads twice; name each backend once\n");
}

TEST_CASE("bench comm refuses a sweep its --memory-limit cannot hold before allocating, with a --maxbytes that fits") {
  // 2 ranks up to 64 MiB: each holds a send and a receive buffer of 64 MiB and two partial sums of 32 MiB: 384 MiB,
  // more than 100 MiB.
  const auto r = run_cli("bench comm --ranks 2 --minbytes 1M --maxbytes 64M --memory-limit 100M", "bench_comm_memory");
  CHECK(r.rc == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("bench comm needs 384.0 MiB of memory") != std::string::npos);
  CHECK(r.err.find("more than the 100.0 MiB that --memory-limit allows") != std::string::npos);
  const auto at = r.err.find("use --maxbytes ");
  REQUIRE(at != std::string::npos);
  const std::string fits = r.err.substr(at + 15, r.err.find(',', at) - at - 15);
  const auto ok = run_cli("bench comm --ranks 2 --minbytes 1M --maxbytes " + fits + " --memory-limit 100M",
                          "bench_comm_memory_fits");
  CHECK(ok.rc == 0);
  CHECK(ok.err.empty());
}
