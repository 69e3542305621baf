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

}  // namespace cpsim
