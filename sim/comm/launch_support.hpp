// What the backends' launch functions share.
#pragma once
#include <string>
#include <vector>

#include "sim/comm/launcher.hpp"

namespace cpsim {

// RankFailure for `rank`, without repeating the rank when the message already starts with it
// ("rank 2 waited 5.0 s ..." -> "rank 2: waited 5.0 s ...").
RankFailure rank_failure(int rank, const std::string& what);

// 0, 1, ..., n-1: the world ranks of a world communicator.
std::vector<int> iota_ranks(int n);

// The outcomes of an in-process launch of n ranks, before they run: rank numbers set, each with a Recorder
// (tracing as asked) whose clock starts at one shared epoch, so every rank's trace lines up.
std::vector<RankOutcome> fresh_outcomes(int n, bool tracing);

}  // namespace cpsim
