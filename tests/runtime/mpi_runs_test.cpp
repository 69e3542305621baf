// What rank 0 of an MPI job sends the job's other processes for each run: every plain field of the configuration.
#include "sim/runtime/mpi_runs.hpp"

#include <doctest/doctest.h>

#include <chrono>

using namespace cpsim;

TEST_CASE("a run's configuration crosses to the job's other processes unchanged, its device settings too") {
  RunConfig c;
  c.strategy = StrategyKind::hybrid;
  c.problem.batch = 2;
  c.problem.seq = 96;
  c.problem.heads = 8;
  c.problem.kv_heads = 2;
  c.problem.head_dim = 32;
  c.problem.causal = false;
  c.problem.scale = 0.25;
  c.problem.dtype = DType::f32;
  c.problem.sharding = Sharding::contiguous;
  c.problem.ranks = 6;
  c.problem.a2a = 3;
  c.problem.kv_replicate = true;
  c.backend = Backend::mpi;
  c.device.kernel = "mma1";
  c.backward = true;
  c.check = true;
  c.seed = 42;
  c.tracing = true;
  c.timeout = std::chrono::milliseconds(2500);
  const RunConfig d = decode_run(encode_run(c));
  CHECK(d.strategy == c.strategy);
  CHECK(d.problem.batch == 2);
  CHECK(d.problem.seq == 96);
  CHECK(d.problem.heads == 8);
  CHECK(d.problem.kv_heads == 2);
  CHECK(d.problem.head_dim == 32);
  CHECK_FALSE(d.problem.causal);
  CHECK(d.problem.scale == 0.25);
  CHECK(d.problem.dtype == DType::f32);
  CHECK(d.problem.sharding == Sharding::contiguous);
  CHECK(d.problem.ranks == 6);
  CHECK(d.problem.a2a == 3);
  CHECK(d.problem.kv_replicate);
  CHECK(d.backend == Backend::mpi);
  CHECK(d.device.kernel == "mma1");
  CHECK(d.backward);
  CHECK(d.check);
  CHECK(d.seed == 42);
  CHECK(d.tracing);
  CHECK(d.timeout == std::chrono::milliseconds(2500));
}
