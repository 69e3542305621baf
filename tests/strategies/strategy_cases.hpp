// Shared helpers for the strategy tests: a run configuration in one line.
#pragma once
#include "sim/runtime/run.hpp"

namespace cpsim::test {

inline RunConfig config(StrategyKind s, Sharding sh, int C, Backend be = Backend::threads, bool backward = true) {
  RunConfig c;
  c.strategy = s;
  c.backend = be;
  c.backward = backward;
  c.check = true;
  c.timeout = std::chrono::seconds(60);
  Problem& p = c.problem;
  p.ranks = C;
  p.sharding = sh;
  p.batch = 2;
  p.seq = 16 * C;
  p.heads = 8;
  p.kv_heads = 2;
  p.head_dim = 32;
  p.dtype = DType::f64;
  if (s == StrategyKind::ulysses && C > p.kv_heads) p.kv_replicate = true;
  if (s == StrategyKind::hybrid) p.a2a = C >= 2 ? 2 : 1;
  return c;
}

}  // namespace cpsim::test
