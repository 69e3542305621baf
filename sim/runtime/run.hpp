// One context-parallel run, start to finish: the straight path every mode of cpsim walks.
//
//   config (validated; its memory counted and refused when the machine cannot hold it: memory_need.hpp) -> launcher
//   starts C ranks on the backend -> each rank (rank_run.hpp) makes its shard of the seeded inputs (inputs.hpp), runs
//   strategy.forward (and backward) on its backend's device -> per-rank outputs and Recorders gathered to the
//   caller -> assembled in global sequence order -> checked against the single-process f64 reference (check_run:
//   sim/kernels/check.hpp's rules).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/comm/launcher.hpp"
#include "sim/kernels/check.hpp"
#include "sim/kernels/device_registry.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim {

struct RunConfig {
  StrategyKind strategy = StrategyKind::ring;
  Problem problem;
  Backend backend = Backend::threads;
  DeviceSettings device;  // what every rank's device is asked for (--kernel: the attention kernels)
  bool backward = false;
  bool check = false;
  bool keep_inputs = false;  // RunResult.tensors holds q, k, v (and dout) too (--dump); a check makes them anyway
  // RunResult.tensors holds out and lse (and dq, dk, dv). Off where nothing reads them (`cpsim run` without --check
  // or --dump): the ranks then neither download nor send back their outputs. A check keeps them anyway.
  bool keep_outputs = true;
  std::uint64_t seed = 1;
  bool tracing = false;
  std::string machine;  // a modeled run (`cpsim predict --trace`): the machine model's name; empty when measured
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // The bytes the run may hold (--memory-limit); 0: what the machine has left (memory_need.hpp). A run that needs
  // more is refused before it allocates anything.
  std::int64_t memory_limit = 0;
  // Called on every rank at each step mark of the strategy (lessons pause here). May use the communicator.
  std::function<void(Communicator& comm, const std::string& phase, int step)> step_hook;
  // Before the strategy runs, on every rank (tests use it to change one rank's inputs).
  std::function<void(int rank, std::vector<double>& q, std::vector<double>& k, std::vector<double>& v)> tamper;
};

// Tensors in global sequence order, as doubles: q, out, dq, dout [B, S, Nq, D]; k, v, dk, dv [B, S, Nkv, D];
// lse [B, Nq, S]. The inputs (q, k, v, dout) only when the run checks or keeps them (the ranks make their own shards);
// the outputs (out, lse, dq, dk, dv) unless the run keeps none (RunConfig::keep_outputs).
struct GlobalTensors {
  std::vector<double> q, k, v, dout, out, lse, dq, dk, dv;
};

struct RankReport {
  int rank = 0;
  Positions positions;  // the positions the rank owns
  Recorder stats;
};

struct RunResult {
  RunConfig config;
  std::vector<RankReport> ranks;
  GlobalTensors tensors;
  CheckReport check;  // ran only when config.check
  double wall_ms = 0;
};

// What run() validates before it launches (UsageError): the problem for the strategy, the backend built in, its
// device computing in the dtype and offering the kernels asked for (config.device), which must take the problem.
// Returns the validated problem, which the run takes from there on (so that a run validates once).
ValidProblem check_config(const RunConfig& config);

// Validates (check_config), refuses a run the memory cannot hold (UsageError, memory_need.hpp), runs, gathers,
// checks (when config.check). Throws RankFailure when a rank fails.
RunResult run(const RunConfig& config);
// run() of a configuration the caller checked already: valid is check_config(config)'s.
RunResult run(const RunConfig& config, const ValidProblem& valid);

// The seeded global inputs of a run (q, k, v, and dout for a backward), exactly what its ranks make
// (global_inputs in inputs.hpp).
GlobalTensors make_inputs(const RunConfig& config);

// Compares the run's tensors with the f64 reference on the same inputs, under the rule of the dtype and of the
// device the backend computes on, with every rank's verdict on the rows it owns (run_check.cpp).
CheckReport check_run(const RunConfig& config, const GlobalTensors& t);

}  // namespace cpsim
