// One rank's part of a run (run.hpp): what the launcher runs on every rank, and what it sends back.
//
//   1. the backend's device (the device registry), this rank's shard of the seeded inputs (inputs.hpp), uploaded
//   2. strategy.forward between the Recorder's "forward" marks (and strategy.backward on the dout shard)
//   3. the outputs downloaded as doubles, with where the LSE was computed, serialised for the caller (unless the run
//      keeps no outputs: then nothing is downloaded or sent)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/positions.hpp"
#include "sim/runtime/run.hpp"

namespace cpsim {

// What one rank sends back: its rows of out, dq, dk, dv (input sharding) and the LSE it computed,
// lse [B, lse_heads, n] for heads [lse_head0, lse_head0 + lse_heads) at the n positions lse_positions.
struct RankResult {
  std::vector<double> out, lse, dq, dk, dv;
  std::int64_t lse_heads = 0, lse_head0 = 0;
  Positions lse_positions;

  std::string serialize() const;
  static RankResult deserialize(const std::string& bytes);
};

// Runs the rank's part of cfg on comm and returns its RankResult, serialised (with no tensors when the run keeps
// no outputs: keeps_outputs below). valid: validated(cfg.problem, cfg.strategy), made once for the run.
std::string run_rank(const RunConfig& cfg, const ValidProblem& valid, Communicator& comm);

// Whether the ranks download and send back their outputs (RunConfig::keep_outputs; a check needs them).
inline bool keeps_outputs(const RunConfig& cfg) {
  return cfg.keep_outputs || cfg.check;
}

}  // namespace cpsim
