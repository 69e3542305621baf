// One inference step on C ranks (sim/strategies/inference.hpp), start to finish, checked like a training run:
//
//   validate -> launch C ranks on the backend -> each rank makes its shards of the seeded inputs (q of its new
//   tokens, k and v of its cache share and its new tokens, padded to the largest shard), runs the strategy's
//   forward between "forward" marks, sends back its rows of out and lse -> assembled in token order -> checked
//   against the single-process f64 reference of the whole step (sim/kernels/check.hpp's rules, with the C - 1
//   merges a row goes through).
// The seeded inputs follow inputs.hpp's definition on the step's own tensors: q is [B, T, Nq, D] (stream q), k and v
// are [B, T+P, Nkv, D] (streams k, v); element i of each in that order is normal_at(seed, stream, i) rounded to the
// dtype, so the check's reference (attention_problem with Sq = T, Sk = T+P, queries at positions P..P+T-1) sees the
// same values bit for bit.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/comm/backend.hpp"
#include "sim/core/json.hpp"
#include "sim/kernels/check.hpp"
#include "sim/runtime/run.hpp"
#include "sim/strategies/inference.hpp"

namespace cpsim {

struct InferenceRunConfig {
  InferenceKind kind = InferenceKind::pass_kv;
  InferenceProblem problem;
  Backend backend = Backend::threads;
  bool check = false;
  std::uint64_t seed = 1;
  bool tracing = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // Called on every rank at each step mark (lessons pause here).
  std::function<void(Communicator& comm, const std::string& phase, int step)> step_hook;
};

struct InferenceRunResult {
  InferenceRunConfig config;
  std::vector<RankReport> ranks;  // positions: the rank's new tokens
  std::vector<double> out, lse;   // out: [B, T, Nq, D], lse: [B, Nq, T], in token order
  CheckReport check;              // ran only when config.check
  double wall_ms = 0;
};

// UsageError for an impossible problem (validate) or a backend that does not run these strategies: they run on the
// CPU backends (threads, processes, and mpi under mpirun, every process running the same command); the GPU backends
// refuse them, naming the ones that run them.
void check_inference_config(const InferenceRunConfig& cfg);

// Checks the configuration, runs, gathers, checks (when cfg.check). Throws RankFailure when a rank fails. Under MPI
// only rank 0 gathers: the other processes get a result with no ranks.
InferenceRunResult run_inference(const InferenceRunConfig& cfg);

// The per-rank table (new tokens, K/V rows, bytes sent and received, pairs, the forward's time, per token), then
// the check when it ran.
std::string format_inference_report(const InferenceRunResult& r);
Json inference_run_json(const InferenceRunResult& r);
// The trace of a traced run (cfg.tracing; UsageError otherwise), for the visualizer (trace.hpp): otherData.run holds
// the config (strategy, T + P as seq, new_tokens, cached, the causal mask) and per rank the positions of its K/V
// (cache share and new tokens) as position_runs, its new tokens as new_position_runs, its work, bytes and times.
std::string inference_trace_json(const InferenceRunResult& r);

}  // namespace cpsim
