// Every strategy, unchanged, on the cuda-threads backend (all ranks on one GPU): both shardings, C = 1, 2, 4, 8,
// the hybrid on 2x2 and 2x4 meshes, forward and backward, bf16 (tensor cores) and f32, with and without GQA, checked
// against the f64 reference on the same inputs. And the counts: the same calls and bytes as on the CPU backends.
#include <doctest/doctest.h>

#include "gpu_support.hpp"
#include "sim/runtime/run.hpp"

using namespace cpsim;
using test::expect_matches_reference;
using test::small_run;

namespace {
const test::Launcher kCudaThreads = [](const LaunchOptions& o, const RankFn& f) { return launch_cuda_threads(o, f); };
}

TEST_CASE("every strategy and sharding matches the reference on cuda-threads, bf16 and f32") {
  for (DType dtype : {DType::bf16, DType::f32})
    for (StrategyKind s : all_strategies())
      for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
        for (int C : {1, 2, 4, 8}) expect_matches_reference(small_run(s, sh, C, dtype), kCudaThreads);
}

TEST_CASE("grouped-query attention matches the reference on cuda-threads") {
  for (DType dtype : {DType::bf16, DType::f32})
    for (StrategyKind s : all_strategies())
      for (int C : {2, 4, 8}) expect_matches_reference(small_run(s, Sharding::zigzag, C, dtype, true), kCudaThreads);
}

TEST_CASE("the hybrid matches the reference on 2x2 and 2x4 meshes, head dim 128") {
  for (DType dtype : {DType::bf16, DType::f32})
    for (int C : {4, 8})
      for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
        test::GpuRun c = small_run(StrategyKind::hybrid, sh, C, dtype);
        c.problem.a2a = 2;
        c.problem.head_dim = 128;
        c.problem.batch = 1;
        expect_matches_reference(c, kCudaThreads);
      }
}

TEST_CASE("the forward alone matches the reference, and longer sequences too") {
  for (StrategyKind s : all_strategies()) {
    test::GpuRun c = small_run(s, Sharding::zigzag, 4, DType::bf16);
    c.backward = false;
    expect_matches_reference(c, kCudaThreads);
    c.backward = true;
    c.problem.seq = 1024;  // several 64-row tiles per rank and per chunk
    c.problem.batch = 1;
    expect_matches_reference(c, kCudaThreads);
  }
}

TEST_CASE("cuda-threads records the same calls, bytes and work as the threads backend") {
  for (StrategyKind s : all_strategies()) {
    INFO(strategy_name(s));
    test::GpuRun g = small_run(s, Sharding::zigzag, 4, DType::f32, true);
    const auto gpu = test::run_on_gpu(g, kCudaThreads);
    RunConfig cpu;
    cpu.strategy = s;
    cpu.problem = g.problem;
    cpu.backward = true;
    cpu.backend = Backend::threads;
    const RunResult ref = run(cpu);
    REQUIRE(ref.ranks.size() == gpu.outcomes.size());
    for (std::size_t r = 0; r < gpu.outcomes.size(); ++r) {
      const CommCounts &a = gpu.outcomes[r].stats.comm_counts(), &b = ref.ranks[r].stats.comm_counts();
      CHECK(a.calls == b.calls);
      CHECK(a.bytes_sent == b.bytes_sent);
      CHECK(a.bytes_received == b.bytes_received);
      CHECK(gpu.outcomes[r].stats.total_work().pairs == ref.ranks[r].stats.total_work().pairs);
      CHECK(gpu.outcomes[r].stats.total_work().flops == ref.ranks[r].stats.total_work().flops);
      CHECK(gpu.outcomes[r].stats.peak_bytes() == ref.ranks[r].stats.peak_bytes());
    }
  }
}
