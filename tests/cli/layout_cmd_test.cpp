#include <doctest/doctest.h>

#include "run_cli.hpp"

using cpsim::test::count_lines;
using cpsim::test::run_cli;

TEST_CASE("cpsim layout prints the zigzag chunks and the flat work table") {
  const auto r = run_cli("layout --ranks 4 --seq 16", "layout1");
  CHECK(r.rc == 0);
  CHECK(r.out.find("0     0,7") != std::string::npos);
  CHECK(r.out.find("3     3,4") != std::string::npos);
  CHECK(r.out.find("imbalance (max/mean visible pairs): 1.00") != std::string::npos);
  CHECK(r.err.empty());
}

TEST_CASE("cpsim layout names its units and puts a legend under the grid, the mask's own under a mask grid") {
  const auto causal = run_cli("layout --ranks 2 --seq 8", "layout_legend1");
  CHECK(causal.rc == 0);
  CHECK(causal.out.find("chunk blocks: t x t blocks, a diagonal one counting 1/2") != std::string::npos);
  CHECK(causal.out.find("legend: r = rank r owns the query chunk  r\\ = on the diagonal, partly masked") !=
        std::string::npos);
  CHECK(causal.out.find(". = masked (keys after queries)") != std::string::npos);
  const auto docs = run_cli("layout --ranks 2 --seq 16 --docs 8,8", "layout_legend2");
  CHECK(docs.rc == 0);
  CHECK(docs.out.find("chunk blocks: only for the causal mask on 2C chunks") != std::string::npos);
  CHECK(docs.out.find("Grid under the mask (rows: query cells, columns: key cells, 2 tokens each):") !=
        std::string::npos);
  CHECK(docs.out.find("legend: r = rank r owns the query cell   r\\ = the mask covers it in part") !=
        std::string::npos);
  CHECK(docs.out.find(". = masked (no pair visible)") != std::string::npos);
  CHECK(docs.out.find("keys after queries") == std::string::npos);
}

TEST_CASE("cpsim layout --json reports the contiguous chunk blocks 2, 6, 10, 14") {
  const auto r = run_cli("layout --ranks 4 --seq 16 --sharding contiguous --json", "layout2");
  CHECK(r.rc == 0);
  const cpsim::Json j = cpsim::parse_json(r.out, "the output", "");
  REQUIRE(j.at("ranks").size() == 4);
  const double want[] = {2, 6, 10, 14};
  for (std::size_t i = 0; i < 4; ++i) CHECK(j["ranks"][i].at("chunk_blocks").get<double>() == want[i]);
  CHECK(j["ranks"][3].at("ring_blocks").get<int>() == 4);
}

TEST_CASE("bad arguments give one line on stderr, exit code 2 and nothing on stdout") {
  for (const char* args :
       {"layout --seq 10 --ranks 4", "layout --sharding diagonal", "layout --ranks x", "layout --bogus", "nosuchcommand",
        "bench nosuchbench", "bench comm --collectives tree", "bench comm --ranks 1"}) {
    INFO(args);
    const auto r = run_cli(args, "layout_bad");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
  }
}

TEST_CASE("every command answers --help with exit code 0") {
  for (const char* args : {"--help", "layout --help", "run --help", "bench --help"}) {
    INFO(args);
    const auto r = run_cli(args, "help");
    CHECK(r.rc == 0);
    CHECK(r.out.find("usage: cpsim") != std::string::npos);
  }
}
