// A counting run: the unchanged strategy code on C counting ranks (threads), no math and no data.
//
// Each rank walks the path of sim/runtime/rank_run.cpp: allocates its q, k, v shards ([B, S/C, N, D]), builds the
// strategy, runs forward (and backward, on a dout shard) between Recorder phase marks. What comes back per rank:
// the Recorder (work per step, calls and bytes, peak memory: what the numeric run reports) and the Program of
// every operation issued, which the simulated clock replays.
#pragma once
#include <vector>

#include "sim/core/recorder.hpp"
#include "sim/model/program.hpp"
#include "sim/strategies/strategy.hpp"

namespace cpsim::model {

struct CountOptions {
  bool backward = true;
  int slots = 0;       // ranks running at once; 0: the hardware threads
  bool spans = false;  // keep the positions of every attention op (for a modeled trace)
  bool step_work = true;  // keep each rank's work per step (Recorder::step_work); off: totals only
};

struct CountResult {
  std::vector<Recorder> ranks;  // in rank order
  Programs programs;
};

// Counts the validated problem. Throws the first rank's error if one fails.
CountResult count_run(const ValidProblem& problem, const CountOptions& options = {});
// Validates the problem (UsageError), then counts.
CountResult count_run(const Problem& problem, StrategyKind strategy, const CountOptions& options = {});

}  // namespace cpsim::model
