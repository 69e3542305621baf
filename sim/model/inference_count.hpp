// A counting run of an inference strategy (sim/strategies/inference.hpp): the unchanged strategy code on C counting
// ranks, sizes only, as count_run.hpp does for the training strategies. Each rank allocates its padded shards
// (q: [B, n, Nq, D], k, v: [B, m, Nkv, D]) and runs forward between "forward" phase marks. Returns every rank's
// Recorder (bytes, work, peak memory: what a numeric run reports) and the Program the simulated clock replays.
#pragma once
#include <vector>

#include "sim/core/recorder.hpp"
#include "sim/model/program.hpp"
#include "sim/strategies/inference.hpp"

namespace cpsim::model {

struct InferenceCount {
  std::vector<Recorder> ranks;  // in rank order
  Programs programs;
};

// Validates the problem (UsageError), then counts.
InferenceCount count_inference(const InferenceProblem& p, InferenceKind kind, bool spans = false);

}  // namespace cpsim::model
