#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

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
  CHECK(causal.out.find("visible pairs: query-key pairs the mask lets through, per (batch, head): cpsim's unit of "
                        "work.") != std::string::npos);
  CHECK(causal.out.find("t x t = its balance program's blocks, a diagonal one\ncounting 1/2") != std::string::npos);
  CHECK(causal.out.find("legend: r = rank r owns the query chunk  r\\ = on the diagonal, partly masked") !=
        std::string::npos);
  CHECK(causal.out.find(". = masked (keys after queries)") != std::string::npos);
  const auto docs = run_cli("layout --ranks 2 --seq 16 --docs 8,8", "layout_legend2");
  CHECK(docs.rc == 0);
  CHECK(docs.out.find("t x t only for the causal mask on 2C chunks") != std::string::npos);
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

namespace {

// The whitespace-separated words of the first line of `text` after `heading` that starts with `start`.
std::vector<std::string> row_after(const std::string& text, const std::string& heading, const std::string& start) {
  std::istringstream in(text.substr(text.find(heading)));
  for (std::string line; std::getline(in, line);)
    if (line.rfind(start, 0) == 0) {
      std::istringstream words(line);
      std::vector<std::string> out;
      for (std::string w; words >> w;) out.push_back(w);
      return out;
    }
  return {};
}

}  // namespace

TEST_CASE("pair counts up to 2^63 - 1 print exactly in the table and the JSON; past it layout refuses with one line") {
  // S = 2^32 - 2 on one rank: S (S + 1) / 2 = 9223372030412324865 causal pairs, just below 2^63.
  const auto table = run_cli("layout --ranks 1 --seq 4294967294", "layout_big1");
  CHECK(table.rc == 0);
  CHECK(table.out.find(" 9223372030412324865 ") != std::string::npos);
  const auto json = run_cli("layout --ranks 1 --seq 4294967294 --json", "layout_big2");
  CHECK(json.rc == 0);
  CHECK(json.out.find("\"visible_pairs\":9223372030412324865") != std::string::npos);
  // S = 2^32: 2^63 + 2^31 pairs (one rank), S = 2^62 on two: both past 64 bits, refused with the true count.
  for (const char* args : {"layout --ranks 1 --seq 4294967296", "layout --ranks 2 --seq 4611686018427387904",
                           "layout --ranks 2 --seq 4611686018427387904 --json"}) {
    INFO(args);
    const auto r = run_cli(args, "layout_big3");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find("more than a 64-bit count holds") != std::string::npos);
  }
  const auto r = run_cli("layout --ranks 1 --seq 4294967296", "layout_big4");
  CHECK(r.err.find("lets 9223372039002259456 query-key pairs through") != std::string::npos);
  // A window keeps the counts small: S = 2^60 with a window of 4 is 4 S - 6 pairs, 2 S - 6 of them rank 0's
  // (zigzag: chunks 0 and 3 of S/4 tokens, the first missing 6 of its 4 t); at S = 2^62, 4 S - 6 passes 2^63.
  const auto w = run_cli("layout --ranks 2 --seq 1152921504606846976 --window 4 --json", "layout_big5");
  CHECK(w.rc == 0);
  CHECK(w.out.find("\"visible_pairs\":2305843009213693946,") != std::string::npos);
  const auto w2 = run_cli("layout --ranks 2 --seq 4611686018427387904 --window 4", "layout_big6");
  CHECK(w2.rc == 2);
  CHECK(w2.err.find("lets 18446744073709551610 query-key pairs through") != std::string::npos);
}

TEST_CASE("every column is as wide as its longest entry: 15-digit pair counts never run into the next column") {
  const auto r = run_cli("layout --ranks 8 --seq 64M", "layout_wide");
  CHECK(r.rc == 0);
  CHECK(r.out.find("2814749809049608") == std::string::npos);  // 281474980904960 pairs, then 8 ring blocks
  const auto rank0 = row_after(r.out, "rank  chunks", "0 ");
  REQUIRE(rank0.size() == 9);  // 0 | 0,15 | [0, | 4194304), | [62914560, | 67108864) | pairs | 16 | ring blocks
  CHECK(rank0[6] == "281474980904960");
  CHECK(rank0[8] == "8");
  const auto steps0 = row_after(r.out, "Work per ring step", "0 ");
  REQUIRE(steps0.size() == 10);  // rank, 8 steps, total
  CHECK(steps0[1] == "35184376283136");
  CHECK(steps0[2] == "35184372088832");
  CHECK(steps0[9] == "281474980904960");
  const auto side = row_after(r.out, "Shardings side by side", "contiguous");
  REQUIRE(side.size() == 11);  // name, 8 ranks, max/mean, ring
}

TEST_CASE("bad arguments give one line on stderr, exit code 2 and nothing on stdout") {
  for (const char* args :
       {"layout --seq 10 --ranks 4", "layout --sharding diagonal", "layout --ranks x", "layout --bogus",
        "nosuchcommand", "bench nosuchbench", "bench comm --collectives tree", "bench comm --ranks 1"}) {
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
