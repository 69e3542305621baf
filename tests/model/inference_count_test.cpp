// The counting run of the inference strategies (sim/model/inference_count.cpp) sees what a numeric run does.
#include <doctest/doctest.h>

#include "sim/core/error.hpp"
#include "sim/model/inference_count.hpp"
#include "sim/runtime/inference_run.hpp"

using namespace cpsim;

TEST_CASE("a counting run of each inference strategy sends, receives and computes what the numeric run does") {
  for (InferenceKind k : all_inference())
    for (int C : {1, 3, 4}) {
      InferenceRunConfig cfg;
      cfg.kind = k;
      InferenceProblem& p = cfg.problem;
      p.ranks = C;
      p.batch = 2;
      p.new_tokens = k == InferenceKind::decode ? 3 : 13;
      p.cached = 35;
      p.heads = 4;
      p.kv_heads = 2;
      p.head_dim = 8;
      INFO(inference_name(k), " C=", C);
      const InferenceRunResult numeric = run_inference(cfg);
      const model::InferenceCount counted = model::count_inference(p, k);
      REQUIRE(counted.ranks.size() == numeric.ranks.size());
      REQUIRE(counted.programs.ranks.size() == numeric.ranks.size());
      for (std::size_t r = 0; r < counted.ranks.size(); ++r) {
        const Recorder &a = counted.ranks[r], &b = numeric.ranks[r].stats;
        CHECK(a.comm_counts().bytes_sent == b.comm_counts().bytes_sent);
        CHECK(a.comm_counts().bytes_received == b.comm_counts().bytes_received);
        CHECK(a.total_work().pairs == b.total_work().pairs);
        CHECK(a.total_work().calls == b.total_work().calls);
      }
    }
}

TEST_CASE("a counting run refuses an impossible inference problem") {
  InferenceProblem p;
  p.new_tokens = 0;
  CHECK_THROWS_AS(model::count_inference(p, InferenceKind::pass_q), UsageError);
}
