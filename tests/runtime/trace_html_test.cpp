// The self-contained page: every script and stylesheet of the visualizer inlined, the trace (and a benchmark) as
// data blocks that no string in them can close early, and a clear error when the page's files are missing.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "json_reader.hpp"
#include "sim/core/error.hpp"
#include "sim/runtime/trace.hpp"

using namespace cpsim;

namespace {

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The text of <script id="ID" ...>TEXT</script>.
std::string block(const std::string& page, const std::string& id) {
  const auto at = page.find("<script id=\"" + id + "\"");
  REQUIRE(at != std::string::npos);
  const auto start = page.find('>', at) + 1;
  return page.substr(start, page.find("</script>", start) - start);
}

RunResult small_run() {
  RunConfig c;
  c.strategy = StrategyKind::ring;
  c.tracing = true;
  c.problem.ranks = 2;
  c.problem.seq = 16;
  return run(c);
}

// A one-rank traced result whose only event is named `name`.
RunResult result_with_event(const std::string& name) {
  RunResult r;
  r.config.tracing = true;
  r.config.problem.ranks = 1;
  Recorder rec(0, true);
  rec.begin_phase("forward");
  rec.work(WorkCounts{}, BlockKind::full, {{0, 1}}, {{0, 1}}, 0, 1, name.c_str());
  rec.end_phase();
  r.ranks.push_back(RankReport{0, {{0, 1}}, std::move(rec)});
  return r;
}

}  // namespace

TEST_CASE("the page inlines every script and stylesheet of the visualizer and references no other file") {
  const std::string index = slurp(visualizer_dir() / "index.html");
  const int scripts = occurrences(index, "<script src=");
  REQUIRE(scripts > 0);
  const std::string page = html_page(small_run());
  CHECK(occurrences(page, "<script src=") == 0);
  CHECK(occurrences(page, "<link") == 0);
  CHECK(occurrences(page, "<style>") == 1);
  CHECK(occurrences(page, "<script>") == scripts);
  CHECK(occurrences(page, "http://") == occurrences(page, "http://www.w3.org/2000/svg"));  // the SVG namespace only
  CHECK(occurrences(page, "https://") == 0);
  CHECK(page.find(slurp(visualizer_dir() / "js" / "app.js")) != std::string::npos);
}

TEST_CASE("the page's trace block is the trace JSON, and a benchmark becomes a second block") {
  const RunResult r = small_run();
  const std::string bench = R"({"config":{"ranks":2},"results":[{"seq":16,"strategy":"ring","fwd_ms":1}]})";
  const std::string page = html_page(r, bench);
  const auto trace = cpsim::test::parse_output(block(page, "cpsim-trace"));
  CHECK(trace["traceEvents"].size() == cpsim::test::parse_output(trace_json(r))["traceEvents"].size());
  CHECK(trace["otherData"]["run"]["config"]["strategy"].get<std::string>() == "ring");
  CHECK(cpsim::test::parse_output(block(page, "cpsim-bench"))["results"][0]["fwd_ms"].get<double>() == 1);
  CHECK(html_page(r).find("<script id=\"cpsim-bench\"") == std::string::npos);
}

TEST_CASE("a string holding </script> in the trace cannot end the data block early") {
  const std::string page = html_page(result_with_event("</script><b>x"));
  CHECK(occurrences(page, "</script>") == occurrences(page, "<script"));
  const auto trace = cpsim::test::parse_output(block(page, "cpsim-trace"));
  bool found = false;
  for (const auto& e : trace["traceEvents"]) found = found || e["name"].get<std::string>() == "</script><b>x";
  CHECK(found);
}

TEST_CASE("a visualizer folder without the page is an error that names CPSIM_VISUALIZER_DIR") {
  const std::string empty = std::string(CPSIM_BINARY_DIR) + "/tests/no_visualizer";
  std::filesystem::create_directories(empty);
  setenv("CPSIM_VISUALIZER_DIR", empty.c_str(), 1);
  std::string what;
  try {
    visualizer_dir();
  } catch (const Error& e) {
    what = e.what();
  }
  unsetenv("CPSIM_VISUALIZER_DIR");
  CHECK(what.find("CPSIM_VISUALIZER_DIR") != std::string::npos);
  CHECK(what.find("index.html") != std::string::npos);
  CHECK(std::filesystem::exists(visualizer_dir() / "index.html"));
}
