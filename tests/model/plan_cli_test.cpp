// `cpsim plan`: the fastest candidates that fit, ranked by the model's own times, their memory exactly the counting
// run's peak (plus activations when asked), and one line per kind of rejection.
#include <doctest/doctest.h>

#include "../cli/run_cli.hpp"
#include "../runtime/json_reader.hpp"
#include "sim/model/plan.hpp"

using namespace cpsim;
using cpsim::test::count_lines;
using cpsim::test::run_cli;

namespace {

model::PlanSpec llama_spec(int ranks, const char* machine, std::int64_t seq) {
  model::PlanSpec spec;
  spec.machine = model::load_machine(machine);
  Problem& p = spec.problem;
  p.ranks = ranks;
  p.heads = 32;
  p.kv_heads = 8;
  p.head_dim = 128;
  p.dtype = DType::bf16;
  p.seq = seq;
  return spec;
}

}  // namespace

TEST_CASE("cpsim plan lists the five fastest candidates that fit, as the model ranks them, with exact memory") {
  const auto r = run_cli("plan --machine h100-ib --ranks 16 --heads 32 --kv-heads 8 --seq 256K --json", "plan_json");
  REQUIRE(r.rc == 0);
  const auto j = cpsim::test::parse_output(r.out);
  const model::Plan plan = model::plan(llama_spec(16, "h100-ib", 256 << 10));
  const auto& fastest = j["fastest"];
  REQUIRE(fastest.size() == 5);
  CHECK(static_cast<std::size_t>(j["searched"].get<double>()) ==
        model::plan_candidates(llama_spec(16, "h100-ib", 1).problem).size());
  for (std::size_t i = 0; i < fastest.size(); ++i) {
    CAPTURE(i);
    const model::PlanEntry& e = plan.fits[i];
    CHECK(fastest[i]["candidate"].get<std::string>() == e.candidate.label);
    CHECK(fastest[i]["time_ms"].get<double>() == doctest::Approx(e.cell.total_us / 1e3));
    if (i > 0) CHECK(fastest[i]["time_ms"].get<double>() >= fastest[i - 1]["time_ms"].get<double>());
    // The attention memory is the counting run's peak for that candidate.
    Problem p = llama_spec(16, "h100-ib", 256 << 10).problem;
    p.sharding = e.candidate.sharding;
    p.kv_replicate = e.candidate.kv_replicate;
    CHECK(static_cast<std::int64_t>(fastest[i]["attention_bytes"].get<double>()) ==
          model::count_cell(p, e.candidate.strategy, true).peak_bytes);
  }
  // Ulysses cannot split 8 KV heads over 16 ranks: its rejection says so.
  bool ulysses = false;
  for (const auto& rej : j["rejected"])
    ulysses = ulysses || (rej["kind"].get<std::string>() == "ulysses" &&
                          rej["why"].get<std::string>().find("Nkv % 16") != std::string::npos);
  CHECK(ulysses);
}

TEST_CASE("cpsim plan counts activations when given layers and a hidden size, and rejects what then overflows") {
  model::PlanSpec spec = llama_spec(16, "h100-ib", 1 << 20);
  spec.layers = 32;
  spec.hidden = 4096;
  // 32 layers x 34 x (1M / 16) tokens x 4096 bytes (Korthikanti et al. 2022, with FlashAttention).
  CHECK(model::activation_bytes(spec) == 32LL * 34 * (1 << 16) * 4096);
  const auto r = run_cli("plan --machine h100-ib --ranks 16 --heads 32 --kv-heads 8 --seq 1M --layers 32 --hidden 4096",
                         "plan_act");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("Nothing fits") != std::string::npos);
  CHECK(r.out.find("ring: needs ") != std::string::npos);
  CHECK(r.out.find("more than the 74.5 GiB a GPU holds") != std::string::npos);
  const auto more = run_cli(
      "plan --machine h100-ib --ranks 64 --heads 32 --kv-heads 8 --seq 1M --layers 32 --hidden 4096", "plan_act64");
  REQUIRE(more.rc == 0);
  CHECK(more.out.find("The 5 fastest that fit") != std::string::npos);
}

TEST_CASE("cpsim plan refuses impossible requests with one line naming the constraint and a fix") {
  struct Bad {
    const char* args;
    const char* says;
  };
  for (const Bad& b : {Bad{"plan --layers 32", "--layers and --hidden together"}, Bad{"plan --ranks 16", "h100-ib"},
                       Bad{"plan --heads 12 --kv-heads 5", "Nq % Nkv"}, Bad{"plan --seq 1001", "--seq"},
                       Bad{"plan --top 0", "--top"}}) {
    CAPTURE(b.args);
    const auto r = run_cli(b.args, "plan_bad");
    CHECK(r.rc == 2);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.find(b.says) != std::string::npos);
  }
}
