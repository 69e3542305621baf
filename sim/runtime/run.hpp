// One context-parallel run, start to finish: the straight path every mode of cpsim walks.
//
//   config (validated) -> layout -> launcher starts C ranks -> each rank generates its shard of the inputs
//   from the seed, runs strategy.forward (and backward) on its device -> per-rank stats and outputs gathered
//   to the caller -> assembled in global sequence order -> checked against the single-process reference.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/comm/launcher.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim {

struct RunConfig {
  StrategyKind strategy = StrategyKind::ring;
  Problem problem;
  Backend backend = Backend::threads;
  bool backward = false;
  bool check = false;
  std::uint64_t seed = 1;
  bool tracing = false;
  std::string machine;  // a modeled run (`cpsim predict --trace`): the machine model's name; empty when measured
  std::string gpu_kernel = "auto";  // GPU backends: the CUDA device's attention kernels (--kernel, GpuKernel)
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // Called on every rank at each step mark of the strategy (lessons pause here). May use the communicator.
  std::function<void(Communicator& comm, const std::string& phase, int step)> step_hook;
  // Before the strategy runs, on every rank (tests use it to change one rank's inputs).
  std::function<void(int rank, std::vector<double>& q, std::vector<double>& k, std::vector<double>& v)> tamper;
};

// Stream ids of the seeded inputs (sim/core/random.hpp): element i of q is normal_at(seed, kStreamQ, i).
inline constexpr std::uint64_t kStreamQ = 0, kStreamK = 1, kStreamV = 2, kStreamDout = 3;

// Tensors in global sequence order, as doubles: q, out, dq, dout [B, S, Nq, D]; k, v, dk, dv [B, S, Nkv, D];
// lse [B, Nq, S].
struct GlobalTensors {
  std::vector<double> q, k, v, dout, out, lse, dq, dk, dv;
};

struct TensorErrors {
  double out = 0, lse = 0, dq = 0, dk = 0, dv = 0;
};

struct CheckReport {
  bool ran = false;
  bool passed = false;
  TensorErrors err;       // max abs error against the f64 reference
  TensorErrors allowed;   // the tolerance per tensor
  TensorErrors baseline;  // f32: the single-process tiled kernel's own error (the tolerance is 2x this)
  std::string rule;       // how the tolerance was chosen, in words
  std::vector<double> per_rank;  // max abs error of out (and dq, dk, dv) on the rows each rank owns
};

struct RankReport {
  int rank = 0;
  std::vector<Span> spans;  // the positions the rank owns
  Recorder stats;
};

struct RunResult {
  RunConfig config;
  std::vector<RankReport> ranks;
  GlobalTensors tensors;
  CheckReport check;
  double wall_ms = 0;
};

// Validates (UsageError), runs, gathers, checks (when config.check). Throws RankFailure when a rank fails.
RunResult run(const RunConfig& config);

// The seeded global inputs of a run (rounded to f32 for f32 runs), exactly what the ranks generate.
GlobalTensors make_inputs(const RunConfig& config);

// Compares result.tensors with the f64 reference on the same inputs.
CheckReport check_run(const RunConfig& config, const GlobalTensors& t);

}  // namespace cpsim
