// Every strategy, on both shardings and both CPU backends, against the single-process reference.
#include <doctest/doctest.h>

#include "sim/core/error.hpp"
#include "strategy_cases.hpp"

using namespace cpsim;
using test::config;

namespace {
std::string label(const RunConfig& c) {
  const Problem& p = c.problem;
  return std::string(strategy_name(c.strategy)) + " " + std::string(sharding_name(p.sharding)) + " C=" +
         std::to_string(p.ranks) + " A=" + std::to_string(p.a2a_size(c.strategy)) + " " +
         std::string(backend_name(c.backend)) + " " + std::string(dtype_name(p.dtype)) + " B=" +
         std::to_string(p.batch) + " Nq/Nkv=" + std::to_string(p.heads) + "/" + std::to_string(p.kv_heads) +
         " D=" + std::to_string(p.head_dim);
}

void expect_correct(const RunConfig& c) {
  INFO(label(c));
  const RunResult r = run(c);
  REQUIRE(r.check.ran);
  CHECK(r.check.err.out <= r.check.allowed.out);
  CHECK(r.check.err.lse <= r.check.allowed.lse);
  if (c.backward) {
    CHECK(r.check.err.dq <= r.check.allowed.dq);
    CHECK(r.check.err.dk <= r.check.allowed.dk);
    CHECK(r.check.err.dv <= r.check.allowed.dv);
  }
  CHECK(r.check.passed);
}
}  // namespace

TEST_CASE("every strategy matches the reference forward and backward in f64, threads backend") {
  for (StrategyKind s : all_strategies())
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
      for (int C : {1, 2, 4, 8}) {
        RunConfig c = config(s, sh, C);
        expect_correct(c);
      }
}

TEST_CASE("every strategy matches the reference on the processes backend") {
  for (StrategyKind s : all_strategies())
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous})
      for (int C : {2, 4}) expect_correct(config(s, sh, C, Backend::processes));
}

TEST_CASE("the forward alone matches the reference for every strategy") {
  for (StrategyKind s : all_strategies()) expect_correct(config(s, Sharding::zigzag, 4, Backend::threads, false));
}

TEST_CASE("the hybrid matches the reference on the 2x2, 2x4 and 4x2 meshes") {
  for (auto [C, A] : {std::pair{4, 2}, std::pair{8, 2}, std::pair{8, 4}})
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
      RunConfig c = config(StrategyKind::hybrid, sh, C);
      c.problem.a2a = A;
      c.problem.kv_heads = 8;  // A = 4 needs Nkv % 4 == 0 without replication
      expect_correct(c);
    }
}

TEST_CASE("head dim 128 with multi-head attention and batch 1 matches the reference") {
  for (StrategyKind s : all_strategies()) {
    RunConfig c = config(s, Sharding::zigzag, 4);
    c.problem.batch = 1;
    c.problem.heads = 4;
    c.problem.kv_heads = 4;
    c.problem.head_dim = 128;
    c.problem.kv_replicate = false;
    expect_correct(c);
  }
}

TEST_CASE("GQA 8/1 runs on ring and all_gather, and on ulysses with KV replication") {
  for (StrategyKind s : {StrategyKind::ring, StrategyKind::all_gather, StrategyKind::ulysses}) {
    RunConfig c = config(s, Sharding::zigzag, 4);
    c.problem.kv_heads = 1;
    c.problem.kv_replicate = s == StrategyKind::ulysses;
    expect_correct(c);
  }
}

TEST_CASE("f32 runs stay within 2x the single-process f32 kernel's error") {
  for (StrategyKind s : all_strategies())
    for (Sharding sh : {Sharding::zigzag, Sharding::contiguous}) {
      RunConfig c = config(s, sh, 4);
      c.problem.dtype = DType::f32;
      expect_correct(c);
    }
}

TEST_CASE("full (non-causal) attention matches the reference for every strategy") {
  for (StrategyKind s : all_strategies()) {
    RunConfig c = config(s, Sharding::zigzag, 4);
    c.problem.causal = false;
    expect_correct(c);
  }
}

TEST_CASE("the hybrid replicates KV heads when its A2A group is larger than Nkv") {
  RunConfig c = config(StrategyKind::hybrid, Sharding::zigzag, 8);
  c.problem.a2a = 4;  // Nkv = 2 < A = 4: each KV head goes to 2 members of the group
  c.problem.kv_replicate = true;
  expect_correct(c);
}
