// `cpsim run --trace FILE` and `--html FILE`: the files are written, they hold the run, and bad paths are refused
// before anything runs.
#include <doctest/doctest.h>

#include <filesystem>

#include "../cli/run_cli.hpp"
#include "json_reader.hpp"

using cpsim::test::run_cli;
using cpsim::test::slurp;

namespace {
const std::string dir = std::string(CPSIM_BINARY_DIR) + "/tests/";
}

TEST_CASE("cpsim run --trace writes a trace with every rank's events and says where") {
  const std::string path = dir + "trace_cli.json";
  std::filesystem::remove(path);
  const auto r = run_cli("run --strategy ulysses --ranks 2 --seq 16 --backward --trace " + path, "trace1");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("Wrote the trace to " + path) != std::string::npos);
  const auto t = cpsim::test::parse_output(slurp(path));
  int a2a[2] = {0, 0};
  for (const auto& e : t["traceEvents"])
    if (e["name"].get<std::string>() == "all_to_all") ++a2a[static_cast<int>(e["pid"].get<double>())];
  CHECK(a2a[0] == 8);  // 4 forward + 4 backward
  CHECK(a2a[1] == 8);
  std::filesystem::remove(path);
}

TEST_CASE("cpsim run --html writes one page with the run and the benchmark inlined") {
  const std::string page = dir + "trace_cli.html", bench = dir + "trace_cli_bench.json";
  {
    std::ofstream f(bench);
    f << R"({"config":{"ranks":2},"results":[{"seq":16,"strategy":"ring","fwd_ms":1,"fwd_bwd_ms":2}]})";
  }
  const auto r = run_cli("run --strategy ring --ranks 2 --seq 16 --html " + page + " --bench-json " + bench, "trace2");
  REQUIRE(r.rc == 0);
  const std::string html = slurp(page);
  CHECK(html.find("<script id=\"cpsim-trace\"") != std::string::npos);
  CHECK(html.find("<script id=\"cpsim-bench\"") != std::string::npos);
  CHECK(html.find("<script src=") == std::string::npos);
  std::filesystem::remove(page);
  std::filesystem::remove(bench);
}

TEST_CASE("cpsim run --bench-json refuses a file that is not cpsim bench strategies output, before the run") {
  const std::string page = dir + "trace_cli_badbench.html", bad = dir + "trace_cli_badbench.json";
  for (const char* text : {"not json at all", "[1, 2]", R"({"traceEvents": []})"}) {
    CAPTURE(text);
    std::ofstream(bad) << text;
    const auto r = run_cli("run --ranks 2 --seq 16 --html " + page + " --bench-json " + bad, "trace_badbench");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(r.err.find("--bench-json") != std::string::npos);
    CHECK(r.err.find("cpsim bench strategies --json") != std::string::npos);
    CHECK(!std::filesystem::exists(page));
  }
  std::filesystem::remove(bad);
}

TEST_CASE("a trace or page into a missing folder exits 2 before the run, with one line") {
  for (const char* flag : {"--trace", "--html"}) {
    const auto r = run_cli(std::string("run --ranks 2 --seq 16 ") + flag + " " + dir + "no/such/folder/x", "trace3");
    CHECK(r.rc == 2);
    CHECK(r.err.find("existing folder") != std::string::npos);
    CHECK(r.out.empty());
  }
  const auto b = run_cli("run --ranks 2 --seq 16 --bench-json " + dir + "x.json", "trace4");
  CHECK(b.rc == 2);
  CHECK(b.err.find("--html") != std::string::npos);
}

TEST_CASE("cpsim run --html --compare inlines a second trace, and refuses a file that is not a trace") {
  const std::string first = dir + "trace_cli_first.json", page = dir + "trace_cli_compare.html";
  REQUIRE(run_cli("run --strategy ring --ranks 2 --seq 16 --trace " + first, "trace5").rc == 0);
  const auto r = run_cli("run --strategy ulysses --ranks 2 --seq 16 --html " + page + " --compare " + first, "trace6");
  REQUIRE(r.rc == 0);
  const std::string html = slurp(page);
  const auto at = html.find("<script id=\"cpsim-compare\"");
  REQUIRE(at != std::string::npos);
  CHECK(html.find("\"strategy\":\"ring\"", at) != std::string::npos);  // the compared run is the ring
  std::filesystem::remove(page);
  const auto bad = run_cli("run --ranks 2 --seq 16 --html " + page + " --compare " + page + "_missing", "trace7");
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("cannot be read") != std::string::npos);
  CHECK(!std::filesystem::exists(page));
  {
    std::ofstream f(first);
    f << R"({"results":[]})";
  }
  const auto not_trace = run_cli("run --ranks 2 --seq 16 --html " + page + " --compare " + first, "trace8");
  CHECK(not_trace.rc == 2);
  CHECK(not_trace.err.find("is not a cpsim trace") != std::string::npos);
  CHECK(!std::filesystem::exists(page));
  std::filesystem::remove(first);
}
