// `cpsim predict`: the blog post's table by default, the same numbers as the model in --json, one-line errors.
// (Numbers are read from the JSON as text: Boost's numeric getters trip -Wmaybe-uninitialized in sanitizer builds.)
#include <doctest/doctest.h>

// Boost.PropertyTree's JSON parser includes the deprecated <boost/bind.hpp>; this keeps its notice out of the build.
#define BOOST_BIND_GLOBAL_PLACEHOLDERS
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <filesystem>
#include <sstream>

#include "../cli/run_cli.hpp"
#include "../runtime/json_reader.hpp"
#include "sim/model/predict.hpp"

using namespace cpsim;
using cpsim::test::count_lines;
using cpsim::test::run_cli;

TEST_CASE("cpsim predict prints the blog post's table: five lengths, five strategies, times, memory, the fastest") {
  const auto r = run_cli("predict", "predict_default");
  REQUIRE(r.rc == 0);
  for (const char* s :
       {"8 ranks on h100-sxm-8", "bf16, B=1, Nq=64, Nkv=64, D=128", "Forward time (ms)", "Forward + backward time (ms)",
        "Peak memory per GPU (GiB)", "all_gather", "ulysses", "ring", "hybrid 2x4", "hybrid 4x2", "fastest"})
    CHECK(r.out.find(s) != std::string::npos);
  for (const char* S : {"    16K ", "    32K ", "    64K ", "   128K ", "   256K "}) {
    std::size_t n = 0;
    for (auto at = r.out.find(S); at != std::string::npos; at = r.out.find(S, at + 1)) ++n;
    CHECK(n == 5);  // one row in each of the five tables
  }
}

TEST_CASE("cpsim predict --json carries the numbers the model computes") {
  const auto r = run_cli("predict --seqs 16K,32K --strategies ulysses,ring,hybrid:4 --json", "predict_json");
  REQUIRE(r.rc == 0);
  CHECK(count_lines(r.out) == 1);
  boost::property_tree::ptree root;
  std::istringstream in(r.out);
  boost::property_tree::read_json(in, root);

  model::PredictSpec spec;
  spec.problem.ranks = 8;
  spec.problem.heads = spec.problem.kv_heads = 64;
  spec.problem.head_dim = 128;
  spec.problem.dtype = DType::bf16;
  spec.seqs = {16 << 10, 32 << 10};
  spec.strategies = {{StrategyKind::ulysses, 0}, {StrategyKind::ring, 0}, {StrategyKind::hybrid, 4}};
  spec.machine = model::load_machine("h100-sxm-8");
  const model::PredictTable t = model::predict(spec);

  std::size_t i = 0, cells = 0;
  for (const auto& [_, row] : root.get_child("rows")) {
    CHECK(std::stoll(row.get<std::string>("seq")) == spec.seqs[i]);
    const int best = model::fastest(t, i, 3, true);
    const auto& best_choice = spec.strategies[static_cast<std::size_t>(best)];
    CHECK(row.get<std::string>("fastest_total") == model::choice_label(best_choice, 8));
    std::size_t j = 0;
    for (const auto& [__, cell] : row.get_child("cells")) {
      const model::Cell& c = t.cells[i * 3 + j];
      CHECK(std::stod(cell.get<std::string>("forward_ms")) == doctest::Approx(c.forward_us / 1e3));
      CHECK(std::stod(cell.get<std::string>("total_ms")) == doctest::Approx(c.total_us / 1e3));
      CHECK(std::stoll(cell.get<std::string>("peak_bytes")) == c.peak_bytes);
      ++j;
      ++cells;
    }
    ++i;
  }
  CHECK(cells == 6);
}

TEST_CASE("cpsim predict refuses impossible requests with one line naming the constraint and a fix") {
  struct Bad {
    const char* args;
    const char* says;
  };
  for (const Bad& b : {Bad{"predict --ranks 16", "--machine h100-ib"}, Bad{"predict --seq 1000", "2C"},
                       Bad{"predict --strategies ring,warp", "use"}, Bad{"predict --machine nowhere.json", "preset"},
                       Bad{"predict --ranks 0", "--ranks"}, Bad{"predict --seqs 16Q", "suffix"}}) {
    CAPTURE(b.args);
    const auto r = run_cli(b.args, "predict_bad");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(b.says) != std::string::npos);
  }
}

TEST_CASE("cpsim predict --print-machine prints a preset that loads back as the same machine") {
  const auto r = run_cli("predict --print-machine h100-ib", "predict_machine");
  REQUIRE(r.rc == 0);
  const model::Machine printed = model::parse_machine(r.out, "printed"), preset = model::load_machine("h100-ib");
  CHECK(printed.inter.p2p_gbps == preset.inter.p2p_gbps);
  CHECK(printed.sources.size() == preset.sources.size());
}

TEST_CASE("cpsim predict --trace writes the modeled timeline of one run as a trace the visualizer reads") {
  const std::string path = std::string(CPSIM_BINARY_DIR) + "/tests/predict_trace.json";
  std::filesystem::remove(path);
  const auto r = run_cli("predict --ranks 4 --seq 16K --strategies ring --trace " + path, "predict_trace");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("Wrote the modeled trace to " + path) != std::string::npos);
  const auto t = cpsim::test::JsonReader::parse(cpsim::test::slurp(path));
  const auto& cfg = t["otherData"]["run"]["config"];
  CHECK(cfg["machine"].str == "h100-sxm-8");
  CHECK(cfg["strategy"].str == "ring");
  CHECK(t["otherData"]["run"]["ranks"].arr.size() == 4);
  // The ring's pattern on every rank: C-1 K/V sends forward, C-1 K/V and C-1 dK/dV backward.
  int isends[4] = {0, 0, 0, 0}, attention[4] = {0, 0, 0, 0};
  for (const auto& e : t["traceEvents"].arr) {
    if (!e.has("pid") || !e.has("name")) continue;
    const int pid = static_cast<int>(e["pid"].num);
    if (e["name"].str == "isend") ++isends[pid];
    if (e["name"].str == "attention_forward") ++attention[pid];
  }
  for (int k = 0; k < 4; ++k) {
    CHECK(isends[k] == 3 * 3);
    CHECK(attention[k] >= 4);  // one block per step at least
  }
  std::filesystem::remove(path);
}

TEST_CASE("cpsim predict --trace asks for one length and one strategy, in one line with exit code 2") {
  const auto r = run_cli("predict --seqs 16K,32K --strategies ring --trace x.json", "predict_trace_bad");
  CHECK(r.rc == 2);
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.find("one length and one strategy") != std::string::npos);
  CHECK(r.out.empty());
}
