// Inference shapes on the command line (sim/cli/inference_cli.cpp): run, predict and plan.
#include <doctest/doctest.h>

#include "run_cli.hpp"

using namespace cpsim;
using test::count_lines;
using test::run_cli;
using test::values_after;

TEST_CASE("cpsim run takes an inference step with sizes in K and checks it, bytes per rank by formula") {
  const auto r = run_cli("run --strategy pass_q --new-tokens 1K --cached 1K -C 4 -N 4 --kv-heads 2 --check --json");
  REQUIRE(r.rc == 0);
  const std::vector<double> sent = values_after(r.out, "bytes_sent"), formula = values_after(r.out, "bytes_per_rank_formula");
  REQUIRE(sent.size() == 4);
  REQUIRE(formula.size() == 1);
  for (double b : sent) CHECK(b == formula[0]);
  CHECK(values_after(r.out, "new_tokens") == std::vector<double>{1024});
  CHECK(r.out.find("\"passed\":true") != std::string::npos);
}

TEST_CASE("cpsim run on an inference shape without --strategy runs pass-KV, the training ring with the cache") {
  const auto r = run_cli("run --new-tokens 64 --cached 192 -C 4 -N 8 --kv-heads 2 --head-dim 16 --check --json");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("\"strategy\":\"pass_kv\"") != std::string::npos);
  CHECK(r.out.find("\"passed\":true") != std::string::npos);
  const auto cached_only = run_cli("run --cached 16");  // no new tokens: named by the strategy that would run
  CHECK(cached_only.rc == 2);
  CHECK(cached_only.err.find("the inference strategy pass_kv needs the step's new tokens") != std::string::npos);
}

TEST_CASE("inference flags that do not fit exit 2 with one line naming a fix") {
  for (const char* args : {"run --strategy ring --new-tokens 16", "run --strategy decode --cached 16",
                           "run --strategy pass_kv --new-tokens 16 --backward", "run --strategy pass_q --new-tokens 0",
                           "run --strategy decode --new-tokens 100 --cached 8",
                           "run --strategy pass_kv --new-tokens 8 --dtype bf16",
                           "predict --new-tokens 16 --seq 4K", "plan --new-tokens 1K --ranks-per-node 0"}) {
    INFO(args);
    const auto r = run_cli(args);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.out.empty());
  }
}

TEST_CASE("cpsim predict on an inference shape prints both prefills and decode by CP degree") {
  const auto r = run_cli("predict --new-tokens 1 --cached 128K -C 4 --heads 16 --kv-heads 1 --machine h100-ib "
                         "--ranks-per-node 1 --json");
  REQUIRE(r.rc == 0);
  const std::vector<double> per_token = values_after(r.out, "per_token_ms");
  REQUIRE(per_token.size() == 3);  // C = 1, 2, 4
  CHECK(per_token[0] < per_token[1]);
  CHECK(per_token[1] < per_token[2]);
  CHECK(r.out.find("\"choice\":\"pass_q\"") != std::string::npos);
}

TEST_CASE("cpsim plan on an inference shape names the faster prefill and its five reasons") {
  const auto r = run_cli("plan --new-tokens 12800 --cached 115200 -C 4 --heads 16 --kv-heads 1 --machine h100-ib "
                         "--ranks-per-node 1");
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("Prefill: pass_kv") != std::string::npos);
  for (const char* n : {"  1. message size", "  2. bytes", "  3. overlap", "  4. overlap at the kernel's peak",
                        "  5. modeled"})
    CHECK(r.out.find(n) != std::string::npos);
}
