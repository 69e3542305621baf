// `cpsim predict`: the blog post's table by default, the same numbers as the model in --json, one-line errors.
#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "../cli/run_cli.hpp"
#include "../runtime/json_reader.hpp"
#include "gqa_spec.hpp"
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
    CHECK(n == 7);  // one row in each of the six tables, and one in the nearest published points
  }
}

TEST_CASE("cpsim predict --json carries the numbers the model computes") {
  const auto r = run_cli("predict --seqs 16K,32K --strategies ulysses,ring,hybrid:4 --json", "predict_json");
  REQUIRE(r.rc == 0);
  CHECK(count_lines(r.out) == 1);
  const Json root = cpsim::test::parse_output(r.out);

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
  for (const Json& row : root.at("rows")) {
    CHECK(row.at("seq").get<std::int64_t>() == spec.seqs[i]);
    const int best = model::fastest(t, i, 3, true);
    const auto& best_choice = spec.strategies[static_cast<std::size_t>(best)];
    CHECK(row.at("fastest_total").get<std::string>() == model::choice_label(best_choice, 8));
    std::size_t j = 0;
    for (const Json& cell : row.at("cells")) {
      const model::Cell& c = t.cells[i * 3 + j];
      CHECK(cell.at("forward_ms").get<double>() == doctest::Approx(c.forward_us / 1e3));
      CHECK(cell.at("total_ms").get<double>() == doctest::Approx(c.total_us / 1e3));
      CHECK(cell.at("peak_bytes").get<std::int64_t>() == c.peak_bytes);
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
  const auto t = cpsim::test::parse_output(cpsim::test::slurp(path));
  const auto& cfg = t["otherData"]["run"]["config"];
  CHECK(cfg["machine"].get<std::string>() == "h100-sxm-8");
  CHECK(cfg["strategy"].get<std::string>() == "ring");
  CHECK(t["otherData"]["run"]["ranks"].size() == 4);
  // The ring's pattern on every rank: C-1 K/V sends forward, C-1 K/V and C-1 dK/dV backward.
  int isends[4] = {0, 0, 0, 0}, attention[4] = {0, 0, 0, 0};
  for (const auto& e : t["traceEvents"]) {
    if (!e.contains("pid") || !e.contains("name")) continue;
    const int pid = static_cast<int>(e["pid"].get<double>());
    if (e["name"].get<std::string>() == "isend") ++isends[pid];
    if (e["name"].get<std::string>() == "attention_forward") ++attention[pid];
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

namespace {

// The long flags a program's --help lists.
std::set<std::string> flags_of(const std::string& command) {
  const auto help = run_cli(command + " --help", "flags_help");
  std::set<std::string> flags;
  const std::regex flag("--([a-z][a-z0-9-]*)");
  for (auto it = std::sregex_iterator(help.out.begin(), help.out.end(), flag); it != std::sregex_iterator(); ++it)
    flags.insert((*it)[1]);
  return flags;
}

}  // namespace

TEST_CASE("cpsim predict refuses a shape too large to count, --seq with --seqs, in one line with exit code 2") {
  struct Bad {
    const char* args;
    const char* says;
  };
  for (const Bad& b : {Bad{"predict --heads 288230376151711744 --kv-heads 1", "q would hold B x S x Nq x D"},
                       Bad{"predict --heads 288230376151711744", "more than the model counts exactly"},
                       Bad{"predict --seq 4G --heads 65536", "the attention matrix would hold"},
                       Bad{"predict --seq 16K --seqs 16K,32K", "--seq and --seqs both"}}) {
    CAPTURE(b.args);
    const auto r = run_cli(b.args, "predict_huge");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(b.says) != std::string::npos);
  }
}

TEST_CASE("cpsim predict heads a hybrid column A x R only where A divides C") {
  const auto r = run_cli("predict --seq 16K --strategies ring,hybid:2", "predict_label_bad");
  CHECK(r.rc == 2);
  const auto ok = run_cli("predict --seq 16K --strategies hybrid:3,hybrid:2", "predict_label");
  REQUIRE(ok.rc == 0);
  CHECK(ok.out.find("hybrid:3") != std::string::npos);
  CHECK(ok.out.find("3x2") == std::string::npos);
  CHECK(ok.out.find("hybrid 2x4") != std::string::npos);
}

TEST_CASE("every flag cpsim predict's and cpsim plan's messages suggest is a flag of that command") {
  for (const std::string command : {"predict", "plan"}) {
    CAPTURE(command);
    const std::set<std::string> flags = flags_of(command);
    REQUIRE(flags.count("heads") == 1);
    // Inputs that make every strategy's constraint speak: head splits, GQA, meshes, lengths, nodes.
    for (const std::string args : {" --seq 16K --heads 32 --kv-heads 8 --ranks 16 --machine h100-ib",
                                   " --seq 16K --heads 6 --kv-heads 3 --ranks 8", " --seq 1000", " --ranks 16",
                                   " --heads 12 --kv-heads 5", " --seq 16K --heads 4 --kv-heads 2 --ranks 8"}) {
      const std::string extra = command == "predict" ? " --strategies all_gather,ulysses,ring,hybrid:2,hybrid:3" : "";
      const auto r =
          run_cli(command + args + (args.find("--seq 16K") != std::string::npos ? extra : ""), "flags_" + command);
      CAPTURE(args);
      // Other programs' flags (what to pass Megatron-LM) are not cpsim's: their lines are left out.
      std::string text;
      std::istringstream lines(r.out + r.err);
      for (std::string line; std::getline(lines, line);)
        if (line.find("Megatron-LM") == std::string::npos) text += line + "\n";
      const std::regex used("--([a-z][a-z0-9-]*)");
      for (auto it = std::sregex_iterator(text.begin(), text.end(), used); it != std::sregex_iterator(); ++it) {
        CAPTURE((*it)[0].str());
        CHECK(flags.count((*it)[1]) == 1);
      }
    }
  }
}

TEST_CASE("the sensitivity moves every level of a machine with levels, the middle ones too") {
  // h100-pcie-8's levels: pcie_switch (2 ranks), socket (4), node (8). Slow the socket's path below the UPI
  // link so that the ring's hop between switches sets its pace: moving that level must move the times.
  model::PredictSpec spec = model::test_specs::gqa_70b("h100-pcie-8", {32 << 10}, {{StrategyKind::ring, 0}});
  spec.machine = model::scaled(spec.machine, "levels.socket.p2p_gbps", 0.1);
  spec.keep_programs = true;
  const model::Sensitivity s = model::sensitivity(spec, model::predict(spec));
  std::set<std::string> fields;
  for (const auto& p : s.params) fields.insert(p.field);
  CHECK(fields.count("levels.socket.p2p_gbps") == 1);
  for (const auto& f : fields) {  // intra and inter only name the lowest and highest levels there
    CHECK(f.rfind("intra.", 0) != 0);
    CHECK(f.rfind("inter.", 0) != 0);
  }
}

TEST_CASE(
    "cpsim predict --sensitivity prints each time's range and what changes the fastest choice, as the model has them") {
  const auto r =
      run_cli("predict --seqs 16K,64K --strategies ulysses,ring,hybrid:4 --sensitivity --json", "predict_sens");
  REQUIRE(r.rc == 0);
  const auto j = cpsim::test::parse_output(r.out);
  model::PredictSpec spec;
  spec.problem.ranks = 8;
  spec.problem.heads = spec.problem.kv_heads = 64;
  spec.problem.head_dim = 128;
  spec.problem.dtype = DType::bf16;
  spec.seqs = {16 << 10, 64 << 10};
  spec.strategies = {{StrategyKind::ulysses, 0}, {StrategyKind::ring, 0}, {StrategyKind::hybrid, 4}};
  spec.machine = model::load_machine("h100-sxm-8");
  spec.keep_programs = true;
  const model::PredictTable t = model::predict(spec);
  const model::Sensitivity s = model::sensitivity(spec, t);
  const auto& sens = j["sensitivity"];
  CHECK(sens["move"].get<double>() == doctest::Approx(0.25));
  REQUIRE(sens["cells"].size() == 6);
  for (std::size_t k = 0; k < 6; ++k) {
    CHECK(sens["cells"][k]["low_ms"].get<double>() == doctest::Approx(s.lo_us[k] / 1e3));
    CHECK(sens["cells"][k]["high_ms"].get<double>() == doctest::Approx(s.hi_us[k] / 1e3));
    CHECK(s.lo_us[k] < t.cells[k].total_us);  // a faster kernel helps every cell
    CHECK(s.hi_us[k] > t.cells[k].total_us);
  }
  REQUIRE(sens["parameters"].size() == s.params.size());
  for (std::size_t i = 0; i < s.params.size(); ++i) {
    CHECK(sens["parameters"][i]["field"].get<std::string>() == s.params[i].field);
    // Each move that changes a row's fastest choice is listed, and only those.
    std::size_t changes = 0;
    for (std::size_t row = 0; row < 2; ++row)
      changes += (s.params[i].fastest_minus[row] != s.fastest_base[row]) +
                 (s.params[i].fastest_plus[row] != s.fastest_base[row]);
    CHECK(sens["parameters"][i]["fastest_changes"].size() == changes);
  }
  // The kernel's rate is among the costs that matter; the network of a one-node machine is not.
  bool kernel = false;
  for (const auto& p : s.params) {
    kernel = kernel || p.field == "kernel_d128.backward_full_tflops";
    CHECK(p.field.rfind("inter.", 0) != 0);
  }
  CHECK(kernel);
  const auto text =
      run_cli("predict --seqs 16K,64K --strategies ulysses,ring,hybrid:4 --sensitivity", "predict_sens_t");
  REQUIRE(text.rc == 0);
  CHECK(text.out.find("Range of the forward + backward time (ms)") != std::string::npos);
  CHECK(text.out.find("The fastest choice (forward + backward)") != std::string::npos);
}

TEST_CASE("cpsim predict refuses what it would ignore: an empty output name, --kv-replicate that copies nothing") {
  struct Bad {
    const char* args;
    const char* says;
  };
  for (const Bad& b :
       {Bad{"predict --seq 16K --strategies ring --trace ''", "--trace got an empty value"},
        Bad{"predict --seq 16K --strategies ring --html ''", "--html got an empty value"},
        Bad{"predict --kv-replicate", "no column's group is"},  // 64 KV heads: every group holds them
        Bad{"predict --heads 32 --kv-heads 8 --strategies ring,hybrid:2 --kv-replicate", "no column's group is"}}) {
    CAPTURE(b.args);
    const auto r = run_cli(b.args, "predict_ignored");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(b.says) != std::string::npos);
  }
  // Where a group is wider than the KV heads (Ulysses: 8 ranks, 4 KV heads) the copies are made and counted.
  const auto ok =
      run_cli("predict --seq 16K --heads 32 --kv-heads 4 --strategies ulysses,ring --kv-replicate", "predict_kv_ok");
  CHECK(ok.rc == 0);
  const auto without = run_cli("predict --seq 16K --heads 32 --kv-heads 4 --strategies ulysses,ring", "predict_kv_no");
  CHECK(without.rc == 0);
  CHECK(without.out.find("n/a") != std::string::npos);  // without copies Ulysses cannot split 4 KV heads 8 ways
  CHECK(ok.out.find("n/a") == std::string::npos);
}
