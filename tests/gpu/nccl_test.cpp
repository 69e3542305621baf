// The nccl backend: one process per GPU, forked by launch_nccl. These cases run in processes of their own
// (ctest entries gpu.nccl and gpu.nccl_multi): a process that has used CUDA may not fork ranks that use it.
#include <doctest/doctest.h>

#include "comm_cases.hpp"
#include "gpu_support.hpp"

using namespace cpsim;

namespace {
const test::Launcher kNccl = [](const LaunchOptions& o, const RankFn& f) { return launch_nccl(o, f); };

void every_strategy(int C) {
  for (DType dtype : {DType::bf16, DType::f32})
    for (StrategyKind s : all_strategies())
      for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
        test::expect_matches_reference(test::small_run(s, sh, C, dtype, C > 1), kNccl);
}
}  // namespace

TEST_SUITE("nccl") {
  TEST_CASE("every communicator call delivers the right values on nccl with one rank") {
    LaunchOptions o;
    o.ranks = 1;
    const auto outcomes = launch_nccl(o, test::every_call);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].result == "ok");
    CHECK(outcomes[0].stats.comm_counts().count("all_gather") == 2);
  }

  TEST_CASE("every strategy matches the reference on nccl with one rank") {
    every_strategy(1);
  }

  TEST_CASE("asking for more nccl ranks than GPUs names the cause and the fix") {
    LaunchOptions o;
    o.ranks = static_cast<int>(probe_gpus().gpus.size()) + 1;
    CHECK_THROWS_WITH_AS(launch_nccl(o, test::every_call), doctest::Contains("GPUs"), UsageError);
  }
}

TEST_SUITE("nccl_multi") {
  TEST_CASE("every communicator call and every strategy run on nccl across GPUs") {
    const int gpus = static_cast<int>(probe_gpus().gpus.size());
    for (int C : {2, 4, 8}) {
      if (C > gpus) break;
      INFO("C = " << C);
      LaunchOptions o;
      o.ranks = C;
      for (const RankOutcome& r : launch_nccl(o, test::every_call)) CHECK(r.result == "ok");
      every_strategy(C);
    }
  }
}
