// `cpsim bench comm` end to end, at sizes small enough for a test: what it prints, never how fast it is.
#include <doctest/doctest.h>

#include <sstream>

#include "run_cli.hpp"

using cpsim::test::run_cli;

namespace {

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("bench comm prints a ceiling under every table with 1 MiB chunks, and its range under the goal") {
  // 2 ranks, sizes 1M and 2M: sendrecv's chunks are 1M and 2M, the collectives' 512K and 1M.
  const auto r =
      run_cli("bench comm --backend threads --ranks 2 --minbytes 1M --maxbytes 2M --stepfactor 2", "bench_comm_text");
  REQUIRE(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(count(r.out, "# ceiling, the same copies on 2 threads with no messages (bus/mem):") == 4);
  CHECK(count(r.out, "#   the ceiling at those sizes: lowest ") == 1);
  CHECK(count(r.out, ">= 0.50 in ") == 1);
  CHECK(count(r.out, " of 5; busbw / ceiling: lowest ") == 1);  // 2 sendrecv rows, one per collective
  // Every data row: size count type time algbw busbw #wrong memcpy bus/mem, with #wrong 0.
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string size, cnt, type, time, algbw, busbw, wrong;
    f >> size >> cnt >> type >> time >> algbw >> busbw >> wrong;
    CHECK(wrong == "0");
    ++rows;
  }
  CHECK(rows == 8);
}

TEST_CASE("bench comm --json carries each row's ceiling and the ceiling's summary beside the goals") {
  const auto r = run_cli("bench comm --backend threads --ranks 2 --minbytes 1M --maxbytes 2M --stepfactor 2 --json",
                         "bench_comm_json");
  REQUIRE(r.rc == 0);
  CHECK(count(r.out, "\"ceiling_over_memcpy\":") == 5);
  CHECK(count(r.out, "\"rows_with_ceiling\":5") == 1);
  CHECK(count(r.out, "\"rows_where_ceiling_meets_goal\":") == 1);
  CHECK(count(r.out, "\"busbw_over_ceiling_min\":") == 1);
  CHECK(count(r.out, "\"wrong\":0") == 8);
}
